#if canImport(Glibc)
import Glibc
#endif
import CPrefetch
import CheckoutBusProtocol
import CheckoutBusJSON

/// Per-checkout lifecycle state, bounded: an LRU of at most `capacity` checkouts, each forgotten
/// after `idleTTL` seconds without an event.
///
/// Checkouts are keyed by a 128-bit hash of their id (no id strings are kept), and state lives in
/// parallel columns (one allocation) with an open-addressing index (README "Performance" has the
/// bytes per tracked checkout, measured by `checkoutbus bench`). A completed checkout also keeps
/// the idempotency key its first `complete` was published under, so a repeated `complete` reuses
/// it: packed into a column of its own (``CompleteKeys``), in most shapes without its bytes.
///
/// Not `Sendable`: owned by the pipeline thread.
package struct CheckoutStateTable {
    /// What is remembered about one checkout.
    package struct Flags: OptionSet, Sendable {
        package let rawValue: UInt8
        package init(rawValue: UInt8) { self.rawValue = rawValue }
        /// A snapshot was published for it and `snapshotHash` holds its hash.
        package static let hasSnapshot = Flags(rawValue: 1)
        /// A `complete` was published for it.
        package static let completed = Flags(rawValue: 2)
        /// `snapshotHash` is the hash of the snapshot as the journal holds it, buyer data redacted
        /// (state rebuilt at start): compare a new snapshot's redacted form with it.
        package static let redactedHash = Flags(rawValue: 4)
        /// A terminal `fail` was published for it and its error's hash (code, raw code, message)
        /// is kept (``failureHash(_:)``), so the same failure reported again is a repeat.
        package static let failed = Flags(rawValue: 8)
    }

    package let capacity: Int
    package let idleTTL: UInt32

    /// The entries' columns (key halves, snapshot hash, packed complete key, last seen, LRU links, flags), each
    /// `entryCapacity` long, in one allocation grown all together (``Columns``); and the index.
    /// Reached through pointers held here: a new checkout is one capacity check, not an append
    /// (with its uniqueness and capacity checks) to each of eight arrays. The table stays a value:
    /// ``makeUnique()`` copies the buffers before the first change to a copy of the table.
    private var buffers: Buffers
    private var keyLo: UnsafeMutablePointer<UInt64>
    /// The upper half of the key's second hash: 96 bits of key in all, which tell 100 million
    /// checkouts apart with a chance of a collision below 10^-13 (and the seed is per process).
    private var keyHi: UnsafeMutablePointer<UInt32>
    private var snapshotHash: UnsafeMutablePointer<UInt64>
    /// What a checkout needs beyond its snapshot's hash, one word for either: a completed
    /// checkout's idempotency key as ``keys`` packed it; else, for one whose last terminal failure
    /// is kept (``Flags/failed``), that failure's hash; else 0. A checkout both completed and
    /// failed keeps its failure's hash in ``failureHashes``.
    private var extra: UnsafeMutablePointer<UInt64>
    private var lastSeen: UnsafeMutablePointer<UInt32>
    private var prev: UnsafeMutablePointer<Int32>
    /// An entry's next in the LRU list; for a free entry, the next free one.
    private var next: UnsafeMutablePointer<Int32>
    private var flags: UnsafeMutablePointer<Flags>
    /// Entries ever allocated (in use or free) and room for them.
    private var entryCount = 0
    private var entryCapacity = 0
    /// What the packed keys refer to: interned prefixes, and the bytes of keys of no packable shape.
    private var keys = CompleteKeys()
    /// The hash of the last terminal failure of a checkout flagged both ``Flags/failed`` and
    /// ``Flags/completed`` (a `fail` after its `complete`: rare); the others keep it in ``extra``.
    private var failureHashes: [Int32: UInt64] = [:]
    /// The index: -1 when empty, else an entry (low 27 bits) and 4 bits of its second hash above
    /// it, so most probes past other checkouts' slots need not read their keys. `slotMask + 1` long.
    private var slots: UnsafeMutablePointer<Int32>
    private var slotMask = 0
    private var head: Int32 = -1  // most recently used
    private var tail: Int32 = -1  // least recently used
    /// Entries forgotten and free for reuse, last freed first, linked through ``next``.
    private var freeHead: Int32 = -1

    /// Checkouts tracked now.
    package private(set) var count = 0
    /// Checkouts forgotten because the table was full.
    package private(set) var evicted: UInt64 = 0
    /// Checkouts forgotten because they were idle longer than the TTL.
    package private(set) var expired: UInt64 = 0

    /// - Parameters:
    ///   - capacity: most checkouts tracked at once (least recently used are evicted first).
    ///   - idleTTL: seconds without an event after which a checkout is forgotten.
    package init(capacity: Int, idleTTL: UInt32) {
        precondition(capacity < 1 << 27, "a state table holds at most 2^27 - 1 checkouts")
        self.capacity = max(1, capacity)
        self.idleTTL = max(1, idleTTL)
        buffers = Buffers()
        (keyLo, snapshotHash, extra, keyHi, lastSeen, prev, next, flags) = buffers.setColumns(capacity: 0, copying: 0)
        slots = buffers.setSlots(count: 16)
        slotMask = 15
    }

    /// A handle to one checkout's state, valid until the next insertion.
    package typealias Entry = Int32

    /// A checkout id's two hashes: what the table keeps of it.
    package struct Key: Sendable {
        let lo: UInt64
        let hi: UInt64
    }

    /// Random per process and never stored: a sender cannot choose checkout ids that share an
    /// index slot (the table is not persisted, so nothing depends on the values).
    private static let seed = UInt64.random(in: .min ... .max)

    /// Hashes a checkout id for ``prefetch(_:)`` and ``touch(_:now:)``.
    package static func key(_ checkoutID: String) -> Key {
        var id = checkoutID
        return id.withUTF8 { key(utf8: UnsafeRawBufferPointer($0)) }
    }

    /// ``key(_:)`` of the id whose UTF-8 is `utf8` (read in place from a message).
    package static func key(utf8: UnsafeRawBufferPointer) -> Key {
        let seed = CheckoutStateTable.seed
        let p = utf8.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!
        let (lo, hi) = CanonicalHash.hashBytes(p, utf8.count, seeds: 0x9e37_79b9_7f4a_7c15 ^ seed,
                                              0xc2b2_ae3d_27d4_eb4f ^ seed)
        return Key(lo: lo, hi: hi)
    }

    /// Starts loading what ``touch(_:now:)`` of `key` will read first — its index slot and, when
    /// the table is full, the entry it would evict — so the caller's work until then overlaps the
    /// cache misses (a large table's slots are scattered over megabytes). A hint: no effect on
    /// state (`mutating` only so its arrays are read in place, without a retain and release each).
    package mutating func prefetch(_ key: Key) {
        cb_prefetch(slots + (Int(truncatingIfNeeded: key.lo) & slotMask))
        guard count >= capacity, tail >= 0 else { return }
        let e = Int(tail)
        cb_prefetch(keyHi + e)
        cb_prefetch(next + e)
        cb_prefetch(lastSeen + e)
        cb_prefetch(flags + e)
        cb_prefetch(snapshotHash + e)
        cb_prefetch(extra + e)
        // The previous eviction prefetched this entry's key and links (see `remove`), so they can
        // be read here: the entry's index slot and the next tail's link get a prefetch as well.
        cb_prefetch(slots + (Int(truncatingIfNeeded: keyLo[e]) & slotMask))
        let p = Int(prev[e])
        if p >= 0 { cb_prefetch(next + p) }
    }

    /// Finds or creates the state of `checkoutID`, marking it most recently used at `now`.
    /// - Returns: the entry and whether it was newly created (or had expired and was reset).
    package mutating func touch(_ checkoutID: String, now: UInt32) -> (entry: Entry, isNew: Bool) {
        touch(CheckoutStateTable.key(checkoutID), now: now)
    }

    /// ``touch(_:now:)`` of a hashed id.
    package mutating func touch(_ key: Key, now: UInt32) -> (entry: Entry, isNew: Bool) {
        makeUnique()
        let (lo, hi) = (key.lo, CheckoutStateTable.upper(key.hi))
        var s = Int(truncatingIfNeeded: lo) & slotMask
        let tag = CheckoutStateTable.tag(hi)
        while slots[s] >= 0 {
            let e = slots[s] & CheckoutStateTable.entryMask
            if slots[s] & ~CheckoutStateTable.entryMask == tag && keyLo[Int(e)] == lo && keyHi[Int(e)] == hi {
                var isNew = false
                if now &- lastSeen[Int(e)] > idleTTL {
                    reset(e)
                    expired &+= 1
                    isNew = true
                }
                lastSeen[Int(e)] = now
                moveToFront(e)
                return (e, isNew)
            }
            s = (s + 1) & slotMask
        }
        let e = allocate(lo: lo, hi: hi, now: now)
        return (e, true)
    }

    package func flags(_ e: Entry) -> Flags { flags[Int(e)] }
    /// Sets flags other than ``Flags/completed`` and ``Flags/failed``, which come with what they
    /// promise is kept (``setCompleteKey(_:checkoutID:_:)``, ``setFailureHash(_:_:)``).
    package mutating func insertFlags(_ f: Flags, _ e: Entry) {
        precondition(f.isDisjoint(with: [.completed, .failed]), "completed and failed are set with their key and hash")
        makeUnique()
        flags[Int(e)].formUnion(f)
    }
    package func snapshotHash(_ e: Entry) -> UInt64 { snapshotHash[Int(e)] }

    package mutating func setSnapshotHash(_ h: UInt64, _ e: Entry) {
        makeUnique()
        snapshotHash[Int(e)] = h
        flags[Int(e)] = Flags(rawValue: flags[Int(e)].rawValue & ~Flags.redactedHash.rawValue | Flags.hasSnapshot.rawValue)
    }

    /// Sets the hash of the snapshot as published with buyer data redacted (``Flags/redactedHash``).
    package mutating func setRedactedSnapshotHash(_ h: UInt64, _ e: Entry) {
        makeUnique()
        snapshotHash[Int(e)] = h
        flags[Int(e)].formUnion([.hasSnapshot, .redactedHash])
    }

    /// The key a completed checkout's first `complete` was published under (nil for any other
    /// checkout); `checkoutID` is the checkout's id (UTF-8), which the table does not keep.
    package func completeKey(_ e: Entry, checkoutID: UnsafeRawBufferPointer) -> String? {
        flags[Int(e)].contains(.completed) ? keys.unpack(extra[Int(e)], checkoutID: checkoutID) : nil
    }

    /// ``completeKey(_:checkoutID:)`` with the checkout id as a string.
    package func completeKey(_ e: Entry, checkoutID: String) -> String? {
        flags[Int(e)].contains(.completed) ? keys.unpack(extra[Int(e)], checkoutID: checkoutID) : nil
    }

    /// Records the key a checkout's first `complete` was published under; marks it completed.
    /// `checkoutID` is the checkout's id (UTF-8).
    package mutating func setCompleteKey(_ key: UnsafeRawBufferPointer, checkoutID: UnsafeRawBufferPointer, _ e: Entry) {
        makeUnique()
        let f = flags[Int(e)]
        if f.contains(.completed) {
            releaseKey(e)
        } else if f.contains(.failed) {
            // Its failure's hash moves out of the word the key takes.
            failureHashes[e] = extra[Int(e)]
        }
        flags[Int(e)].insert(.completed)
        extra[Int(e)] = keys.pack(key, checkoutID: checkoutID)
    }

    /// ``setCompleteKey(_:checkoutID:_:)`` of strings.
    package mutating func setCompleteKey(_ key: String, checkoutID: String, _ e: Entry) {
        var key = key
        var id = checkoutID
        key.withUTF8 { k in id.withUTF8 { setCompleteKey(UnsafeRawBufferPointer(k), checkoutID: UnsafeRawBufferPointer($0), e) } }
    }

    /// The hash of the checkout's last terminal failure (``EventProcessor/failureHash(code:rawCode:message:)``), if
    /// it has one.
    package func failureHash(_ e: Entry) -> UInt64? {
        let f = flags[Int(e)]
        guard f.contains(.failed) else { return nil }
        return f.contains(.completed) ? failureHashes[e] : extra[Int(e)]
    }

    /// Records the checkout's last terminal failure.
    package mutating func setFailureHash(_ hash: UInt64, _ e: Entry) {
        makeUnique()
        flags[Int(e)].insert(.failed)
        if flags[Int(e)].contains(.completed) { failureHashes[e] = hash } else { extra[Int(e)] = hash }
    }

    /// Forgets the checkout's last failure (a new `start`: the buyer tries again).
    package mutating func clearFailure(_ e: Entry) {
        guard flags[Int(e)].contains(.failed) else { return }
        makeUnique()
        flags[Int(e)].remove(.failed)
        if flags[Int(e)].contains(.completed) { failureHashes.removeValue(forKey: e) } else { extra[Int(e)] = 0 }
    }

    /// Forgets checkouts idle longer than the TTL, oldest first. Call about once a second.
    package mutating func expire(now: UInt32) {
        guard tail >= 0 && now &- lastSeen[Int(tail)] > idleTTL else { return }
        makeUnique()
        while tail >= 0 && now &- lastSeen[Int(tail)] > idleTTL {
            remove(tail)
            expired &+= 1
        }
    }

    /// Zeroes ``evicted`` and ``expired`` (after the table was rebuilt at start).
    package mutating func clearCounts() {
        evicted = 0
        expired = 0
    }

    /// Bytes of memory the table holds in use now: its entries' columns (as far as entries were
    /// ever used: the room past them is allocated, never written, so not resident), the index, the
    /// complete keys' prefixes and arena, and the failures of checkouts both failed and completed.
    /// Per tracked checkout, what `/metrics` (`checkoutbus_state_bytes`) and `flood --memory` show.
    package var approximateBytes: Int {
        entryCount * Columns.bytesPerEntry + (slotMask + 1) * 4 + keys.approximateBytes + failureHashes.count * 32
    }

    // MARK: Internals

    private mutating func reset(_ e: Entry) {
        let f = flags[Int(e)]
        if f.contains(.completed) {
            releaseKey(e)
            // Only a checkout both completed and failed has a hash in ``failureHashes``: the
            // others skip the dictionary (a hash and a probe per new or forgotten checkout).
            if f.contains(.failed) { failureHashes.removeValue(forKey: e) }
        }
        flags[Int(e)] = []
        snapshotHash[Int(e)] = 0
        extra[Int(e)] = 0
    }

    /// Forgets completed entry `e`'s packed key; compacts the keys' arena when most of it is forgotten.
    private mutating func releaseKey(_ e: Entry) {
        let packed = extra[Int(e)]
        extra[Int(e)] = 0
        keys.release(packed)
        if keys.wantsCompaction(entries: entryCount) { compactKeys() }
    }

    /// Moves the live keys' arena bytes together: one pass over the entries, each completed
    /// checkout's packed key moved.
    @inline(never)
    private mutating func compactKeys() {
        var fresh = keys.startCompaction()
        for i in 0..<entryCount where flags[i].contains(.completed) {
            extra[i] = keys.move(extra[i], into: &fresh)
        }
        keys.finishCompaction(fresh)
    }

    private mutating func allocate(lo: UInt64, hi: UInt32, now: UInt32) -> Entry {
        if count >= capacity, tail >= 0 {
            remove(tail)
            evicted &+= 1
        }
        let e: Entry
        if freeHead >= 0 {
            e = freeHead
            freeHead = next[Int(e)]
            // `remove` reset it when it went on the free list.
            keyLo[Int(e)] = lo
            keyHi[Int(e)] = hi
            lastSeen[Int(e)] = now
        } else {
            if entryCount == entryCapacity { growColumns() }
            e = Entry(entryCount)
            entryCount += 1
            let i = Int(e)
            keyLo[i] = lo
            keyHi[i] = hi
            snapshotHash[i] = 0
            extra[i] = 0
            lastSeen[i] = now
            flags[i] = []
        }
        count += 1
        if count * 2 > slotMask + 1 { resizeSlots((slotMask + 1) * 2) }
        insertSlot(e)
        prev[Int(e)] = -1
        next[Int(e)] = head
        if head >= 0 { prev[Int(head)] = e }
        head = e
        if tail < 0 { tail = e }
        return e
    }

    private mutating func remove(_ e: Entry) {
        // Unlink from the LRU list.
        let p = prev[Int(e)]
        let n = next[Int(e)]
        if p >= 0 { next[Int(p)] = n } else { head = n }
        if n >= 0 { prev[Int(n)] = p } else { tail = p }
        if tail >= 0 && n < 0 {
            // An eviction: the next one forgets the new tail, whose key and link ``prefetch(_:)``
            // reads. Start loading them now, an event ahead.
            let t = Int(tail)
            cb_prefetch(keyLo + t)
            cb_prefetch(prev + t)
        }
        // Delete from the index with backward-shift, keeping probe chains intact.
        var s = Int(truncatingIfNeeded: keyLo[Int(e)]) & slotMask
        while slots[s] & CheckoutStateTable.entryMask != e { s = (s + 1) & slotMask }
        var hole = s
        var j = (s + 1) & slotMask
        while slots[j] >= 0 {
            let home = Int(truncatingIfNeeded: keyLo[Int(slots[j] & CheckoutStateTable.entryMask)]) & slotMask
            let distHole = (hole - home) & slotMask
            let distJ = (j - home) & slotMask
            if distHole < distJ {
                slots[hole] = slots[j]
                hole = j
            }
            j = (j + 1) & slotMask
        }
        slots[hole] = -1
        reset(e)
        next[Int(e)] = freeHead
        freeHead = e
        count -= 1
    }

    private mutating func moveToFront(_ e: Entry) {
        guard head != e else { return }
        let p = prev[Int(e)]
        let n = next[Int(e)]
        if p >= 0 { next[Int(p)] = n }
        if n >= 0 { prev[Int(n)] = p } else { tail = p }
        prev[Int(e)] = -1
        next[Int(e)] = head
        if head >= 0 { prev[Int(head)] = e }
        head = e
    }

    private mutating func insertSlot(_ e: Entry) {
        var s = Int(truncatingIfNeeded: keyLo[Int(e)]) & slotMask
        while slots[s] >= 0 { s = (s + 1) & slotMask }
        slots[s] = CheckoutStateTable.tag(keyHi[Int(e)]) | e
    }

    /// Entries fit in 27 bits (`--max-checkouts` is at most 100 million).
    private static let entryMask: Int32 = (1 << 27) - 1

    /// The part of a key's second hash the table keeps (``keyHi``).
    @inline(__always)
    private static func upper(_ hi: UInt64) -> UInt32 { UInt32(truncatingIfNeeded: hi >> 32) }

    /// Four bits of the second hash, in bits 27–30 of a slot.
    private static func tag(_ hi: UInt32) -> Int32 { Int32(truncatingIfNeeded: hi >> 28) << 27 }

    private mutating func resizeSlots(_ size: Int) {
        slots = buffers.setSlots(count: size)
        slotMask = size - 1
        var e = head
        while e >= 0 {
            insertSlot(e)
            e = next[Int(e)]
        }
    }

    /// Doubles the columns' room (as an array's append would), keeping the entries.
    private mutating func growColumns() {
        let capacity = max(16, entryCapacity * 2)
        (keyLo, snapshotHash, extra, keyHi, lastSeen, prev, next, flags) = buffers.setColumns(capacity: capacity, copying: entryCount)
        entryCapacity = capacity
    }

    /// Before a change: a copy of this table (its buffers shared) gets buffers of its own.
    @inline(__always)
    private mutating func makeUnique() {
        if !isKnownUniquelyReferenced(&buffers) { copyBuffers() }
    }

    @inline(never)
    private mutating func copyBuffers() {
        let old = buffers
        buffers = Buffers()
        (keyLo, snapshotHash, extra, keyHi, lastSeen, prev, next, flags) = buffers.setColumns(capacity: entryCapacity, copying: 0)
        old.columns.copy(count: entryCount, to: Columns(buffers.columnBase, capacity: entryCapacity))
        slots = buffers.setSlots(count: slotMask + 1)
        slots.update(from: old.slots, count: slotMask + 1)
    }
}

