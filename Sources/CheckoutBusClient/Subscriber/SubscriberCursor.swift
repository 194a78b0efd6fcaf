#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// Where a ``BusSubscriber`` resumes: the `seq` of the last envelope its handler finished.
///
/// ``BusSubscriber`` calls ``load()`` once when it starts and resumes from the returned `seq` + 1;
/// it calls ``commit(_:)`` after every handler call returns, with that envelope's `seq`. Commits
/// only ever grow. An implementation that loses its latest commits (after a crash) makes the
/// subscriber hand those envelopes over again: delivery is at least once, and a handler that is
/// idempotent (keyed on `seq` or `idempotency_key`) has an exactly-once effect.
///
/// Not `Sendable`: a cursor is used on the subscriber's thread only.
public protocol SubscriberCursor: AnyObject {
    /// The last handled `seq`, or 0 when nothing was handled yet.
    /// - Throws: when the stored position cannot be read; the subscriber does not start.
    func load() throws -> Int64

    /// Records that every envelope up to and including `seq` was handled.
    /// - Throws: when the position cannot be stored; the subscriber stops with that error.
    func commit(_ seq: Int64) throws

    /// Whether the position outlives the process (a file, a database): the subscriber reports
    /// itself `durable`, and the daemon keeps showing it, `up 0`, once it is gone
    /// (docs/observability.md, "Subscribers, live and gone"). Default: true.
    var keepsPosition: Bool { get }

    /// Whether ``commit(_:)`` may block the calling thread (a file write, a flush): the async
    /// ``Subscriber`` then commits on a queue of its own, off the cooperative pool. Default: true.
    var commitMayBlock: Bool { get }

    /// The journal the kept position is in (the daemon's `journal-id`, which its heartbeats name),
    /// when the cursor keeps it: a daemon whose first heartbeat names another journal is refused
    /// (`cursor_mismatch`), since its seqs are not the position's. Nil: not known (a position kept
    /// before, or moved by `checkoutbus cursor set`): the first heartbeat's is adopted. Default: nil.
    var journal: String? { get }

    /// Records that the kept position is in journal `id`: called at the first heartbeat when
    /// ``journal`` is nil, before anything is delivered. Default: nothing kept.
    /// - Throws: when it cannot be stored; the subscriber stops with that error.
    func adoptJournal(_ id: String) throws
}

extension SubscriberCursor {
    public var keepsPosition: Bool { true }
    public var commitMayBlock: Bool { true }
    public var journal: String? { nil }
    public func adoptJournal(_ id: String) throws {}
}

/// A cursor in memory: starts at a given `seq`, forgets everything when the process ends.
///
/// For `checkoutbus tail --since` and tests. Not `Sendable`.
public final class MemoryCursor: SubscriberCursor {
    public private(set) var seq: Int64

    /// - Parameters:
    ///   - seq: the last `seq` already handled (0: start at the beginning of the journal).
    ///   - keepsPosition: the application keeps the position elsewhere (a database, a checkpoint)
    ///     and resumes from it: reported `durable` (``SubscriberCursor/keepsPosition``).
    ///   - journal: the journal the kept position is in, if known (``SubscriberCursor/journal``).
    ///   - onAdoptJournal: stores the journal adopted at the first heartbeat when `journal` is nil
    ///     (a worker's database keeps it beside the position).
    public init(seq: Int64 = 0, keepsPosition: Bool = false, journal: String? = nil,
                onAdoptJournal: ((String) throws -> Void)? = nil) {
        self.seq = seq
        self.keepsPosition = keepsPosition
        self.journal = journal
        self.onAdoptJournal = onAdoptJournal
    }

    public private(set) var journal: String?
    private let onAdoptJournal: ((String) throws -> Void)?

    public func adoptJournal(_ id: String) throws {
        try onAdoptJournal?(id)
        journal = id
    }

    public func load() -> Int64 { seq }

    public func commit(_ seq: Int64) { self.seq = seq }

    /// False: a commit is a store in memory.
    public var commitMayBlock: Bool { false }

