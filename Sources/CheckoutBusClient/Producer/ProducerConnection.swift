import CheckoutBusJSON
import CheckoutBusRuntime
import ZeroMQ

/// The socket side of an ``AcknowledgedProducer``: a DEALER on the daemon's `--ingest-acked`
/// socket, the requests in send order, and the events in flight, matched to replies in order.
///
/// Not `Sendable`: created, run and dropped on the producer's own thread, which owns the ZeroMQ
/// context and sockets. It talks to callers only through the ``ProducerMailbox`` and the
/// requests' continuations.
///
/// A fresh DEALER replaces the current one whenever replies can no longer be matched by order —
/// after a timeout, a dropped connection with events in flight, or an unexpected reply — so a late
/// reply to an event already given up on can never be taken for the answer to a newer one.
final class ProducerConnection {
    /// One request's progress: how many of its events went out, and the answers so far.
    final class Submission {
        let request: ProducerMailbox.Request
        var sent = 0
        var answers: [Acknowledgement] = []
        /// Answered or failed: replies still due for its events in flight are read and dropped.
        var done = false

        init(_ request: ProducerMailbox.Request) {
            self.request = request
            answers.reserveCapacity(request.events.count)
        }

        var hasUnsent: Bool { !done && sent < request.events.count }
    }

    /// An event on the wire: whose it is, and the wrapper's `event_id` its reply must carry.
    struct InFlight {
        let submission: Submission
        let expectedEventID: String?
    }

    private let mailbox: ProducerMailbox
    private let options: AcknowledgedProducer.Options
    private let context: ZMQContext
    private var dealer: ZMQSocket
    private var monitorReader: ZMQSocket
    private var generation = 0
    private var queue: [Submission] = []
    private var inFlight: [InFlight] = []
    private var inFlightHead = 0
    /// When a reply last arrived, or work arrived with nothing waiting.
    private var lastProgress: UInt64 = 0
    private let timeoutNanoseconds: UInt64
    private let message = ZMQMessage()
    private let document = JSONDocument()

