import CheckoutBusCore
import ZeroMQ
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// `route`'s connection to one shard's acknowledged ingest: a DEALER, and the producers waiting,
/// in send order, for the shard's replies.
///
/// A shard answers the events of one connection one reply each, in the order it received them, so
/// the n-th reply on the DEALER belongs to the n-th event sent on it. That pairing holds only for
/// one connection: the DEALER is made with `ZMQ_IMMEDIATE` (nothing queues without a connection)
/// and without automatic reconnection, so a connection that breaks is never silently replaced by
/// another one whose replies would be paired with the lost events. When the connection is gone —
/// a send finds no connection while events are in flight, or the oldest event waited longer than
/// the acknowledgement timeout — the link is reset: a new DEALER connects, and the producers still
/// waiting get no reply from `route` (their events may or may not have reached the shard), so they
/// time out and retry exactly as they would connected to the shard directly; a retry with the same
/// `event_id` is recognised by the shard and not published twice. Replies that carry an `event_id`
/// are also checked against the event they are paired with; a mismatch resets the link too.
///
/// Not `Sendable`; lives on `route`'s one thread.
package final class AckedShardLink {
    /// A producer waiting for a reply.
    package struct Waiting {
        /// The producer's routing id on `route`'s ROUTER.
        var identity: [UInt8]
        /// Whether the producer is a REQ socket (its reply needs the empty delimiter frame).
        var delimiter: Bool
        /// The event's `event_id`, when it has one, to check the reply against.
        var eventID: String?
        /// When it was sent to the shard (monotonic nanoseconds).
        var sentAt: UInt64
    }

    /// One event relayed from a producer: where the reply goes and the frames to forward.
    package struct Relayed {
        var waiting: Waiting
        var body: [[UInt8]]
    }

    package let shard: Int
    package let endpoint: String
    private let context: ZMQContext
    private let highWaterMark: Int32
    private let curve: CurveClientKeys?
    private let logger: BusLogger
    private(set) var socket: ZMQSocket
    private var waiting = RingBuffer<Waiting>()
    /// When the current DEALER was made (monotonic nanoseconds).
    private var createdAt: UInt64

    /// Events forwarded to the shard.
    private(set) var forwarded = 0
    /// Replies relayed back: `ok:true`, and `ok:false` (dead-lettered by the shard).
    private(set) var acknowledged = 0
    private(set) var rejected = 0
    /// Events whose reply never came (the connection was lost or timed out): the producer got none.
    private(set) var unanswered = 0
    /// Times the connection was replaced.
    private(set) var resets = 0

    /// How long a new connection may take before the link tries again (nanoseconds).
    package static let reconnectNanos: UInt64 = 1_000_000_000

    package init(shard: Int, endpoint: String, context: ZMQContext, highWaterMark: Int32, curve: CurveClientKeys?,
         logger: BusLogger) throws {
        self.shard = shard
        self.endpoint = endpoint
        self.context = context
        self.highWaterMark = highWaterMark
        self.curve = curve
        self.logger = logger
        createdAt = BusClock.monotonicNanoseconds()
        socket = try AckedShardLink.makeSocket(context: context, endpoint: endpoint, highWaterMark: highWaterMark,
                                               curve: curve)
    }

    private static func makeSocket(context: ZMQContext, endpoint: String, highWaterMark: Int32,
                                   curve: CurveClientKeys?) throws -> ZMQSocket {
        let socket = try ZMQSocket(context: context, type: .dealer)
        try socket.setLinger(milliseconds: 0)
        try socket.setOption(.immediate, 1)
        try socket.setOption(.reconnectInterval, -1)
        try socket.setOption(.sendHighWaterMark, highWaterMark)
        try socket.setOption(.receiveHighWaterMark, highWaterMark)
        try curve?.apply(to: socket)
        try socket.connect(endpoint)
        return socket
    }

    /// Events sent and not yet answered.
    package var inFlight: Int { waiting.count }

    /// Sends one event to the shard without blocking.
    /// - Returns: false when the shard cannot take it now (its queue is full, or it is not
    ///   connected): the caller keeps the event and tries again.
    package func forward(_ relayed: Relayed) throws -> Bool {
        let body = relayed.body
        var sent = true
        for (i, frame) in body.enumerated() {
            sent = try socket.send(frame, more: i < body.count - 1, dontWait: i == 0)
            if !sent { break }
        }
        guard sent else {
            let now = BusClock.monotonicNanoseconds()
            // Fewer events in flight than the queue holds, yet no room: there is no connection.
            if inFlight < Int(highWaterMark) && (inFlight > 0 || now - createdAt > AckedShardLink.reconnectNanos) {
                try reset(inFlight > 0 ? "connection to the shard lost" : "shard not reachable")
            }
            return false
        }
        var w = relayed.waiting
        w.sentAt = BusClock.monotonicNanoseconds()
        waiting.append(w)
        forwarded += 1
        return true
    }

    /// Relays every reply the shard sent to the producer waiting for it, through `front`.
    package func relayReplies(to front: ZMQSocket, checker: JSONReplyReader) throws {
        while let frames = try socket.receiveMultipart(dontWait: true) {
            guard let reply = frames.last else { continue }
            guard let w = waiting.first else {
                logger.warning("reply from a shard with no event waiting; dropped", ["shard": String(shard)])
                continue
            }
            let (ok, eventID) = checker.read(reply)
            if let expected = w.eventID, let eventID, expected != eventID {
                try reset("reply for event_id \(eventID) where \(expected) was expected")
                return
            }
            _ = waiting.popFirst()
            if ok { acknowledged += 1 } else { rejected += 1 }
            _ = try front.send(w.identity, more: true)
            if w.delimiter { _ = try front.send([UInt8](), more: true) }
            _ = try front.send(reply)
        }
    }

    /// Resets the link when the oldest event waited longer than `timeoutNanos`.
    package func checkTimeout(now: UInt64, timeoutNanos: UInt64) throws {
        guard let oldest = waiting.first, now - oldest.sentAt > timeoutNanos else { return }
        try reset("no reply from the shard within the acknowledgement timeout")
    }

    /// Replaces the DEALER with a new connection; the producers still waiting get no reply.
    package func reset(_ why: String) throws {
        let lost = inFlight
        unanswered += lost
        resets += 1
        waiting.removeAll()
        createdAt = BusClock.monotonicNanoseconds()
        socket = try AckedShardLink.makeSocket(context: context, endpoint: endpoint, highWaterMark: highWaterMark,
                                               curve: curve)
        if lost > 0 {
            logger.warning("shard connection reset; its producers get no reply and retry", [
                "shard": String(shard), "endpoint": endpoint, "reason": why, "unanswered": String(lost),
            ])
        } else {
            logger.debug("shard connection retried", ["shard": String(shard), "endpoint": endpoint, "reason": why])
        }
    }
}

extension ZMQOption {
    /// `ZMQ_RECONNECT_IVL` (zmq.h: 18): milliseconds between reconnection attempts; -1 disables them.
    package static let reconnectInterval = ZMQOption(rawValue: 18)
}