    /// False by default: the position ends with the process. True when something else keeps it
    /// (`tail --record`'s file, a worker's database), which it resumes from.
    public var keepsPosition: Bool
}

/// A cursor in a small file, updated atomically with one `pwrite` per commit.
///
/// The file holds two fixed-width text slots, written alternately:
///
///     cursor v1 seq=00000000000000052310 check=9c1f0e7a5b3d2c11
///
/// Each slot carries a checksum of its `seq`; ``load()`` takes the valid slot with the larger
/// `seq`. A commit torn by a crash spoils only the slot being written, so the previous commit
/// survives: the file always holds a committed position, never a half-written one. A commit is
/// in the kernel when ``commit(_:)`` returns, so it survives `kill -9`; with `durable` each commit
/// is also `fdatasync`ed and survives a power loss (at the cost of a disk flush per event).
///
/// One subscriber per cursor file: the file is locked (`flock`) while a ``FileCursor`` holds it,
/// and a second one on the same file throws. ``committed(at:)`` reads it without the lock.
///
/// Not `Sendable`: owned by the subscriber's thread. The file descriptor is closed in `deinit`.
public final class FileCursor: SubscriberCursor {
    public let path: String
    public let durable: Bool
    private let fd: Int32
    private var generation = 0
    private var seq: Int64 = 0

    package static let prefix = Array("cursor v1 seq=".utf8)
    package static let checkLabel = Array(" check=".utf8)
    /// One slot: prefix, 20 digits, label, 16 hex digits, newline.
    package static let slotSize = prefix.count + 20 + checkLabel.count + 16 + 1

