#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusCore

/// A JSON Lines file of envelopes, exactly as published, one per line — and its own cursor.
///
/// ``append(_:)`` writes an envelope and its newline with one `write(2)` on a file opened with
/// `O_APPEND`, so a line is either in the kernel whole or, when the process is killed in the middle
/// of a large write, torn at the end of the file. Opening the recording repairs that: a last line
/// without its newline is truncated away (``truncatedBytes``), and ``load()`` returns the `seq` of
/// the last complete line. The line *is* the commit, so ``commit(_:)`` does nothing: a recorder
/// killed at any point and restarted neither loses nor repeats a line.
///
/// Used by `checkoutbus tail --record`. Not `Sendable`: owned by the subscriber's thread; the file
/// descriptor is closed in `deinit`.
public final class EnvelopeRecording: SubscriberCursor {
    public let path: String
    /// Bytes of a torn last line removed when the file was opened.
    public private(set) var truncatedBytes = 0
    /// The `seq` of the last line appended, or found when the file was opened (0: none).
    public private(set) var lastSeq: Int64 = 0
    /// Whether the file held no complete line when it was opened.
    public private(set) var wasEmpty = true
    private let fd: Int32
    private var line: [UInt8] = []

    /// Opens (creating if missing) the recording at `path`, repairs a torn last line and reads the
    /// last complete line's `seq`.
    /// - Throws: ``SubscriberError`` when the file cannot be opened, repaired, or its last complete
    ///   line is not an envelope with a `seq`.
    public init(path: String) throws(SubscriberError) {
        self.path = path
        fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw SubscriberError("cannot open \(path): \(String(cString: strerror(errno)))") }
        try recover()
        line.reserveCapacity(4096)
    }

    deinit { close(fd) }

    public func load() -> Int64 { lastSeq }

    /// Nothing to do: the appended line is the commit.
    public func commit(_ seq: Int64) {}

    /// Appends the envelope's bytes and a newline with a single `write(2)`.
    /// - Throws: ``SubscriberError`` when the write fails (disk full, …).
    public func append(_ envelope: BusEnvelope) throws(SubscriberError) {
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
        if let failure { throw SubscriberError("cannot write \(path): \(String(cString: strerror(failure)))") }
        lastSeq = envelope.seq
    }

    /// Truncates a torn last line and reads the `seq` of the last complete one.
    private func recover() throws(SubscriberError) {
        let size = Int(lseek(fd, 0, SEEK_END))
        guard size > 0 else { return }
        // Read backwards in growing chunks until the last complete line is whole in memory.
        var chunk = 64 * 1024
        while true {
            let start = max(0, size - chunk)
            var tail = [UInt8](repeating: 0, count: size - start)
            let n = tail.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(start)) }
            guard n == tail.count else { throw SubscriberError("cannot read \(path): \(String(cString: strerror(errno)))") }
            guard let lastNewline = tail.lastIndex(of: 0x0A) else {
                if start == 0 {
                    try truncate(to: 0, size: size)
                    return
                }
                chunk *= 4
                continue
            }
            let end = start + lastNewline + 1
            if end < size { try truncate(to: end, size: size) }
            guard let previous = tail[..<lastNewline].lastIndex(of: 0x0A) ?? (start == 0 ? -1 : nil) else {
                chunk *= 4
                continue
            }
            let lineBytes = Array(tail[(previous + 1)..<lastNewline])
            guard let seq = EnvelopeRecording.seq(of: lineBytes) else {
                throw SubscriberError("the last line of \(path) is not an envelope with a seq")
            }
            lastSeq = seq
            wasEmpty = false
            return
        }
    }

    private func truncate(to length: Int, size: Int) throws(SubscriberError) {
        guard ftruncate(fd, off_t(length)) == 0 else {
            throw SubscriberError("cannot truncate \(path): \(String(cString: strerror(errno)))")
        }
        truncatedBytes = size - length
    }

    static func seq(of line: [UInt8]) -> Int64? {
        let doc = JSONDocument()
        return line.withUnsafeBytes { buf -> Int64? in
            do throws(JSONParseError) { try doc.parse(buf) } catch { return nil }
            return doc.member(doc.root, "seq").flatMap { doc.int64($0) }
        }
    }
}