/// The columns of ``CheckoutStateTable``'s entries laid out in one block of `capacity` entries.
private struct Columns {
    static let bytesPerEntry = 8 * 3 + 4 * 4 + 1
    let keyLo: UnsafeMutablePointer<UInt64>
    let snapshotHash: UnsafeMutablePointer<UInt64>
    let extra: UnsafeMutablePointer<UInt64>
    let keyHi: UnsafeMutablePointer<UInt32>
    let lastSeen: UnsafeMutablePointer<UInt32>
    let prev: UnsafeMutablePointer<Int32>
    let next: UnsafeMutablePointer<Int32>
    let flags: UnsafeMutablePointer<CheckoutStateTable.Flags>

    init(_ base: UnsafeMutableRawPointer, capacity n: Int) {
        keyLo = base.bindMemory(to: UInt64.self, capacity: n)
        snapshotHash = (base + 8 * n).bindMemory(to: UInt64.self, capacity: n)
        extra = (base + 16 * n).bindMemory(to: UInt64.self, capacity: n)
        keyHi = (base + 24 * n).bindMemory(to: UInt32.self, capacity: n)
        lastSeen = (base + 28 * n).bindMemory(to: UInt32.self, capacity: n)
        prev = (base + 32 * n).bindMemory(to: Int32.self, capacity: n)
        next = (base + 36 * n).bindMemory(to: Int32.self, capacity: n)
        flags = (base + 40 * n).bindMemory(to: CheckoutStateTable.Flags.self, capacity: n)
    }

