#if canImport(Glibc)
import Glibc
#endif

/// The idempotency keys of completed checkouts, each packed into 64 bits of the state table's
/// entry (``CheckoutStateTable``), so a completed checkout costs 8 bytes rather than a dictionary
/// entry and a heap string (≈ 100 bytes for a 45-byte order id).
///
/// A key is nearly always one of three shapes, and the first two are stored without its bytes (a
/// prefix is empty or ends in a separator, `/`, `-`, `_`, `:` and the like, so that keys share it):
/// - **a prefix, then the checkout id** (the checkout id itself, `ord-<checkout id>`, an order id
///   derived from the checkout): the prefix's number in ``prefixes``;
/// - **a prefix, then a decimal number** below 2^48 without a leading zero
///   (`gid://shopify/Order/5678901234`, `ORD-10042`): the prefix's number and the number;
/// - **anything else**: its bytes in ``arena``, their length first, and where they start.
///
/// The checkout id is not kept: whoever asks for the key has an event of that checkout, and so its
/// id (entries are found by a 128-bit hash of it). Prefixes are interned, at most
/// ``maxPrefixes`` of at most ``maxPrefixBytes`` bytes each (a producer inventing a new one per
/// order fills the table once, after which its keys go to the arena); the arena's bytes of keys
/// forgotten are reclaimed by ``CheckoutStateTable``, which knows where the live ones are.
///
/// A value (its arrays copy on write), as the table that holds it.
struct CompleteKeys {
    /// No key (the checkout has not completed).
    static let none: UInt64 = 0
    private static let tagShift: UInt64 = 62
    private static let prefixedID: UInt64 = 1
    private static let prefixedNumber: UInt64 = 2
    private static let inArena: UInt64 = 3
    private static let prefixShift: UInt64 = 48
    private static let payloadMask: UInt64 = (1 << 48) - 1
    static let maxPrefixes = 1 << 14
    static let maxPrefixBytes = 64

    /// Interned prefixes, one after the other; prefix `n` is `prefixBytes[prefixStarts[n]..<prefixStarts[n + 1]]`.
    /// The first is the empty one (the key is the checkout id).
    private var prefixBytes: [UInt8] = []
    private var prefixStarts: [Int32] = [0, 0]
    /// An index of the prefixes by hash (open addressing, at most half full): a prefix's number
    /// + 1, 0 for an empty slot. Found without a `Hasher` or an allocation per key.
    private var prefixSlots = [UInt16](repeating: 0, count: 16)
    private static let prefixSeed: UInt64 = 0x5851_f42d_4c95_7f2d
    /// Keys of no other shape: the length (one byte below 255; else 255 and four bytes), then the bytes.
    private(set) var arena: [UInt8] = []
    /// Bytes of ``arena`` that belong to keys no longer held.
    private(set) var deadBytes = 0

    /// Prefixes interned (the empty one included).
    var prefixCount: Int { prefixStarts.count - 1 }

    /// Bytes held (prefixes and their index, arena), for ``CheckoutStateTable/approximateBytes``.
    var approximateBytes: Int {
        arena.capacity + prefixBytes.capacity + prefixStarts.capacity * 4 + prefixSlots.count * 2
    }

    /// Prefix `n`'s bytes.
    private func prefix(_ n: Int) -> ArraySlice<UInt8> {
        prefixBytes[Int(prefixStarts[n])..<Int(prefixStarts[n + 1])]
    }

