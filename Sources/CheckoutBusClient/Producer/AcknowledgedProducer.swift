import Foundation

/// Sends raw checkout events to the daemon's acknowledged ingest socket (`--ingest-acked`) and
/// returns the daemon's answer to each, once its record is on disk.
///
///     let producer = try await AcknowledgedProducer(options: .init(endpoint: "tcp://127.0.0.1:7782"))
///     let answer = try await producer.send(Array(json.utf8))
///     if answer.isAccepted { print("journaled as", answer.seq ?? -1) } else { print("rejected:", answer.reason!) }
///     let answers = try await producer.send(batch)        // one answer per event, in order
///     await producer.close()
///
/// **Threads.** The ZeroMQ socket lives on a `Thread` of its own, started by `init`, never a
/// cooperative-pool thread: `send` hands its events over and suspends until the thread resumes it.
/// `Sendable`: any number of tasks may send at once; their events go out in the order the calls
/// reached the thread, each call's events in order and together.
///
/// **Order and matching.** The daemon answers each event in the order it was sent, so the thread
/// hands each reply to the oldest event in flight, and checks it against the reply's `event_id`
/// when the event's wrapper has one. At most ``Options/window`` events are in flight at a time.
///
/// **Failures.** A send never waits without bound: when no reply arrives for ``Options/timeout``
/// while events wait, every waiting send throws ``AcknowledgedProducerError`` with
/// ``AcknowledgedProducerError/Code/timedOut``; a dropped connection fails the sends with events
/// in flight (``AcknowledgedProducerError/Code/disconnected``); either way the error's
/// ``AcknowledgedProducerError/acknowledged`` holds the answers to the events before the first
/// unanswered one. Events after it may be in the journal or not: send them again — the daemon
/// answers a retry of an `event_id` it has as a duplicate, with the first `seq`, and publishes
/// nothing twice (docs/durability.md).
///
/// **Stopping.** Cancelling a sending task fails its send with
/// ``AcknowledgedProducerError/Code/cancelled`` at once (events not yet sent are dropped;
/// replies to the ones in flight are read and ignored). ``close()`` fails what is waiting and
/// closes the socket; dropping the last reference does the same without waiting.
public final class AcknowledgedProducer: Sendable {
    /// Where to send, and how. `Sendable`.
    public struct Options: Sendable {
        /// The daemon's `--ingest-acked` endpoint, such as `tcp://127.0.0.1:7782`.
        public var endpoint: String
        /// This client's CURVE keys and the daemon's public key, for a daemon that requires CURVE.
        public var curve: CurveClientKeys?
        /// How long waiting events may go without any reply before their sends throw
        /// ``AcknowledgedProducerError/Code/timedOut``.
        public var timeout: Duration
        /// Events sent and not yet answered, at most (across every send of this producer): 1 to
        /// ``maxWindow``.
        public var window: Int

        /// The largest window: the daemon keeps every acknowledgement for a producer with at most
        /// this many in flight, however slowly it reads them.
        public static let maxWindow = 10_000

        public init(endpoint: String, curve: CurveClientKeys? = nil, timeout: Duration = .seconds(10), window: Int = 1000) {
            precondition((1...Options.maxWindow).contains(window), "the window holds 1 to \(Options.maxWindow) events")
            self.endpoint = endpoint
            self.curve = curve
            self.timeout = timeout
            self.window = window
        }
    }

    public let options: Options
    private let mailbox: ProducerMailbox

    /// Creates the socket and connects it (in the background: the daemon need not be up yet).
    /// - Throws: ``ZMQError`` when the socket cannot be made or the endpoint is not one;
    ///   ``AcknowledgedProducerError`` when the thread cannot start its wake pipe.
    public init(options: Options) async throws {
        self.options = options
        let mailbox = try ProducerMailbox()
        self.mailbox = mailbox
        try await withCheckedThrowingContinuation { (started: CheckedContinuation<Void, any Error>) in
            let thread = Thread {
                let connection: ProducerConnection
                do {
                    connection = try ProducerConnection(mailbox: mailbox, options: options)
                } catch {
                    mailbox.finish(closing: "the producer could not open its socket: \(error)")
                    started.resume(throwing: error)
                    return
                }
                started.resume()
                connection.run()
            }
            thread.name = "checkoutbus-producer"
            thread.start()
        }
    }

    deinit { mailbox.close() }

    /// Sends one raw event (one ingest message: a wrapped event or a raw SDK payload) and returns
    /// the daemon's answer once its record is durable.
    /// - Throws: ``AcknowledgedProducerError``: timed out, disconnected, an unexpected reply,
    ///   cancelled, or closed.
    public func send(_ event: [UInt8]) async throws -> Acknowledgement {
        try await send([event])[0]
    }

    /// Sends events with up to ``Options/window`` in flight and returns one answer per event, in
    /// the order given.
    /// - Throws: ``AcknowledgedProducerError``, whose ``AcknowledgedProducerError/acknowledged``
    ///   holds the answers to the events before the first unanswered one.
    public func send(_ events: [[UInt8]]) async throws -> [Acknowledgement] {
        if events.isEmpty { return [] }
        let id = mailbox.makeID()
        let mailbox = mailbox
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[Acknowledgement], any Error>) in
                if Task.isCancelled {
                    continuation.resume(throwing: AcknowledgedProducerError(.cancelled, "the sending task was cancelled"))
                } else if !mailbox.submit(.init(id: id, events: events, continuation: continuation)) {
                    continuation.resume(throwing: AcknowledgedProducerError(.closed, "the producer is closed"))
                }
            }
        } onCancel: {
            mailbox.cancel(id)
        }
    }

    /// Fails every send still waiting (``AcknowledgedProducerError/Code/closed``), closes the
    /// socket and returns once the thread has.
    public func close() async {
        mailbox.close()
        await mailbox.finished()
    }
}