    /// Opens (creating if missing) the cursor file at `path` and reads the committed position.
    /// - Throws: ``SubscriberError`` when the file cannot be opened or read.
    public init(path: String, durable: Bool = false) throws(SubscriberError) {
        self.path = path
        self.durable = durable
        // The descriptor is stored only once the cursor is whole: an initializer that throws after
        // every property is set runs `deinit`, which would close it a second time — by then
        // perhaps another thread's file under the same number.
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw SubscriberError(.cursorUnusable, "cannot open cursor file \(path): \(String(cString: strerror(errno)))") }
        // One subscriber per cursor: two would both handle every envelope and overwrite each
        // other's commits. Held until this cursor is released (or the process ends).
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            throw SubscriberError(.cursorInUse, "cursor file \(path) is in use by another subscriber")
        }
        let committed: (seq: Int64, generation: Int)
        do {
            committed = try FileCursor.read(fd, path)
        } catch {
            close(fd)
            throw error
        }
        self.fd = fd
        (seq, generation) = committed
    }

    /// The position committed in the cursor file at `path` (0 when it has none), read without
    /// taking the cursor: for monitoring a subscriber that holds it.
    public static func committed(at path: String) throws(SubscriberError) -> Int64 {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 && errno == ENOENT { return 0 }
        guard fd >= 0 else { throw SubscriberError(.cursorUnusable, "cannot open cursor file \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        return try read(fd, path).seq
    }

    /// The larger valid slot's `seq`, and the generation the next commit follows.
    private static func read(_ fd: Int32, _ path: String) throws(SubscriberError) -> (seq: Int64, generation: Int) {
        var buffer = [UInt8](repeating: 0, count: 2 * FileCursor.slotSize)
        let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard n >= 0 else { throw SubscriberError(.cursorUnusable, "cannot read cursor file \(path): \(String(cString: strerror(errno)))") }
        var (seq, generation): (Int64, Int) = (0, 0)
        for slot in 0..<2 {
            let start = slot * FileCursor.slotSize
            guard start + FileCursor.slotSize <= n,
                let value = FileCursor.decode(buffer[start..<start + FileCursor.slotSize])
            else { continue }
            if value >= seq {
                seq = value
                generation = slot + 1
            }
        }
        // A commit cut short spoils one slot; the first commit writes slot 0 only. Bytes in both
        // slots and neither readable is damage, not a crash: reading it as 0 would start the
        // subscriber over from the oldest retained envelope without a word.
        if generation == 0 && n > FileCursor.slotSize {
            throw SubscriberError(.cursorUnusable,
                "cursor file \(path) holds \(n) bytes and no readable position (both slots damaged, which a "
                    + "commit cut short never does): move it aside and set the position with "
                    + "`checkoutbus cursor set \(path) --to-seq SEQ`")
        }
        return (seq, generation)
    }

    deinit { close(fd) }

    public func load() -> Int64 { seq }

    /// Moves the cursor to `seq`, back or forward (`checkoutbus cursor set`): both slots are
    /// written, in turn, then synced, so the larger-slot rule of ``load()`` reads `seq`. A crash
    /// between the two writes of a move back leaves the old position (nothing moved); of a move
    /// forward, the new one.
    /// - Throws: ``SubscriberError`` ``SubscriberError/Code/cursorUnusable`` when a write or the
    ///   sync fails.
    public func reset(to seq: Int64) throws {
        var slot = FileCursor.encode(seq)
        for i in [generation % 2, (generation + 1) % 2] {
            let n = slot.withUnsafeMutableBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(i * FileCursor.slotSize)) }
            guard n == slot.count else {
                throw SubscriberError(.cursorUnusable, "cannot write cursor file \(path): \(n < 0 ? String(cString: strerror(errno)) : "short write")")
            }
        }
        guard fdatasync(fd) == 0 else {
            throw SubscriberError(.cursorUnusable, "cannot sync cursor file \(path): \(String(cString: strerror(errno)))")
        }
        self.seq = seq
        generation += 2
    }

    public func commit(_ seq: Int64) throws {
        self.seq = seq
        var slot = FileCursor.encode(seq)
        let offset = off_t((generation % 2) * FileCursor.slotSize)
        let n = slot.withUnsafeMutableBytes { pwrite(fd, $0.baseAddress, $0.count, offset) }
        guard n == slot.count else {
            throw SubscriberError(.cursorUnusable, "cannot write cursor file \(path): \(n < 0 ? String(cString: strerror(errno)) : "short write")")
        }
        generation += 1
        if durable && fdatasync(fd) != 0 {
            throw SubscriberError(.cursorUnusable, "cannot sync cursor file \(path): \(String(cString: strerror(errno)))")
        }
    }

    package static func encode(_ seq: Int64) -> [UInt8] {
        var out = prefix
        out.reserveCapacity(slotSize)
        let digits = Array(String(seq).utf8)
        out.append(contentsOf: [UInt8](repeating: UInt8(ascii: "0"), count: max(0, 20 - digits.count)))
        out.append(contentsOf: digits)
        out.append(contentsOf: checkLabel)
        let hex = Array(String(check(seq), radix: 16).utf8)
        out.append(contentsOf: [UInt8](repeating: UInt8(ascii: "0"), count: 16 - hex.count))
        out.append(contentsOf: hex)
        out.append(0x0A)
        return out
    }

    package static func decode(_ slot: ArraySlice<UInt8>) -> Int64? {
        let bytes = Array(slot)
        guard bytes.count == slotSize, bytes.starts(with: prefix), bytes.last == 0x0A else { return nil }
        let digitsEnd = prefix.count + 20
        guard let seq = Int64(String(decoding: bytes[prefix.count..<digitsEnd], as: UTF8.self)),
            bytes[digitsEnd..<digitsEnd + checkLabel.count].elementsEqual(checkLabel),
            let check = UInt64(String(decoding: bytes[(digitsEnd + checkLabel.count)..<(slotSize - 1)], as: UTF8.self), radix: 16),
            check == FileCursor.check(seq)
        else { return nil }
        return seq
    }

    /// A 64-bit mix of the value (SplitMix64's finaliser), so a torn slot never validates.
    package static func check(_ seq: Int64) -> UInt64 {
        var z = UInt64(bitPattern: seq) &+ 0x9e37_79b9_7f4a_7c15
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}

