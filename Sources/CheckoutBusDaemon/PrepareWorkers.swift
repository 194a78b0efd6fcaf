#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Synchronization
import CheckoutBusRuntime

/// Threads that run the part of processing that is independent per message
/// (``EventProcessor/prepare(_:options:eventIDWindow:in:timed:into:prefetch:)``: parse, decode, hash) for a
/// batch, beside the pipeline thread, which works on the same batch and then commits it in order.
///
/// Fork and join per batch: ``run(count:_:)`` hands out the batch's indexes one at a time under a
/// lock, the pipeline thread takes its share too, and it returns once every index is done. A
/// worker that wakes late finds the batch taken (the pipeline never waits for a worker to wake,
/// only for the indexes workers took); one that wakes for a batch already finished finds nothing.
/// `Sendable`, checked by the compiler: its state is behind a `Mutex` and the job is `@Sendable`;
/// the job runs on whichever thread claims an index, and the hand-over under the lock orders what
/// the job touched.
final class PrepareWorkers: Sendable {
    typealias Job = @Sendable (Int) -> Void

    private struct Batch {
        var job: Job?
        var next = 0
        var count = 0
        var done = 0
        var stopping = false
    }

    private let batch = Mutex(Batch())
    private let wakes: [DispatchSemaphore]
    private let stopped = DispatchSemaphore(value: 0)

    /// Starts `workers` threads (the pipeline thread is the batch's other worker).
    init(workers: Int) {
        wakes = (0..<workers).map { _ in DispatchSemaphore(value: 0) }
        for (i, wake) in wakes.enumerated() {
            NamedThread.start("prepare-\(i + 1)") { [self] in
                while true {
                    wake.wait()
                    if batch.withLock({ $0.stopping }) { break }
                    work()
                }
                stopped.signal()
            }
        }
    }

    var workerCount: Int { wakes.count }

    /// Runs `job` for every index in `0..<count`, on the workers and this thread; returns when all
    /// are done.
    func run(count: Int, _ job: @escaping Job) {
        batch.withLock { b in
            b.job = job
            b.next = 0
            b.count = count
            b.done = 0
        }
        for wake in wakes { wake.signal() }
        work()
        // Only indexes a worker took are left: each is a message's prepare, a few microseconds.
        while batch.withLock({ $0.done }) < count { sched_yield() }
        batch.withLock { b in
            b.job = nil
            b.count = 0
        }
    }

    /// Takes indexes until none is left.
    private func work() {
        while let (i, job) = batch.withLock({ b -> (Int, Job)? in
            guard b.next < b.count, let job = b.job else { return nil }
            b.next += 1
            return (b.next - 1, job)
        }) {
            job(i)
            batch.withLock { $0.done += 1 }
        }
    }

    /// Stops the threads and waits for them.
    func stop() {
        batch.withLock { $0.stopping = true }
        for wake in wakes { wake.signal() }
        for _ in wakes { stopped.wait() }
    }
}
