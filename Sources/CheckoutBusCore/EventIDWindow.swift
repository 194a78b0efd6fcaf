import CPrefetch
import CheckoutBusProtocol
import CheckoutBusJSON

/// The most recent `capacity` event ids (the ingest wrapper's `event_id`, each within its checkout)
/// and the `seq` each was published under, so a producer's retry of an event the bus already has
/// is recognised.
///
/// Ids are kept as two 64-bit hashes (a false match needs both to collide: about 2⁻¹²⁸ per pair).
/// A ring holds the entries; an open-addressing table indexes them and is rebuilt from the ring
/// after every `capacity` inserts, so evicted entries never accumulate. Each slot also carries 32
/// bits of the second hash, so a probe past another id's slot — and the miss every new event is —
/// stays within the table's cache lines instead of reading that id's entry. About 65 bytes per id.
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
    private var insertsSinceRebuild = 0

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
        table.withUnsafeBufferPointer { cb_prefetch($0.baseAddress! + (Int(truncatingIfNeeded: key.0) & mask)) }
    }

    /// The seq an id was recorded with (0 for an event that was suppressed), or nil if unknown.
    package func lookup(_ key: (UInt64, UInt64)) -> UInt64? {
        var s = Int(truncatingIfNeeded: key.0) & mask
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
        entries[i] = Entry(lo: key.0, hi: key.1, seq: seq)
        head = i + 1 == capacity ? 0 : i + 1
        count = min(count + 1, capacity)
        place(i, key)
        insertsSinceRebuild += 1
        if insertsSinceRebuild >= capacity { rebuild() }
    }

    /// Indexes entry `i`, whose hashes are `key`.
    private mutating func place(_ i: Int, _ key: (UInt64, UInt64)) {
        var s = Int(truncatingIfNeeded: key.0) & mask
        while table[s] != 0 { s = (s + 1) & mask }
        table[s] = key.1 << 32 | UInt64(i + 1)
    }

    /// Re-indexes the live entries only: slots of overwritten entries are dropped.
    private mutating func rebuild() {
        for s in table.indices { table[s] = 0 }
        var i = (head - count + capacity) % capacity
        for _ in 0..<count {
            place(i, (entries[i].lo, entries[i].hi))
            i = (i + 1) % capacity
        }
        insertsSinceRebuild = 0
    }
}
