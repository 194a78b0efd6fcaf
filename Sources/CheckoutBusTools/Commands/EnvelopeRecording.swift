#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusCore
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// A JSON Lines file of envelopes, exactly as published, one per line — and its own cursor.
///
/// ``append(_:)`` writes an envelope and its newline with one `write(2)` on a file opened with
/// `O_APPEND`, so a line is either in the kernel whole or, when the process is killed in the middle
/// of a large write, torn at the end of the file. Opening the recording repairs that: a last line
/// without its newline is truncated away (``truncatedBytes``), and ``load()`` returns the `seq` of
/// the last complete line. The line *is* the commit, so ``commit(_:)`` does nothing: a recorder
/// killed at any point and restarted neither loses nor repeats a line.
///
/// **Several shards.** A recording of `N` shards (``init(path:shards:)``) interleaves their
/// envelopes in one file, each line with its `"shard"`; shard `I`'s cursor (``cursor(forShard:)``)
/// is the `seq` of the last complete line of shard `I`, found by reading the file backwards until
/// every shard's last line is found (or the file's start is reached).
///
/// **The shard count is recorded** in `PATH.shards` (`N` and a newline), written with the first
/// line: each generation of the bus (another shard count) starts new journals at seq 1, so a
/// recording's positions mean nothing for another count, and opening it with one is refused. A
/// recording without that file (made before it existed) is taken as it is for one shard, and for
/// several only if it holds lines of a shard other than 0; one with shard 0's lines alone (one
/// daemon's, most likely) is refused for several shards.
///
/// Used by `checkoutbus tail --record`. Not `Sendable`: owned by the subscriber's thread; the file
/// descriptor is closed in `deinit`.
package final class EnvelopeRecording: SubscriberCursor {
    package let path: String
    /// How many shards' envelopes the file interleaves (1: every line counts as one stream).
    package let shards: Int
    /// Bytes of a torn last line removed when the file was opened.
    package private(set) var truncatedBytes = 0
    /// Per shard, the `seq` of its last line appended, or found when the file was opened (0: none).
    package private(set) var lastSeqs: [Int64]
    /// Per shard, whether the file holds a line of it.
    package private(set) var hasLines: [Bool]
    private let fd: Int32
    private var line: [UInt8] = []
    /// Whether `PATH.shards` is still to be written (with the next line appended).
    private var needsShardCountFile = false

    /// The file recording the shard count of the recording at `path`.
    package static func shardCountPath(_ path: String) -> String { path + ".shards" }

    /// The `seq` of the last line appended, or found when the file was opened (0: none); with
    /// several shards, shard 0's.
    package var lastSeq: Int64 { lastSeqs[0] }
    /// Whether the file held no complete line when it was opened.
    package private(set) var wasEmpty = true

    /// Opens (creating if missing) the recording at `path`, repairs a torn last line and reads the
    /// last complete line's `seq`.
    /// - Throws: ``SubscriberError`` when the file cannot be opened, repaired, or its last complete
    ///   line is not an envelope with a `seq`.
    package convenience init(path: String) throws(SubscriberError) {
        try self.init(path: path, shards: 1)
    }

    /// Opens (creating if missing) the recording of `shards` shards at `path`, repairs a torn last
    /// line and reads each shard's last complete line's `seq`.
    /// - Throws: ``SubscriberError`` when the file cannot be opened or repaired, a line read is not
    ///   an envelope with a `seq`, or one belongs to a shard beyond `shards`.
    package init(path: String, shards: Int) throws(SubscriberError) {
        precondition(shards >= 1)
        self.path = path
        self.shards = shards
        lastSeqs = [Int64](repeating: 0, count: shards)
        hasLines = [Bool](repeating: false, count: shards)
        fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw SubscriberError(.recordingUnusable, "cannot open \(path): \(String(cString: strerror(errno)))") }
        try recover()
        try checkShardCount()
        line.reserveCapacity(4096)
    }

    /// Refuses a recording made for another shard count (see the type's discussion).
    private func checkShardCount() throws(SubscriberError) {
        let countPath = EnvelopeRecording.shardCountPath(path)
        let advice = "a recording belongs to one shard count (another count is another generation of journals, "
            + "each from seq 1): record into a new file"
        // A count file that exists and cannot be read is not a missing one.
        let countBytes: [UInt8]?
        do { countBytes = try AtomicFile.read(countPath) } catch {
            throw SubscriberError(.recordingUnusable, error.description)
        }
        if let bytes = countBytes,
            let recorded = Int(String(decoding: bytes, as: UTF8.self).filter { !$0.isWhitespace })
        {
            guard recorded == shards else {
                throw SubscriberError(.recordingUnusable, "\(path) is a recording of \(recorded) shard\(recorded == 1 ? "" : "s") "
                                      + "(\(countPath)) but \(shards) were given: \(advice)")
            }
            return
        }
        if !wasEmpty && shards > 1 && !hasLines.dropFirst().contains(true) {
            throw SubscriberError(.recordingUnusable, "\(path) holds envelopes of shard 0 only and does not record its shard count, "
                                  + "so it may be one daemon's, whose seqs mean nothing for shard 0 of \(shards): "
                                  + "\(advice); if it is a recording of these \(shards) shards, write \(shards) into \(countPath)")
        }
        needsShardCountFile = true
    }

    private func writeShardCountFile() throws(SubscriberError) {
        do {
            try AtomicFile.write(Array("\(shards)\n".utf8), to: EnvelopeRecording.shardCountPath(path), durable: true)
        } catch {
            throw SubscriberError(.recordingUnusable, error.description)
        }
        needsShardCountFile = false
    }

    deinit { close(fd) }

    /// With one shard: the last line's `seq`. With several, use ``cursor(forShard:)``.
    package func load() -> Int64 { lastSeq }

    /// Shard `index`'s cursor: its last line's `seq`; committing does nothing (the line is the commit).
    package func cursor(forShard index: Int) -> any SubscriberCursor {
        shards == 1 ? self : ShardCursor(recording: self, index: index)
    }

    private final class ShardCursor: SubscriberCursor {
        unowned let recording: EnvelopeRecording
        let index: Int

        init(recording: EnvelopeRecording, index: Int) {
            self.recording = recording
            self.index = index
        }

        func load() -> Int64 { recording.lastSeqs[index] }

        func commit(_ seq: Int64) {}
        var commitMayBlock: Bool { false }
    }

    /// Nothing to do: the appended line is the commit.
    package func commit(_ seq: Int64) {}
    /// False: a commit does nothing (the recording's appends keep the position).
    package var commitMayBlock: Bool { false }

    /// Appends the envelope's bytes and a newline with a single `write(2)`.
    /// - Throws: ``SubscriberError`` when the write fails (disk full, …).
    package func append(_ envelope: BusEnvelope) throws(SubscriberError) {
        if needsShardCountFile { try writeShardCountFile() }
        line.removeAll(keepingCapacity: true)
        line.append(contentsOf: envelope.bytes)
        line.append(0x0A)
        let failure: Int32? = line.withUnsafeBytes { buf in
            var off = 0
            while off < buf.count {
                let n = write(fd, buf.baseAddress! + off, buf.count - off)
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                off += n
            }
            return nil
        }
        if let failure { throw SubscriberError(.recordingUnusable, "cannot write \(path): \(String(cString: strerror(failure)))") }
        let slot = shards == 1 ? 0 : envelope.shard
        if slot >= 0 && slot < shards {
            lastSeqs[slot] = envelope.seq
            hasLines[slot] = true
        }
    }

    /// Truncates a torn last line and reads the `seq` of the last complete line (of each shard).
    private func recover() throws(SubscriberError) {
        let fileEnd = lseek(fd, 0, SEEK_END)
        guard fileEnd >= 0 else {
            throw SubscriberError(.recordingUnusable, "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        let size = Int(fileEnd)
        guard size > 0 else { return }
        // Read backwards in growing chunks until the lines needed are whole in memory.
        var chunk = 64 * 1024
        var end = size
        var found = 0
        while true {
            let start = max(0, end - chunk)
            var tail = [UInt8](repeating: 0, count: end - start)
            let n = tail.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(start)) }
            guard n == tail.count else { throw SubscriberError(.recordingUnusable, "cannot read \(path): \(String(cString: strerror(errno)))") }
            if end == size {
                guard let lastNewline = tail.lastIndex(of: 0x0A) else {
                    if start == 0 {
                        try truncate(to: 0, size: size)
                        return
                    }
                    chunk *= 4
                    continue
                }
                let complete = start + lastNewline + 1
                if complete < size { try truncate(to: complete, size: size) }
                end = complete
                tail.removeSubrange((lastNewline + 1)...)
            }
            // Complete lines in `tail`, newest first: each ends at a newline; the first is whole only
            // when the chunk reaches the file's start or begins just after a newline.
            var lineEnd = tail.count - 1
            while lineEnd >= 0 {
                guard let previous = tail[..<lineEnd].lastIndex(of: 0x0A) ?? (start == 0 ? -1 : nil) else { break }
                let lineBytes = Array(tail[(previous + 1)..<lineEnd])
                let fields = try EnvelopeRecording.positions(of: lineBytes, path: path)
                let slot = shards == 1 ? 0 : fields.shard
                guard slot >= 0 && slot < shards else {
                    throw SubscriberError(.recordingUnusable, "\(path) holds envelopes of shard \(fields.shard), but \(shards) shards were given: "
                                          + "record each list of shards in its own file")
                }
                if !hasLines[slot] {
                    hasLines[slot] = true
                    lastSeqs[slot] = fields.seq
                    wasEmpty = false
                    found += 1
                    if found == shards { return }
                }
                lineEnd = previous
            }
            if start == 0 { return }
            // Continue before the first whole line of this chunk.
            end = start + lineEnd + 1
            chunk = min(chunk * 4, 64 << 20)
        }
    }

    private func truncate(to length: Int, size: Int) throws(SubscriberError) {
        guard ftruncate(fd, off_t(length)) == 0 else {
            throw SubscriberError(.recordingUnusable, "cannot truncate \(path): \(String(cString: strerror(errno)))")
        }
        truncatedBytes = size - length
    }

    /// A line's `seq` and `shard` (0 without one).
    package static func positions(of line: [UInt8], path: String) throws(SubscriberError) -> (seq: Int64, shard: Int) {
        let fields = line.withUnsafeBytes { buf -> (Int64, Int)? in
            if let p = LeadingPositions.read(buf) { return (p.seq, p.shard) }
            let doc = JSONDocument(maxDepth: EnvelopeLimits.maxDepth)
            do throws(JSONParseError) { try doc.parse(buf) } catch { return nil }
            guard let seq = doc.member(doc.root, "seq").flatMap({ doc.int64($0) }) else { return nil }
            return (seq, Int(doc.member(doc.root, "shard").flatMap { doc.int64($0) } ?? 0))
        }
        guard let fields else { throw SubscriberError(.recordingUnusable, "the last line of \(path) is not an envelope with a seq") }
        return fields
    }
}
