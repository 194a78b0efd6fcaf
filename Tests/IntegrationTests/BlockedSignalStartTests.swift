#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing

/// A process started with SIGTERM and SIGINT blocked still stops on them. A parent's thread that
/// blocks them (every dispatch worker thread does, and so may a supervisor) passes its mask on
/// through `fork` and `exec`; a handler installed with `sigaction` then never ran, the signal stayed
/// pending, and the daemon never stopped. The programs now unblock both as they install the handler.
@Suite("programs started with SIGTERM blocked still stop on it", .serialized, .timeLimit(.minutes(5)))
struct BlockedSignalStartTests {
    /// Runs `start` with SIGTERM and SIGINT blocked in this thread, so a process it starts inherits
    /// them blocked; the thread's mask is restored after.
    private func withTerminationBlocked<T>(_ start: () throws -> T) throws -> T {
        var block = sigset_t()
        var previous = sigset_t()
        sigemptyset(&block)
        sigaddset(&block, SIGTERM)
        sigaddset(&block, SIGINT)
        try #require(pthread_sigmask(SIG_BLOCK, &block, &previous) == 0)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        return try start()
    }

    /// The child's blocked-signal mask as `/proc/PID/status` shows it (`SigBlk`), or nil.
    private func blockedMask(_ pid: Int32) -> UInt64? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("SigBlk:") }) else { return nil }
        return UInt64(line.dropFirst("SigBlk:".count).trimmingCharacters(in: .whitespaces), radix: 16)
    }

    @Test("checkoutbusd, checkoutbus-fulfil and checkoutbus tail, each started with SIGTERM blocked, exit 0 on SIGTERM")
    func blockedAtStart() throws {
        let daemon = try withTerminationBlocked { try DaemonProcess() }
        let termBit: UInt64 = 1 << UInt64(SIGTERM - 1)
        // Ready: it has unblocked the signal in every thread it started (none still blocks it).
        #expect(blockedMask(daemon.process.processIdentifier).map { $0 & termBit } == 0)

        let database = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("blocked.sqlite")
        let worker = try withTerminationBlocked { try FulfilProcess(daemon: daemon, database: database) }
        kill(worker.process.processIdentifier, SIGTERM)
        #expect(waitForExit(worker.process, timeout: 20) == 0, "checkoutbus-fulfil ignored SIGTERM")

        let tail = try withTerminationBlocked { try TailProcess(from: daemon.publish, count: 1_000, timeout: 60) }
        kill(tail.process.processIdentifier, SIGTERM)
        #expect(waitForExit(tail.process, timeout: 20) == 0, "checkoutbus tail ignored SIGTERM")

        #expect(daemon.terminate() == 0, "checkoutbusd ignored SIGTERM")
    }
}
