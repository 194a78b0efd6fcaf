#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// Write-behind: a thread that seals (checksums) and writes one batch of journal records at a
/// time, so the pipeline processes the next batch meanwhile; it publishes a batch only once this
/// thread reports it written (``Journal/collect()``).
///
/// `Sendable`: its state is one mutex and two semaphores. The pipeline posts a job only while
/// none is outstanding and does not touch the job's bytes until it has taken the result, so the
/// buffer is handed over whole, never shared. Completion is signalled twice: on ``done`` (taken
/// exactly once per job) and by a byte on the pipe ``wakeFD``, which the pipeline's poller watches.
package final class JournalWriter: Sendable {
    /// One run of records to append: `count` bytes at address `address`, through `appender`
    /// (which the pipeline does not touch until it has taken the result), and the memory around
    /// them the appender may write over.
    package struct Job: Sendable {
        var appender: Exclusive<SegmentAppender>
        var address: Int
        var count: Int
        var room: SegmentAppender.Room
    }

    /// 0 when the run was written; else the `errno` of the failed write (the file is then cut
    /// back to the run's start, as if it had never been attempted).
    package typealias Result = Int32

    private struct State {
        var job: Job?
        var result: Result?
        var stopping = false
    }

    private let state = Mutex(State())
    private let work = DispatchSemaphore(value: 0)
    private let done = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    /// Readable while a finished job's result waits.
    private let wake: WakePipe
    package var wakeFD: Int32 { wake.readFD }

    package init() throws {
        wake = try WakePipe("journal writer's")
        NamedThread.start("journal-write") { [self] in loop() }
    }

    /// Hands a run to the thread. Only one job is outstanding at a time.
    package func post(_ job: Job) {
        state.withLock { s in
            precondition(s.job == nil && s.result == nil, "a journal write is already outstanding")
            s.job = job
        }
        work.signal()
    }

    /// The outstanding job's result if it has finished, else nil (never blocks).
    package func poll() -> Result? {
        guard done.wait(timeout: .now()) == .success else { return nil }
        return take()
    }

    /// Waits for the outstanding job and returns its result.
    package func wait() -> Result {
        done.wait()
        return take()
    }

    private func take() -> Result {
        wake.drain()
        return state.withLock { s in
            guard let r = s.result else { preconditionFailure("a journal write signalled done without a result") }
            s.result = nil
            return r
        }
    }

    /// Stops the thread (after the outstanding job, if any, was taken) and waits for it.
    package func stop() {
        state.withLock { $0.stopping = true }
        work.signal()
        finished.wait()
        wake.close()
    }

    private func loop() {
        while true {
            work.wait()
            let (job, stopping) = state.withLock { s in (s.job, s.stopping) }
            guard let job else {
                if stopping { break }
                continue
            }
            let base = UnsafeMutableRawPointer(bitPattern: job.address)!
            JournalFormat.seal(base, job.count)
            let failure = job.appender.withValue { $0.append(base, job.count, room: job.room) }
            state.withLock { s in
                s.job = nil
                s.result = failure
            }
            wake.signal()
            done.signal()
        }
        finished.signal()
    }
}