    /// Packs `key`, the idempotency key of a checkout whose id is `checkoutID` (both UTF-8).
    /// - Returns: the packed key, never ``none``.
    mutating func pack(_ key: UnsafeRawBufferPointer, checkoutID: UnsafeRawBufferPointer) -> UInt64 {
        let n = key.count
        let idCount = checkoutID.count
        if idCount > 0 ? n >= idCount && memcmp(key.baseAddress! + (n - idCount), checkoutID.baseAddress!, idCount) == 0 : n == 0,
            CompleteKeys.endsAField(key, n - idCount),
            let prefix = intern(UnsafeRawBufferPointer(rebasing: key[0..<(n - idCount)]))
        {
            return CompleteKeys.prefixedID << CompleteKeys.tagShift | prefix << CompleteKeys.prefixShift
        }
        // A trailing decimal number without a leading zero, below 2^48 (14 digits always are).
        var digitsStart = n
        while digitsStart > 0, digitsStart > n - 14, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(key[digitsStart - 1]) {
            digitsStart -= 1
        }
        if digitsStart < n, key[digitsStart] != UInt8(ascii: "0") || digitsStart == n - 1,
            CompleteKeys.endsAField(key, digitsStart),
            let prefix = intern(UnsafeRawBufferPointer(rebasing: key[0..<digitsStart]))
        {
            var number: UInt64 = 0
            for i in digitsStart..<n { number = number * 10 + UInt64(key[i] - UInt8(ascii: "0")) }
            return CompleteKeys.prefixedNumber << CompleteKeys.tagShift | prefix << CompleteKeys.prefixShift | number
        }
        let offset = UInt64(arena.count)
        if n < 255 {
            arena.append(UInt8(n))
        } else {
            arena.append(255)
            for shift in stride(from: 0, to: 32, by: 8) { arena.append(UInt8(truncatingIfNeeded: n >> shift)) }
        }
        arena.append(contentsOf: key)
        return CompleteKeys.inArena << CompleteKeys.tagShift | offset
    }

    /// The key `packed` stands for, of the checkout whose id is `checkoutID` (UTF-8); nil for ``none``.
    func unpack(_ packed: UInt64, checkoutID: UnsafeRawBufferPointer) -> String? {
        let tag = packed >> CompleteKeys.tagShift
        let prefix = Int((packed >> CompleteKeys.prefixShift) & UInt64(CompleteKeys.maxPrefixes - 1))
        switch tag {
        case CompleteKeys.prefixedID:
            let start = Int(prefixStarts[prefix])
            let count = Int(prefixStarts[prefix + 1]) - start
            // Built in place: one allocation at most (none for a key of 15 bytes or fewer).
            return prefixBytes.withUnsafeBytes { bytes in
                String(unsafeUninitializedCapacity: count + checkoutID.count) { out in
                    let base = UnsafeMutableRawPointer(out.baseAddress!)
                    if count > 0 { base.copyMemory(from: bytes.baseAddress! + start, byteCount: count) }
                    if !checkoutID.isEmpty { (base + count).copyMemory(from: checkoutID.baseAddress!, byteCount: checkoutID.count) }
                    return count + checkoutID.count
                }
            }
        case CompleteKeys.prefixedNumber:
            return String(decoding: self.prefix(prefix), as: UTF8.self) + String(packed & CompleteKeys.payloadMask)
        case CompleteKeys.inArena:
            let (start, end) = arenaBytes(at: Int(packed & CompleteKeys.payloadMask))
            return String(decoding: arena[start..<end], as: UTF8.self)
        default:
            return nil
        }
    }

    /// ``unpack(_:checkoutID:)`` with the checkout id as a string.
    func unpack(_ packed: UInt64, checkoutID: String) -> String? {
        var id = checkoutID
        return id.withUTF8 { unpack(packed, checkoutID: UnsafeRawBufferPointer($0)) }
    }

    /// The key `packed` is no longer held: its arena bytes, if any, are dead.
    mutating func release(_ packed: UInt64) {
        guard packed >> CompleteKeys.tagShift == CompleteKeys.inArena else { return }
        let offset = Int(packed & CompleteKeys.payloadMask)
        deadBytes += arenaBytes(at: offset).end - offset
    }

    /// Where the bytes of the arena key at `offset` (its length's first byte) start and end.
    private func arenaBytes(at offset: Int) -> (start: Int, end: Int) {
        let first = Int(arena[offset])
        guard first == 255 else { return (offset + 1, offset + 1 + first) }
        var n = 0
        for i in 0..<4 { n |= Int(arena[offset + 1 + i]) << (8 * i) }
        return (offset + 5, offset + 5 + n)
    }

    /// Whether the arena is worth compacting: more dead bytes than live, and at least 64 KiB of
    /// them and a byte per entry of a table of `entries` (a compaction reads every entry's
    /// flags: so it comes at most once per that many bytes forgotten, a few per eviction).
    func wantsCompaction(entries: Int) -> Bool {
        deadBytes >= max(64 << 10, entries) && deadBytes * 2 > arena.count
    }

