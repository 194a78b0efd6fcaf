import Foundation
#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusCore
import CheckoutBusRuntime

/// The claim of one daemon on its data directory: the journal directory's `LOCK` file, held with
/// `flock` for the daemon's life with its pid written in it, and the shard the directory belongs to.
///
/// Not `Sendable`: taken and released by the thread that opens the ``Journal``.
final class DataDirectoryLock {
    /// The bytes of the `LOCK` file a refused daemon reads for the holder's pid (the daemons write
    /// a pid and a newline, far shorter).
    static let pidBytes = 32

    /// The `LOCK` file's descriptor, -1 once released.
    private var fd: Int32

    /// Takes `directory`'s `LOCK` file (flock, held until ``release()`` or the process exits) and
    /// writes our pid in it. One daemon per journal: a second one on the same directory would
    /// interleave seqs. The `flock` is the claim; the pid only names the holder to a daemon refused,
    /// so a pid that cannot be written (a full disk) is logged and the start goes on.
    /// - Throws: ``JournalError`` when the file cannot be opened or another process holds it (its
    ///   pid in the message).
    init(directory: String, logger: BusLogger) throws {
        let lockFD = open(directory + "/LOCK", O_RDWR | O_CREAT | O_CLOEXEC, 0o640)
        guard lockFD >= 0 else { throw JournalError(.notReadable, "cannot open \(directory)/LOCK: \(String(cString: strerror(errno)))") }
        if flock(lockFD, LOCK_EX | LOCK_NB) != 0 {
            var holder = [UInt8](repeating: 0, count: DataDirectoryLock.pidBytes)
            let n = holder.withUnsafeMutableBytes { pread(lockFD, $0.baseAddress, $0.count, 0) }
            // The digits the file begins with (after any blanks): what a holder wrote over an older,
            // longer pid it could not cut off is followed by blanks, never by the old digits.
            let text = holder.prefix(max(0, n)).drop { $0 == 0x20 || $0 == 0x0A }
            let pid = String(decoding: text.prefix { $0 >= 0x30 && $0 <= 0x39 }, as: UTF8.self)
            Glibc.close(lockFD)
            throw JournalError(.locked, "data directory \(directory) is in use by another checkoutbusd (pid \(pid.isEmpty ? "?" : pid))")
        }
        var pidText = Array("\(getpid())\n".utf8)
        var failure: Int32?
        if let injected = Failpoints.hit("lock.pid") {
            failure = injected
        } else {
            let truncate = Failpoints.hit("lock.truncate") ?? (ftruncate(lockFD, 0) == 0 ? nil : errno)
            if let truncate {
                // The last holder's pid stays in the file: written over, then blanks to the length
                // the reader reads, so a daemon refused names this one, not the last.
                logger.warning("cannot cut the LOCK file short; this daemon's pid is written over the last one's",
                               ["path": directory + "/LOCK", "error": String(cString: strerror(truncate))])
                pidText += [UInt8](repeating: 0x20, count: max(0, DataDirectoryLock.pidBytes - pidText.count))
            }
            let n = pidText.withUnsafeBytes { pwrite(lockFD, $0.baseAddress, $0.count, 0) }
            if n != pidText.count { failure = n < 0 ? errno : ENOSPC }
        }
        if let failure {
            logger.warning("cannot write this daemon's pid in the LOCK file; a daemon refused the directory will not "
                           + "name it", ["path": directory + "/LOCK", "error": String(cString: strerror(failure))])
        }
        fd = lockFD
    }

    deinit { release() }

    /// Lets another daemon take the directory.
    func release() {
        guard fd >= 0 else { return }
        // Closing drops the flock whatever close reports; there is nothing written to lose.
        if Glibc.close(fd) != 0 { _ = errno }
        fd = -1
    }

    /// Binds the data directory to this daemon's shard: `<data-dir>/shard` holds the `I/N` the
    /// journal was begun with, and a daemon started with another is refused, since its journal's
    /// `seq` and its subscribers' cursors belong to that shard. A journal with records but no such
    /// file predates sharding and is `0/1`. Called with the journal's lock held.
    /// - Throws: ``JournalError`` when the directory belongs to another shard, or the file cannot
    ///   be read or written.
    static func claimShard(_ mine: ShardMap, dataDirectory: String, journalHasRecords: Bool) throws {
        let path = dataDirectory + "/shard"
        var recorded: String?
        do {
            if let bytes = try AtomicFile.read(path) {
                let text = bytes.filter { $0 > 0x20 }
                if !text.isEmpty { recorded = String(decoding: text, as: UTF8.self) }
            } else if journalHasRecords {
                recorded = ShardMap.single.description
            }
        } catch {
            throw JournalError(.notWritable, error.description)
        }
        if let recorded {
            guard recorded == mine.description else {
                throw JournalError(.otherShard, """
                    the data directory \(dataDirectory) belongs to shard \(recorded), not \(mine): \
                    its seq and its subscribers' cursors are that shard's (docs/sharding.md, "Changing the shard count")
                    """)
            }
            return
        }
        // Durably: the file, and its rename (or the directory would read as 0/1 after a power loss).
        do {
            try AtomicFile.write(Array((mine.description + "\n").utf8), to: path, durable: true)
        } catch {
            throw JournalError(.notWritable, error.description)
        }
    }