    /// Copies the first `count` entries into `other`.
    func copy(count: Int, to other: Columns) {
        other.keyLo.update(from: keyLo, count: count)
        other.keyHi.update(from: keyHi, count: count)
        other.snapshotHash.update(from: snapshotHash, count: count)
        other.extra.update(from: extra, count: count)
        other.lastSeen.update(from: lastSeen, count: count)
        other.prev.update(from: prev, count: count)
        other.next.update(from: next, count: count)
        other.flags.update(from: flags, count: count)
    }

    var pointers: (UnsafeMutablePointer<UInt64>, UnsafeMutablePointer<UInt64>, UnsafeMutablePointer<UInt64>,
                   UnsafeMutablePointer<UInt32>, UnsafeMutablePointer<UInt32>, UnsafeMutablePointer<Int32>, UnsafeMutablePointer<Int32>,
                   UnsafeMutablePointer<CheckoutStateTable.Flags>) {
        (keyLo, snapshotHash, extra, keyHi, lastSeen, prev, next, flags)
    }
}

/// Owns a ``CheckoutStateTable``'s memory: its entries' columns and its index. The table reads
/// and writes through pointers of its own; this frees the blocks, and tells a shared table
/// (``CheckoutStateTable/makeUnique()``) from one that is not.
///
/// Blocks of a megabyte or more are mapped from the kernel (``PageBlock``), not taken from the
/// allocator: a block the table outgrew goes back to the system at once (jemalloc's purge of a
/// large freed block only marks its pages free, and they stay resident until the kernel wants
/// them), and the room past the entries in use is never touched, so never resident.
private final class Buffers {
    private(set) var columnBase = PageBlock.allocate(byteCount: 1)
    private var columnBytes = 1
    private(set) var columnCapacity = 0
    private(set) var slots = PageBlock.allocate(byteCount: 4).bindMemory(to: Int32.self, capacity: 1)
    private var slotCount = 1