    init(mailbox: ProducerMailbox, options: AcknowledgedProducer.Options) throws {
        self.mailbox = mailbox
        self.options = options
        let (seconds, attoseconds) = options.timeout.components
        timeoutNanoseconds = UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000)
        context = try ZMQContext()
        (dealer, monitorReader) = try Self.open(context: context, options: options, generation: 0)
    }

    /// A DEALER connected to the daemon, with a monitor reporting its dropped connections.
    ///
    /// `ZMQ_IMMEDIATE`: events queue only on a connection that is up, so nothing queued for a
    /// daemon that went away is sent to the next one behind the producer's back.
    private static func open(context: ZMQContext, options: AcknowledgedProducer.Options,
                             generation: Int) throws -> (ZMQSocket, ZMQSocket) {
        let dealer = try ZMQSocket(context: context, type: .dealer)
        try dealer.setLinger(milliseconds: 0)
        try dealer.setOption(.immediate, 1)
        let hwm = Int32(clamping: max(1000, options.window * 2))
        try dealer.setOption(.sendHighWaterMark, hwm)
        try dealer.setOption(.receiveHighWaterMark, hwm)
        try options.curve?.apply(to: dealer)
        let endpoint = "inproc://checkoutbus-producer-monitor-\(generation)"
        try dealer.monitor(endpoint, events: Int32(ZMQMonitorEvent.disconnected))
        let reader = try ZMQSocket(context: context, type: .pair)
        try reader.setLinger(milliseconds: 0)
        try reader.setOption(.receiveHighWaterMark, 0)
        try reader.connect(endpoint)
        try dealer.connect(options.endpoint)
        return (dealer, reader)
    }

    /// Serves the mailbox until the producer is closed; every request is answered or failed.
    func run() {
        var closedBecause = "the producer is closed"
        do {
            while try round() {}
        } catch {
            closedBecause = "the producer's socket failed: \(error)"
            failAll(.closed, closedBecause)
        }
        try? dealer.stopMonitor()
        mailbox.finish(closing: closedBecause)
    }

    /// One round: take what callers handed over, send what the window allows, wait, read.
    /// - Returns: false once the producer is closed.
    private func round() throws -> Bool {
        let taken = mailbox.take()
        if !isWaiting && !taken.requests.isEmpty { lastProgress = BusClock.monotonicNanoseconds() }
        for request in taken.requests { queue.append(Submission(request)) }
        for id in taken.cancelled { cancel(id) }
        if taken.closed {
            failAll(.closed, "the producer was closed with this send unanswered")
            return false
        }
        try sendWhatFits()

        let poller = ZMQPoller()
        let dealerIndex = poller.addReadable(dealer)
        let monitorIndex = poller.addReadable(monitorReader)
        poller.addReadable(fileDescriptor: mailbox.wakeFD)
        var wait = -1
        if isWaiting {
            let elapsed = BusClock.monotonicNanoseconds() &- lastProgress
            let left = elapsed >= timeoutNanoseconds ? 0 : timeoutNanoseconds - elapsed
            wait = Int(min(left / 1_000_000 + 1, 1000))
        }
        try poller.poll(timeoutMilliseconds: wait)

        if poller.isReadable(dealerIndex) { try receiveReplies() }
        if poller.isReadable(monitorIndex) { try readMonitor() }
        if isWaiting && BusClock.monotonicNanoseconds() &- lastProgress >= timeoutNanoseconds {
            failAll(.timedOut, "no reply from \(options.endpoint) within \(options.timeout)"
                + (options.curve == nil ? "" : CurveClientKeys.refusalHint))
            try reopen()
        }
        return true
    }

    /// Events are on the wire or waiting to go: the timeout runs.
    private var isWaiting: Bool { inFlightHead < inFlight.count || queue.contains { $0.hasUnsent } }

    private var inFlightCount: Int { inFlight.count - inFlightHead }

    /// Sends queued events, oldest request first, until the window is full or the socket would block.
    private func sendWhatFits() throws {
        for submission in queue where submission.hasUnsent {
            while submission.sent < submission.request.events.count {
                guard inFlightCount < options.window else { return }
                let event = submission.request.events[submission.sent]
                guard try dealer.send(event, dontWait: true) else { return }
                inFlight.append(InFlight(submission: submission, expectedEventID: wrapperEventID(event)))
                submission.sent += 1
            }
        }
    }

    /// The top-level `event_id` of an event, when it is a JSON object with a string one.
    private func wrapperEventID(_ event: [UInt8]) -> String? {
        event.withUnsafeBytes { bytes in
            guard (try? document.parse(bytes)) != nil, document.kind(document.root) == .object else { return nil }
            return document.member(document.root, "event_id").flatMap { document.string($0) }
        }
    }

    /// Reads every queued reply and hands each to the oldest event in flight.
    private func receiveReplies() throws {
        while try dealer.receive(into: message, dontWait: true) {
            let answer = message.withUnsafeBytes { Acknowledgement(reply: $0, document: document) }
            guard inFlightHead < inFlight.count else {
                failAll(.unexpectedReply, "a reply from \(options.endpoint) with no event in flight")
                return try reopen()
            }
            let entry = inFlight[inFlightHead]
            guard let answer else {
                failAll(.unexpectedReply, "a reply from \(options.endpoint) that is not an acknowledgement")
                return try reopen()
            }
            if let expected = entry.expectedEventID, let got = answer.eventID, expected != got {
                failAll(.unexpectedReply, "the reply for event_id \(expected) names event_id \(got)")
                return try reopen()
            }
            inFlightHead += 1
            if inFlightHead == inFlight.count {
                inFlight.removeAll(keepingCapacity: true)
                inFlightHead = 0
            }
            lastProgress = BusClock.monotonicNanoseconds()
            let submission = entry.submission
            guard !submission.done else { continue }
            submission.answers.append(answer)
            if submission.answers.count == submission.request.events.count {
                submission.done = true
                queue.removeAll { $0 === submission }
                submission.request.continuation.resume(returning: submission.answers)
            }
        }
        try sendWhatFits()
    }

    /// A dropped connection loses the events in flight on it: their requests fail (with what was
    /// answered before), and the rest go out on a fresh socket once the daemon is back.
    private func readMonitor() throws {
        var dropped = false
        while let frames = try monitorReader.receiveMultipart(dontWait: true) {
            if let event = frames.first.flatMap(ZMQMonitorEvent.init(frame:)), event.event == ZMQMonitorEvent.disconnected {
                dropped = true
            }
        }
        guard dropped, inFlightCount > 0 else { return }
        // Replies that arrived before the drop still answer their events.
        try receiveReplies()
        guard inFlightCount > 0 else { return }
        var failed: [Submission] = []
        for entry in inFlight[inFlightHead...] where !entry.submission.done && !failed.contains(where: { $0 === entry.submission }) {
            failed.append(entry.submission)
        }
        for submission in failed {
            fail(submission, .disconnected, "the connection to \(options.endpoint) dropped with this send unanswered")
        }
        try reopen()
    }

    /// Gives up request `id`: its unsent events are dropped, replies to those in flight ignored.
    private func cancel(_ id: UInt64) {
        guard let submission = queue.first(where: { $0.request.id == id }) else { return }
        fail(submission, .cancelled, "the task waiting for this send was cancelled")
    }

    private func fail(_ submission: Submission, _ code: AcknowledgedProducerError.Code, _ description: String) {
        guard !submission.done else { return }
        submission.done = true
        queue.removeAll { $0 === submission }
        submission.request.continuation.resume(
            throwing: AcknowledgedProducerError(code, description, acknowledged: submission.answers))
    }

    private func failAll(_ code: AcknowledgedProducerError.Code, _ description: String) {
        for submission in queue { fail(submission, code, description) }
        queue.removeAll()
    }

    /// Replaces the DEALER: replies still due on the old one can never reach the new one.
    private func reopen() throws {
        inFlight.removeAll()
        inFlightHead = 0
        try? dealer.stopMonitor()
        generation += 1
        (dealer, monitorReader) = try Self.open(context: context, options: options, generation: generation)
    }
}