    /// The journal's identity: `<data-dir>/journal-id`, 32 hex digits drawn by the first start that
    /// finds none, and kept for the directory's life. Heartbeats and replay replies carry it
    /// (`journal_id`), so a subscriber can tell that its publish and control endpoints are one
    /// journal: two daemons' would deliver one's journal as the other's (docs/durability.md, "One
    /// journal behind both endpoints"). A file that is not such an id (emptied, edited) is replaced
    /// with a new one, which subscribers take as another journal (as after a data directory
    /// replaced). Called with the journal's lock held.
    /// - Returns: nil when the file cannot be read or written (a full or failing disk): the daemon
    ///   runs without one, as a daemon before journal ids did (nothing is checked), and says so.
    static func journalID(dataDirectory: String, logger: BusLogger) -> String? {
        let path = dataDirectory + "/journal-id"
        do {
            if let bytes = try AtomicFile.read(path) {
                let text = bytes.filter { $0 > 0x20 }
                if DataDirectoryLock.isJournalID(text) { return String(decoding: text, as: UTF8.self) }
                logger.warning("the journal id file does not hold an id; writing a new one", ["path": path])
            }
        } catch {
            logger.error("the journal id cannot be read: subscribers cannot check that their endpoints are one "
                         + "daemon's until it can", ["path": path, "error": error.description])
            return nil
        }
        var generator = SystemRandomNumberGenerator()
        let digits = Array("0123456789abcdef".utf8)
        var id: [UInt8] = []
        for _ in 0..<4 {
            var word = generator.next() as UInt64
            for _ in 0..<8 {
                id.append(digits[Int(word & 0xF)])
                word >>= 4
            }
        }
        // Durably: an id that changed after a power loss would read as another journal.
        do {
            try AtomicFile.write(id + [0x0A], to: path, durable: true)
        } catch {
            logger.error("the journal id cannot be written: subscribers cannot check that their endpoints are one "
                         + "daemon's until it can", ["path": path, "error": error.description])
            return nil
        }
        return String(decoding: id, as: UTF8.self)
    }

    /// 32 lower-case hex digits.
    static func isJournalID(_ text: [UInt8]) -> Bool {
        text.count == 32 && text.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }
}

/// The data directory as a whole. `Sendable` (no state).
package enum DataDirectory {
    /// Makes `path` (and any missing parent) before a start.
    /// - Returns: whether this call made `path` itself: its `mkdir` succeeded, which only one
    ///   process can do. A directory that was there, or that another start made first, is not ours.
    package static func make(_ path: String) -> Bool {
        var info = stat()
        guard stat(path, &info) != 0, errno == ENOENT else { return false }
        let parent = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        if !parent.isEmpty { try? JournalFiles.makeDirectory(parent) }
        return mkdir(path, 0o750) == 0
    }

    /// What ``removeIfUnused(_:)`` did.
    package enum Removal: Equatable, Sendable {
        case removed
        /// Another daemon holds its journal's lock: left as it is.
        case inUse
        case failed(String)
    }

    /// Removes `path` and everything in it, for a start that made it and failed before it was
    /// ready — unless another daemon holds its journal's lock (it started there meanwhile), which is
    /// held here while removing, so none can take it midway (docs/configuration.md, `--data-dir`).
    package static func removeIfUnused(_ path: String) -> Removal {
        let fd = open(path + "/journal/LOCK", O_RDWR | O_CLOEXEC)
        if fd < 0 && errno != ENOENT { return .failed("cannot open \(path)/journal/LOCK: \(String(cString: strerror(errno)))") }
        defer { if fd >= 0 && close(fd) != 0 { _ = errno } }
        if fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0 { return .inUse }
        do {
            try FileManager.default.removeItem(atPath: path)
            return .removed
        } catch {
            return .failed("\(error)")
        }
    }
}