    var columns: Columns { Columns(columnBase, capacity: columnCapacity) }

    /// Replaces the columns with room for `capacity` entries, the first `count` copied over.
    func setColumns(capacity: Int, copying count: Int) -> (
        UnsafeMutablePointer<UInt64>, UnsafeMutablePointer<UInt64>, UnsafeMutablePointer<UInt64>, UnsafeMutablePointer<UInt32>,
        UnsafeMutablePointer<UInt32>, UnsafeMutablePointer<Int32>, UnsafeMutablePointer<Int32>,
        UnsafeMutablePointer<CheckoutStateTable.Flags>
    ) {
        let bytes = max(1, capacity * Columns.bytesPerEntry)
        let base = PageBlock.allocate(byteCount: bytes)
        let new = Columns(base, capacity: capacity)
        columns.copy(count: count, to: new)
        PageBlock.deallocate(columnBase, byteCount: columnBytes)
        (columnBase, columnBytes, columnCapacity) = (base, bytes, capacity)
        return new.pointers
    }

    /// Replaces the index with `count` empty slots.
    func setSlots(count: Int) -> UnsafeMutablePointer<Int32> {
        let new = PageBlock.allocate(byteCount: count * 4).bindMemory(to: Int32.self, capacity: count)
        new.initialize(repeating: -1, count: count)
        PageBlock.deallocate(UnsafeMutableRawPointer(slots), byteCount: slotCount * 4)
        (slots, slotCount) = (new, count)
        return new
    }

