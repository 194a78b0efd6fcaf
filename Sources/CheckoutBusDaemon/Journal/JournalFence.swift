#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusJSON
import CheckoutBusProtocol
import CheckoutBusRuntime
import Synchronization

/// What the daemon does when a durability call fails: it stops at once, and the next start makes
/// the journal after the last good sync trustworthy again (docs/durability.md, "When the disk says no").
///
/// A failed `fdatasync` cannot be retried into success: Linux reports a writeback error once and
/// may mark the dirty pages clean, so a second call returns 0 over data that never reached the
/// disk (PostgreSQL's "fsyncgate"). Nothing this process has written since the last good sync can
/// be taken as durable again, whatever a later sync says. So, as PostgreSQL
/// PANICs and etcd's WAL treats the error as fatal, ``trip(_:durableSeq:)``:
/// 1. stops the durable seq where it is: no acknowledgement past it is ever sent (the caller
///    returns without advancing it; the process is gone before the pipeline looks again);
/// 2. writes `FENCED` in the journal directory — `{"durable_seq":D,"reason":…,"at":…}`, synced —
///    so that the next start reads every record after `D` back, checks it and writes it again
///    (``Journal/cutBack(after:)``), cutting what is not intact;
/// 3. logs the reason at error level and exits with status 75 (`EX_TEMPFAIL`): the supervisor
///    (`Restart=on-failure`) starts it again into recovery; a disk that still fails makes that
///    start fail at its own checked syncs, visibly, instead of acknowledging on a broken disk.
///
/// `Sendable`: immutable; any thread may trip it (the sync thread, the pipeline at a rotation).
package final class JournalFence: Sendable {
    package static let fileName = "FENCED"
    /// The exit status of a fenced daemon.
    package static let exitStatus: Int32 = 75

    /// What a `FENCED` file says.
    package struct Marker: Equatable, Sendable {
        package var durableSeq: UInt64
        package var reason: String
        package var at: String

        /// `{"durable_seq":D,"reason":…,"at":…}`: the marker file, and `stats` → `journal.fence_recovered`.
        package func write(to w: inout JSONWriter) {
            w.append("{\"durable_seq\":")
            w.append(int: Int64(durableSeq))
            w.append(",\"reason\":")
            w.appendString(reason)
            w.append(",\"at\":")
            w.appendString(at)
            w.append("}")
        }
    }

    package let directory: String
    private let logger: BusLogger
    /// A thread is fencing: it alone writes the marker and ends the process.
    private let tripped = Atomic<Bool>(false)

    package init(directory: String, logger: BusLogger) {
        self.directory = directory
        self.logger = logger
    }

    package var path: String { directory + "/" + JournalFence.fileName }

    /// Records why and where the journal stopped being trustworthy, and ends the process.
    /// - Parameters:
    ///   - reason: the failed call and its error, for the log and the marker.
    ///   - durableSeq: the last seq a successful sync covered.
    package func trip(_ reason: String, durableSeq: UInt64) -> Never {
        // The sync thread and the pipeline (a rotation) can fail at once: one marker, one exit.
        if tripped.exchange(true, ordering: .acquiringAndReleasing) {
            while true { pause() }
        }
        logger.error("journal fenced: a durability call failed; nothing after the last synced seq is acknowledged, "
                     + "and the next start writes what follows it again from what it reads back and checks", [
            "reason": reason, "durable_seq": String(durableSeq), "marker": path,
            "exit_status": String(JournalFence.exitStatus),
        ])
        var at = JSONWriter(capacity: 32)
        Timestamp(milliseconds: BusClock.wallMilliseconds()).write(to: &at)
        let marker = Marker(durableSeq: durableSeq, reason: reason,
                            at: String(decoding: at.bytes.dropFirst().dropLast(), as: UTF8.self))
        do {
            try AtomicFile.write(JournalFence.encode(marker), to: path, durable: true)
        } catch {
            logger.error("journal fenced, and its marker could not be written: the next start cannot tell which records "
                         + "to distrust; check the disk before starting the daemon again", ["error": error.description])
        }
        _exit(JournalFence.exitStatus)
    }

    /// The marker left by a fenced daemon, if any.
    /// - Throws: ``JournalError`` for a marker that cannot be read or understood: the daemon must
    ///   not start on a journal it was told to distrust without knowing how far.
    package func read() throws -> Marker? {
        let bytes: [UInt8]?
        do { bytes = try AtomicFile.read(path) } catch {
            throw JournalError(.notReadable, "cannot read the fence marker: \(error.description)")
        }
        guard let bytes else { return nil }
        guard let marker = JournalFence.decode(bytes) else {
            throw JournalError(.notReadable, "the fence marker \(path) is not {\"durable_seq\":N,…}; the journal past the "
                                   + "last synced seq cannot be told apart: move the marker aside only after checking the disk")
        }
        return marker
    }

    /// Removes the marker once the records after its seq are on disk again (or cut), synced.
    package func clear() throws {
        guard unlink(path) == 0 || errno == ENOENT else {
            throw JournalError(.notWritable, "cannot remove the fence marker \(path): \(String(cString: strerror(errno)))")
        }
        if let e = AtomicFile.syncDirectory(directory) {
            throw JournalError(.notWritable, "cannot sync \(directory) after removing the fence marker: \(String(cString: strerror(e)))")
        }
    }

    /// The marker file's bytes: ``Marker/write(to:)`` and a newline.
    static func encode(_ marker: Marker) -> [UInt8] {
        var w = JSONWriter(capacity: 256)
        marker.write(to: &w)
        w.append("\n")
        return w.bytes
    }

    static func decode(_ bytes: [UInt8]) -> Marker? {
        let document = JSONDocument()
        let parsed = bytes.withUnsafeBytes { b in (try? document.parse(b)) != nil }
        guard parsed, document.kind(document.root) == .object,
            let seq = document.member(document.root, "durable_seq").flatMap({ document.int64($0) }), seq >= 0
        else { return nil }
        let reason = document.member(document.root, "reason").flatMap { document.string($0) } ?? ""
        let at = document.member(document.root, "at").flatMap { document.string($0) } ?? ""
        return Marker(durableSeq: UInt64(seq), reason: reason, at: at)
    }
}
