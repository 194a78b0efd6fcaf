#if canImport(Glibc)
import Glibc
#endif

/// The idempotency keys of completed checkouts, each packed into 64 bits of the state table's
/// entry (``CheckoutStateTable``), so a completed checkout costs 8 bytes rather than a dictionary
/// entry and a heap string (≈ 100 bytes for a 45-byte order id).
///
/// A key is nearly always one of three shapes, and the first two are stored without its bytes:
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

    /// Interned prefixes; the first is the empty one (the key is the checkout id).
    private(set) var prefixes: [[UInt8]] = [[]]
    private var prefixNumbers: [[UInt8]: UInt64] = [[]: 0]
    /// Keys of no other shape: the length (one byte below 255; else 255 and four bytes), then the bytes.
    private(set) var arena: [UInt8] = []
    /// Bytes of ``arena`` that belong to keys no longer held.
    private(set) var deadBytes = 0

    /// Bytes held (prefixes, arena), for ``CheckoutStateTable/approximateBytes``.
    var approximateBytes: Int {
        arena.capacity + prefixes.reduce(0) { $0 + $1.count + 48 }
    }

    /// Packs `key`, the idempotency key of a checkout whose id is `checkoutID` (both UTF-8).
    /// - Returns: the packed key, never ``none``.
    mutating func pack(_ key: UnsafeRawBufferPointer, checkoutID: UnsafeRawBufferPointer) -> UInt64 {
        let n = key.count
        let idCount = checkoutID.count
        if idCount > 0 ? n >= idCount && memcmp(key.baseAddress! + (n - idCount), checkoutID.baseAddress!, idCount) == 0 : n == 0,
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
            digitsStart == 0 || !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(key[digitsStart - 1]),
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

    /// ``pack(_:checkoutID:)`` of strings.
    mutating func pack(_ key: String, checkoutID: String) -> UInt64 {
        var key = key
        var id = checkoutID
        return key.withUTF8 { k in id.withUTF8 { pack(UnsafeRawBufferPointer(k), checkoutID: UnsafeRawBufferPointer($0)) } }
    }

    /// The key `packed` stands for, of the checkout whose id is `checkoutID` (UTF-8); nil for ``none``.
    func unpack(_ packed: UInt64, checkoutID: UnsafeRawBufferPointer) -> String? {
        let tag = packed >> CompleteKeys.tagShift
        let prefix = Int((packed >> CompleteKeys.prefixShift) & UInt64(CompleteKeys.maxPrefixes - 1))
        switch tag {
        case CompleteKeys.prefixedID:
            var bytes = prefixes[prefix]
            bytes.append(contentsOf: checkoutID)
            return String(decoding: bytes, as: UTF8.self)
        case CompleteKeys.prefixedNumber:
            return String(decoding: prefixes[prefix], as: UTF8.self) + String(packed & CompleteKeys.payloadMask)
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

    /// Whether the arena is worth compacting: more dead bytes than live, and at least 64 KiB of them.
    var wantsCompaction: Bool { deadBytes >= 64 << 10 && deadBytes * 2 > arena.count }

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

    /// The number of `prefix`, interned now if it is new; nil when it is too long or the table is full.
    private mutating func intern(_ prefix: UnsafeRawBufferPointer) -> UInt64? {
        if prefix.isEmpty { return 0 }
        guard prefix.count <= CompleteKeys.maxPrefixBytes else { return nil }
        let bytes = [UInt8](prefix)
        if let number = prefixNumbers[bytes] { return number }
        guard prefixes.count < CompleteKeys.maxPrefixes else { return nil }
        let number = UInt64(prefixes.count)
        prefixes.append(bytes)
        prefixNumbers[bytes] = number
        return number
    }
}