/// A subscriber failure that is not a libzmq error: a cursor file, a recording, a refused request.
///
/// `Sendable`. A struct, so codes can be added without breaking a `switch`: compare ``code`` with
/// the `static let`s of ``Code``; ``description`` says where and why, for people.
public struct SubscriberError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, for code to act on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// A cursor file cannot be opened, read, written or synced.
        public static let cursorUnusable = Code("cursor_unusable")
        /// A cursor file is locked by another subscriber.
        public static let cursorInUse = Code("cursor_in_use")
        /// A cursor is ahead of the journal it is used with: it belongs to another journal.
        public static let cursorMismatch = Code("cursor_mismatch")
        /// The daemon refused a control request (`replay`, `stats`), such as `not_retained`.
        public static let refused = Code("refused")
        /// A control reply the subscriber cannot read (a field missing).
        public static let badReply = Code("bad_reply")
        /// An endpoint answered as another shard than its position in the list says.
        public static let wrongShard = Code("wrong_shard")
        /// The endpoints are not one daemon's publish and control sockets: two journals (two
        /// daemons), whose one would be delivered as the other's, or a control endpoint that is an
        /// acknowledged ingest socket.
        public static let endpointMismatch = Code("endpoint_mismatch")
        /// A list of shard ids or a shard count that cannot be.
        public static let badShardList = Code("bad_shard_list")
        /// A topic prefix longer than ``TopicLimits/maxPrefixBytes``, or more prefixes than
        /// ``TopicLimits/maxReplayPrefixes``: the daemon would cut the subscription or refuse the replay.
        public static let badPrefix = Code("bad_prefix")
        /// A recording of envelopes (`tail --record`) cannot be opened, read, written or used.
        public static let recordingUnusable = Code("recording_unusable")
        /// A position (``JournalPosition``) that is neither a seq, a duration nor an RFC 3339 time.
        public static let badPosition = Code("bad_position")
        /// The daemon did not answer a control request in time.
        public static let noAnswer = Code("no_answer")
        /// Anything else.
        public static let failed = Code("failed")
    }

    public let code: Code
    public let description: String

    public init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }

    /// A failure without a more precise code (``Code/failed``).
    public init(_ description: String) { self.init(.failed, description) }

    /// The endpoint at `position` of a list of `count` shards turned out to be something else.
    package static func wrongShard(position: Int, count: Int, endpoint: String, found: String) -> SubscriberError {
        SubscriberError(.wrongShard,
            "the endpoint at position \(position) of \(count) (\(endpoint)) answered as \(found), not shard \(position)/\(count): "
                + "list every shard's endpoints, all \(count) of them, in shard order 0…\(count - 1)")
    }
}

extension FileCursor {
    /// The cursor files of a subscriber of `count` shards, one per shard, from one given path:
    /// `path` itself for a single daemon (the layout of a subscriber before shards), else
    /// `path.0-of-N`, `path.1-of-N`, … (docs/sharding.md).
    ///
    /// One file per shard keeps each commit a single `pwrite` into one ``FileCursor``, crash-safe
    /// exactly as with one daemon; the shards' positions are independent, so nothing has to commit
    /// them together. The shard count is in the name because a `seq` means something only for the
    /// journal of shard `I` of `N`: after a change of the shard count (a new generation of the bus)
    /// a subscriber starts on new files instead of reading another generation's positions.
    public static func paths(_ path: String, shards count: Int) -> [String] {
        count <= 1 ? [path] : (0..<count).map { "\(path).\($0)-of-\(count)" }
    }

    /// Opens (creating if missing) the cursor files of ``paths(_:shards:)``.
    /// - Throws: ``SubscriberError`` when one cannot be opened or read.
    public static func shardCursors(path: String, shards count: Int, durable: Bool = false) throws(SubscriberError) -> [FileCursor] {
        var cursors: [FileCursor] = []
        for p in paths(path, shards: count) { cursors.append(try FileCursor(path: p, durable: durable)) }
        return cursors
    }
}