    /// Starts a compaction: the live keys are then moved one by one with ``move(_:into:)`` (the
    /// table passes every packed key it holds), and ``finishCompaction(_:)`` installs the result.
    func startCompaction() -> [UInt8] {
        var fresh: [UInt8] = []
        fresh.reserveCapacity(arena.count - deadBytes)
        return fresh
    }

    /// The packed key `packed` as it is after its bytes move to `fresh` (keys of other shapes as they are).
    func move(_ packed: UInt64, into fresh: inout [UInt8]) -> UInt64 {
        guard packed >> CompleteKeys.tagShift == CompleteKeys.inArena else { return packed }
        let offset = Int(packed & CompleteKeys.payloadMask)
        let end = arenaBytes(at: offset).end
        let moved = UInt64(fresh.count)
        fresh.append(contentsOf: arena[offset..<end])
        return CompleteKeys.inArena << CompleteKeys.tagShift | moved
    }

    mutating func finishCompaction(_ fresh: [UInt8]) {
        arena = fresh
        deadBytes = 0
    }

    /// Whether `key`'s first `count` bytes are empty or end in a separator (`/ - _ : . # = |`,
    /// a space): a prefix worth interning, shared by many keys (`gid://shopify/Order/`, `ord-`).
    /// A key that only looks split there — a UUID ending in digits (`…0a1b2c3d4e57`), a key that
    /// happens to end in a short checkout id — would leave a prefix of its own: its bytes go to
    /// the arena instead, and the prefixes stay for the shapes they serve.
    private static func endsAField(_ key: UnsafeRawBufferPointer, _ count: Int) -> Bool {
        guard count > 0 else { return true }
        switch key[count - 1] {
        case UInt8(ascii: "/"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: ":"), UInt8(ascii: "."),
             UInt8(ascii: "#"), UInt8(ascii: "="), UInt8(ascii: "|"), UInt8(ascii: " "):
            return true
        default:
            return false
        }
    }

    /// The number of `prefix`, interned now if it is new; nil when it is too long or the table is full.
    private mutating func intern(_ prefix: UnsafeRawBufferPointer) -> UInt64? {
        let n = prefix.count
        if n == 0 { return 0 }
        guard n <= CompleteKeys.maxPrefixBytes else { return nil }
        let mask = prefixSlots.count - 1
        var i = Int(truncatingIfNeeded: CanonicalHash.hashBytes(prefix.baseAddress!, n, seed: CompleteKeys.prefixSeed)) & mask
        while prefixSlots[i] != 0 {
            let number = Int(prefixSlots[i]) - 1
            let start = Int(prefixStarts[number])
            if Int(prefixStarts[number + 1]) - start == n,
                prefixBytes.withUnsafeBytes({ memcmp($0.baseAddress! + start, prefix.baseAddress!, n) }) == 0
            {
                return UInt64(number)
            }
            i = (i + 1) & mask
        }
        guard prefixCount < CompleteKeys.maxPrefixes else { return nil }
        let number = prefixCount
        prefixBytes.append(contentsOf: prefix)
        prefixStarts.append(Int32(prefixBytes.count))
        prefixSlots[i] = UInt16(number + 1)
        if prefixCount * 2 > prefixSlots.count { growPrefixSlots() }
        return UInt64(number)
    }

    /// Doubles the prefixes' index.
    private mutating func growPrefixSlots() {
        var slots = [UInt16](repeating: 0, count: prefixSlots.count * 2)
        let mask = slots.count - 1
        prefixBytes.withUnsafeBytes { bytes in
            for number in 1..<prefixCount {
                let start = Int(prefixStarts[number])
                let h = CanonicalHash.hashBytes(bytes.baseAddress! + start, Int(prefixStarts[number + 1]) - start, seed: CompleteKeys.prefixSeed)
                var i = Int(truncatingIfNeeded: h) & mask
                while slots[i] != 0 { i = (i + 1) & mask }
                slots[i] = UInt16(number + 1)
            }
        }
        prefixSlots = slots
    }
}