    deinit {
        PageBlock.deallocate(columnBase, byteCount: columnBytes)
        PageBlock.deallocate(UnsafeMutableRawPointer(slots), byteCount: slotCount * 4)
    }
}

/// Memory for a large table: mapped from the kernel from ``threshold`` bytes up (unmapped when
/// freed, its pages back to the system at once, untouched pages never resident), from the
/// allocator below it. Aligned to 8 bytes at least.
enum PageBlock {
    static let threshold = 1 << 20

    static func allocate(byteCount: Int) -> UnsafeMutableRawPointer {
        guard byteCount >= threshold else { return .allocate(byteCount: byteCount, alignment: 8) }
        let p = mmap(nil, byteCount, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        // As an allocation that fails: the process cannot go on without the table's memory.
        guard let p, p != MAP_FAILED else { fatalError("mmap of \(byteCount) bytes for the state table: \(String(cString: strerror(errno)))") }
        return p
    }

    static func deallocate(_ p: UnsafeMutableRawPointer, byteCount: Int) {
        guard byteCount >= threshold else { return p.deallocate() }
        // munmap fails only for an address range that was never mapped: a bug, not a condition.
        guard munmap(p, byteCount) == 0 else { fatalError("munmap of the state table's block: \(String(cString: strerror(errno)))") }
    }
}
