import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The harness's own waiting: an exit in time is reported as that exit, an overstay as a kill.
///
/// Each test bounds its own waits (10 s at most). The suite's limit is a guard against a hang, not
/// a measure: it runs beside the integration suites, whose blocking tests hold the cooperative
/// pool's two threads here for minutes at a time, and under a full run these three tests waited
/// 113-131 s for a thread without having run (a one-minute limit failed them).
@Suite("process harness: waiting for an exit", .timeLimit(.minutes(5)))
struct ProcessHarnessTests {
    static func shell(_ script: String) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", script]
        try p.start()
        return p
    }

    @Test("a process that exits is reported with its status, and beforeKill does not run")
    func exitInTime() throws {
        let p = try Self.shell("exit 3")
        var killed = false
        #expect(waitForExit(p, timeout: 10) { killed = true } == 3)
        #expect(!killed)
    }

    @Test("a process that ignores SIGTERM is killed at the deadline, after beforeKill saw its threads")
    func overstay() throws {
        let p = try Self.shell("trap '' TERM; while :; do sleep 1; done")
        p.terminate()
        var states = ""
        #expect(waitForExit(p, timeout: 1) { states = threadStates(p.processIdentifier) } == -9)
        #expect(states.hasPrefix("\(p.processIdentifier) sh "))
        #expect(!p.isRunning)
    }

    @Test("an ended child is recognised from /proc while it waits to be reaped")
    func zombie() throws {
        let pid = fork()
        if pid == 0 { _exit(0) }
        #expect(pid > 0)
        let deadline = Date().addingTimeInterval(10)
        while !hasEnded(pid) && Date() < deadline { usleep(10_000) }
        #expect(hasEnded(pid))
        var status: Int32 = 0
        #expect(waitpid(pid, &status, 0) == pid)
        #expect(!hasEnded(pid))
        #expect(!hasEnded(getpid()))
    }
}
