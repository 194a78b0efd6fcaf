#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// SIGTERM and SIGINT as task cancellation, for the mains of async programs (the workers, the bridge).
///
/// ``run(_:)`` starts the program's work in a task of its own and cancels that task on the first
/// SIGTERM or SIGINT instead of letting the signal end the process: the work sees the cancellation
/// (the loop over an async subscriber's envelopes ends), drains, writes its last report and
/// returns, and the main exits as it chooses.
///
/// **How a signal is caught.** A handler installed with `sigaction` before the work starts writes
/// one byte to a pipe (what a handler may do), whichever thread the signal interrupts, and a thread
/// of ``run(_:)``'s own reads the pipe and cancels the task. Nothing is lost in between: before the
/// handler, a signal ends the process (its default action); after it, every signal reaches the pipe.
/// (Signal sources on a dispatch queue, with the disposition `SIG_IGN` until they were armed, lost
/// a SIGTERM that came in between or reached a thread that did not block it: on a loaded host a
/// worker then never stopped.)
public enum TerminationSignals {
    /// Installs the handler and starts the thread that reads its pipe; call it from the main thread
    /// before the first `await` (top-level code runs there until then), so that SIGTERM and SIGINT
    /// are unblocked in the thread every other inherits its mask from. Later calls do nothing.
    /// A signal that comes after it and before ``run(_:)`` cancels the work as it is made.
    public static func install() {
        guard !installed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let (readEnd, _) = signalPipe
        precondition(readEnd >= 0, "pipe() failed for the signal handler")
        NamedThread.start("signals") {
            var byte: UInt8 = 0
            // The thread lives until the process ends, taking every signal that comes.
            while true {
                let n = read(readEnd, &byte, 1)
                if n == 1 {
                    target.signalled()
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    return
                }
            }
        }
        catchTermination { _ in
            var byte: UInt8 = 1
            _ = write(signalPipe.write, &byte, 1)
        }
    }

    /// Runs `operation` in a new task, cancelled on SIGTERM or SIGINT; returns (or throws) what it
    /// does once it has ended. Installs the handler if ``install()`` was not called (then on
    /// whichever thread runs this). A signal that comes before the task exists cancels it as it is
    /// made.
    public static func run<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        install()
        let task = Task { try await operation() }
        target.started(task)
        return try await task.value
    }

    /// Whether ``install()`` has run.
    private static let installed = Atomic<Bool>(false)
    /// The work a signal cancels: one per process, as the handler is.
    private static let target = CancellationTarget()

    /// Installs `handler` for SIGTERM and SIGINT with `sigaction`, and unblocks both in the calling
    /// thread (the main thread, before it starts others, which inherit its mask).
    ///
    /// A process may be started with them blocked: a parent's thread that blocks them (a dispatch
    /// worker does) passes its mask on through `fork` and `exec`. With every thread blocking
    /// SIGTERM, a handler never runs and the signal stays pending: a daemon started that way never
    /// stopped.
    package static func catchTermination(_ handler: @convention(c) (Int32) -> Void) {
        var unblock = sigset_t()
        sigemptyset(&unblock)
        for sig in [SIGTERM, SIGINT] {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = handler
            sigemptyset(&action.sa_mask)
            action.sa_flags = SA_RESTART
            precondition(sigaction(sig, &action, nil) == 0, "sigaction failed")
            sigaddset(&unblock, sig)
        }
        let status = pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
        precondition(status == 0, "pthread_sigmask failed: \(status)")
    }

    /// Ignores each of `signals` (`SIG_IGN` by `sigaction`), or stops the process: a signal
    /// meant to be ignored (a peer gone, a file size limit, a reload before its handler) would
    /// otherwise kill it later, far from the cause.
    package static func ignore(_ signals: Int32...) {
        for sig in signals {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = SIG_IGN
            sigemptyset(&action.sa_mask)
            let status = sigaction(sig, &action, nil)
            precondition(status == 0, "sigaction(\(sig), SIG_IGN) failed: \(String(cString: strerror(errno)))")
        }
    }

    /// The task a signal cancels, and whether one came before it existed.
    private final class CancellationTarget: Sendable {
        private let state = Mutex<(cancel: (@Sendable () -> Void)?, signalled: Bool)>((nil, false))

        func signalled() {
            let cancel = state.withLock { s -> (@Sendable () -> Void)? in
                s.signalled = true
                return s.cancel
            }
            cancel?()
        }

        func started<T: Sendable>(_ task: Task<T, any Error>) {
            let early = state.withLock { s -> Bool in
                s.cancel = { task.cancel() }
                return s.signalled
            }
            if early { task.cancel() }
        }
    }
}

/// The pipe ``TerminationSignals``' handler writes to: made before the handler is installed (the
/// handler only reads these two numbers).
private let signalPipe: (read: Int32, write: Int32) = {
    var fds: [Int32] = [-1, -1]
    guard pipe(&fds) == 0 else { return (-1, -1) }
    // Close-on-exec only keeps the pipe from a child: a failure here costs nothing else.
    _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
    _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
    return (fds[0], fds[1])
}()
