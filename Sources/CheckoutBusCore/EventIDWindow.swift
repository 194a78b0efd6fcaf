import CPrefetch
import CheckoutBusProtocol
import CheckoutBusJSON

/// The most recent `capacity` event ids (the ingest wrapper's `event_id`, each within its checkout)
/// and the `seq` each was published under, so a producer's retry of an event the bus already has
/// is recognised.
///
/// Ids are kept as two 64-bit hashes (a false match needs both to collide: about 2⁻¹²⁸ per pair).
/// A ring holds the entries; an open-addressing table (linear probing, at most a quarter full)
/// indexes them. The entry a full ring overwrites leaves the table in the same insert, by
/// backward-shift deletion, so evicted entries never accumulate and the table is never rebuilt (a
/// rebuild of the whole table every `capacity` inserts stalled the pipeline for milliseconds at
/// the default window). Each slot also carries 32 bits of the second hash, so a probe past another
/// id's slot — and the miss every new event is — stays within the table's cache lines instead of
/// reading that id's entry. The home slot is taken from those same bits, so a deletion's shift
/// reads each slot's home from the slot, not from its entry in the ring (a cache miss each). Ids
/// that share a home slot are then told apart by the tag's other bits (12 at the default window)
/// before an entry is read. About 65 bytes per id.
/// `Sendable` as a value; owned by one ``EventProcessor``.
package struct EventIDWindow: Sendable {
    package let capacity: Int
    /// The ring: each id's two hashes and its seq side by side (24 bytes: one cache line to read,
    /// now and then two; one array to write).
    private var entries: [Entry]
    private struct Entry {
        var lo: UInt64
        var hi: UInt64
        var seq: UInt64
    }
    private var head = 0
    package private(set) var count = 0
    /// `tag << 32 | (index + 1)`, 0 when empty; the tag is the second hash's low 32 bits.
    private var table: [UInt64]
    private let mask: Int

    package init(capacity: Int) {
        self.capacity = max(1, capacity)
        entries = [Entry](repeating: Entry(lo: 0, hi: 0, seq: 0), count: self.capacity)
        var size = 16
        while size < self.capacity * 4 { size <<= 1 }
        table = [UInt64](repeating: 0, count: size)
        mask = size - 1
    }

    /// Random per process: a sender cannot choose event ids that share an index slot. The
    /// window is never stored (it is refilled from the journal's ids at start).
    private static let seed = UInt64.random(in: .min ... .max)

    /// The two hashes of an event id within its checkout (`checkout`: the checkout id's
    /// ``CheckoutStateTable/key(_:)``): the same id sent for two checkouts is two events, so
    /// producers that number each checkout's events alike are never taken for retries.
    package static func key(_ id: String, checkout: CheckoutStateTable.Key) -> (UInt64, UInt64) {
        var s = id
        return s.withUTF8 { key(utf8: UnsafeRawBufferPointer($0), checkout: checkout) }
    }

    /// ``key(_:checkout:)`` of the id whose UTF-8 is `utf8` (read in place from a message).
    package static func key(utf8: UnsafeRawBufferPointer, checkout: CheckoutStateTable.Key) -> (UInt64, UInt64) {
        let seed = EventIDWindow.seed
        let p = utf8.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!
        return CanonicalHash.hashBytes(p, utf8.count, seeds: 0x243f_6a88_85a3_08d3 ^ seed ^ checkout.lo,
                                      0x1319_8a2e_0370_7344 ^ seed ^ checkout.hi)
    }

    /// Starts loading the index slot ``lookup(_:)`` and ``insert(_:seq:)`` of `key` read first,
    /// so the caller's work until then overlaps the cache miss. A hint: no effect on the window
    /// (`mutating` only so its table is read in place, without a retain and release).
    package mutating func prefetch(_ key: (UInt64, UInt64)) {
        table.withUnsafeBufferPointer { cb_prefetch($0.baseAddress! + home(key.1)) }
    }

    /// The seq an id was recorded with (0 for an event that was suppressed), or nil if unknown.
    package func lookup(_ key: (UInt64, UInt64)) -> UInt64? {
        var s = home(key.1)
        let tag = key.1 << 32
        while true {
            let slot = table[s]
            if slot == 0 { return nil }
            if slot & 0xFFFF_FFFF_0000_0000 == tag {
                let e = entries[Int(truncatingIfNeeded: slot & 0xFFFF_FFFF) - 1]
                if e.lo == key.0 && e.hi == key.1 { return e.seq }
            }
            s = (s + 1) & mask
        }
    }

    /// Records an id; the oldest is forgotten once `capacity` are held.
    package mutating func insert(_ key: (UInt64, UInt64), seq: UInt64) {
        let i = head
        if count == capacity { unplace(i) }
        entries[i] = Entry(lo: key.0, hi: key.1, seq: seq)
        head = i + 1 == capacity ? 0 : i + 1
        count = min(count + 1, capacity)
        place(i, key)
        // The next insert takes the oldest entry's slot out: start loading it now.
        if count == capacity {
            let next = home(entries[head].hi)
            table.withUnsafeBufferPointer { cb_prefetch($0.baseAddress! + next) }
        }
    }

    /// The home slot of an id whose second hash is `hi` (or of a slot holding its tag, `hi`'s low
    /// 32 bits): the tag holds every bit the mask keeps while the table has at most 2³² slots (2²⁸
    /// at the largest `--dedupe-window`, 50,000,000).
    @inline(__always)
    private func home(_ hi: UInt64) -> Int { Int(truncatingIfNeeded: hi & 0xFFFF_FFFF) & mask }

    /// Indexes entry `i`, whose hashes are `key`.
    private mutating func place(_ i: Int, _ key: (UInt64, UInt64)) {
        var s = home(key.1)
        while table[s] != 0 { s = (s + 1) & mask }
        table[s] = key.1 << 32 | UInt64(i + 1)
    }

    /// Takes entry `i`'s slot out of the table (the entry is about to be overwritten), then moves
    /// back each slot after it in its run that may go in the gap — one whose home slot is not in
    /// the cyclic range after the gap up to itself — so every probe still finds its id before an
    /// empty slot (Knuth's algorithm R for linear probing: no tombstones).
    private mutating func unplace(_ i: Int) {
        let index = UInt64(i + 1)
        var s = home(entries[i].hi)
        while table[s] & 0xFFFF_FFFF != index {
            precondition(table[s] != 0, "an entry of the event-id window is missing from its table")
            s = (s + 1) & mask
        }
        var gap = s
        var j = (s + 1) & mask
        while table[j] != 0 {
            let slot = table[j]
            let slotHome = home(slot &>> 32)
            if (j &- slotHome) & mask >= (j &- gap) & mask {
                table[gap] = slot
                gap = j
            }
            j = (j + 1) & mask
        }
        table[gap] = 0
    }

    /// The table's occupied slots, for tests: always ``count``.
    package var occupiedSlots: Int { table.reduce(0) { $0 + ($1 == 0 ? 0 : 1) } }
}
