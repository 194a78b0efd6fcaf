#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusCore
import ZeroMQ
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// The loop behind `checkoutbus route`: producers' events in, each one forwarded unchanged to the
/// shard that owns its checkout (``ShardRouter``).
///
/// Fire-and-forget: a PULL bound at ``Options/listen``, one PUSH per shard. Acknowledged: a ROUTER
/// bound at ``Options/listenAcked``, one ``AckedShardLink`` (DEALER) per shard, each reply relayed
/// to the producer that sent the event. Nothing is dropped: when a shard cannot take an event
/// (its queue of ``Options/highWaterMark`` is full, because it is down or slow), the relay holds
/// that event and stops reading its input until the shard takes it, so producers are pushed back
/// by ZeroMQ's own high-water marks. The events of other shards wait too: the relay has one
/// input queue per socket and keeps each producer's order.
///
/// Not `Sendable`; every socket lives on the thread that calls ``run(stop:ready:)``.
package final class ShardRelay {
    /// What to bind, where the shards are, and how long to wait.
    package struct Options: Sendable {
        /// The PULL endpoint for fire-and-forget producers; nil: none.
        package var listen: String?
        /// The shards' `--ingest` endpoints, in shard order.
        package var shards: [String] = []
        /// The ROUTER endpoint for acknowledged producers; nil: none.
        package var listenAcked: String?
        /// The shards' `--ingest-acked` endpoints, in shard order.
        package var shardsAcked: [String] = []
        /// Events queued per socket before the relay pushes back.
        package var highWaterMark: Int32 = 100_000
        /// How long an acknowledged event may wait for its shard's reply (nanoseconds).
        package var ackTimeoutNanos: UInt64 = 30_000_000_000
        /// How long to keep delivering queued events after SIGTERM (milliseconds).
        package var lingerMilliseconds: Int32 = 10_000
        /// Larger events are routed by their raw bytes (the shards dead-letter them `oversized`).
        package var maxMessageBytes = 1 << 20
        /// How often to log the counts (nanoseconds); 0: only at exit.
        package var statsIntervalNanos: UInt64 = 10_000_000_000
        /// CURVE client keys for the connections to the shards.
        package var curve: CurveClientKeys?
        package init() {}
    }

    /// The endpoints as bound.
    package struct Bound: Sendable {
        package var listen: String?
        package var listenAcked: String?
        package var shards: Int

        /// The ready line: one JSON object.
        package var readyLine: String {
            var w = JSONWriter(capacity: 256)
            w.append("{\"ready\":true,\"listen\":")
            if let listen { w.appendString(listen) } else { w.append("null") }
            w.append(",\"listen_acked\":")
            if let listenAcked { w.appendString(listenAcked) } else { w.append("null") }
            w.append(",\"shards\":")
            w.append(int: shards)
            w.append(",\"pid\":")
            w.append(int: Int(getpid()))
            w.append("}\n")
            return String(decoding: w.bytes, as: UTF8.self)
        }
    }

    /// An event a shard could not take yet.
    private struct Held {
        var shard: Int
        var frames: [[UInt8]]
    }

    package let options: Options
    package let logger: BusLogger
    private let router: ShardRouter
    private let shardCount: Int

    // Fire-and-forget counts.
    private var received = 0
    private var forwarded: [Int]
    /// Events that did not decode, sent to a shard chosen by their bytes.
    private var unowned = 0
    /// Events still held, or (acknowledged) still waiting for their shard's reply, when the linger
    /// ran out at exit (logged as an error).
    private var undelivered = 0
    private var receivedAcked = 0

    package init(options: Options, logger: BusLogger) {
        self.options = options
        self.logger = logger
        shardCount = max(options.shards.count, options.shardsAcked.count)
        router = ShardRouter(count: shardCount)
        router.maxMessageBytes = options.maxMessageBytes
        router.keepsEventIDs = options.listenAcked != nil
        forwarded = [Int](repeating: 0, count: shardCount)
    }

    /// Binds, reports the bound endpoints through `ready`, and relays until `stop` is raised; then
    /// stops accepting, forwards what it already received, waits for the shards' replies, and
    /// returns — all within one ``Options/lingerMilliseconds`` of the stop.
    ///
    /// Events handed to a PUSH stay in its queue while their shard is down or slow. They are given
    /// what is left of the linger when the sockets close; if terminating the context runs into
    /// that deadline, some may have been discarded, and an error is logged for every shard that had
    /// events handed to it (libzmq cannot tell how many of them were delivered: "up to N").
    /// - Returns: false when some events may not have been delivered before the linger ran out.
    package func run(stop: StopSignal, ready: (Bound) -> Void) throws -> Bool {
        var context: ZMQContext? = try ZMQContext(ioThreads: 1)
        let deadline = try relay(context: context!, stop: stop, ready: ready)
        // Every socket is closed (with the rest of the linger) once `relay` returned; terminating
        // the context waits for the PUSH queues to reach their shards, up to that deadline.
        context = nil
        let terminated = BusClock.monotonicNanoseconds()
        if let deadline, !forwarded.allSatisfy({ $0 == 0 }), terminated + 2_000_000 >= deadline {
            for (shard, count) in forwarded.enumerated() where count > 0 {
                logger.error("the linger ran out while events queued for this shard may still have been waiting; "
                    + "they are discarded", [
                        "shard": String(shard), "endpoint": options.shards[shard],
                        "possibly_undelivered": "up to \(count)",
                    ])
            }
            return false
        }
        return undelivered == 0
    }

    /// The loop of ``run(stop:ready:)`` on `context`. Every socket it makes is closed when it returns.
    /// - Returns: the stop's deadline (monotonic nanoseconds) when there are PUSH sockets, whose
    ///   linger was set to end there.
    private func relay(context: ZMQContext, stop: StopSignal, ready: (Bound) -> Void) throws -> UInt64? {
        var pull: ZMQSocket?
        var pushes: [ZMQSocket] = []
        if let listen = options.listen {
            let socket = try ZMQSocket(context: context, type: .pull)
            try socket.setOption(.receiveHighWaterMark, options.highWaterMark)
            try socket.setLinger(milliseconds: 0)
            try socket.bind(listen)
            pull = socket
            for endpoint in options.shards {
                let push = try ZMQSocket(context: context, type: .push)
                try push.setOption(.sendHighWaterMark, options.highWaterMark)
                try push.setLinger(milliseconds: options.lingerMilliseconds)
                try options.curve?.apply(to: push)
                try push.connect(endpoint)
                pushes.append(push)
            }
        }
        var front: ZMQSocket?
        var links: [AckedShardLink] = []
        if let listenAcked = options.listenAcked {
            let socket = try ZMQSocket(context: context, type: .router)
            try socket.setOption(.receiveHighWaterMark, options.highWaterMark)
            try socket.setOption(.sendHighWaterMark, 1_000_000)
            try socket.setLinger(milliseconds: options.lingerMilliseconds)
            try socket.bind(listenAcked)
            front = socket
            for (i, endpoint) in options.shardsAcked.enumerated() {
                links.append(try AckedShardLink(shard: i, endpoint: endpoint, context: context,
                                                highWaterMark: options.highWaterMark, curve: options.curve, logger: logger))
            }
        }
        let bound = Bound(listen: try pull?.lastEndpoint, listenAcked: try front?.lastEndpoint, shards: shardCount)
        ready(bound)
        logger.info("started", [
            "listen": bound.listen ?? "off", "listen_acked": bound.listenAcked ?? "off", "shards": String(shardCount),
            "shard_endpoints": options.shards.joined(separator: ","),
            "shard_acked_endpoints": options.shardsAcked.joined(separator: ","),
        ])

        let message = ZMQMessage()
        let replies = JSONReplyReader()
        var held: Held?
        var heldAcked: AckedShardLink.Relayed?
        var heldAckedShard = 0
        var nextStats = BusClock.monotonicNanoseconds() + options.statsIntervalNanos
        // After the stop signal, input is still read until it has been quiet for `quietNanos`
        // (events a producer already sent may still be on their way through the kernel), then the
        // endpoints are closed and what is queued is forwarded, all within the linger.
        var stopping = false
        var deadline = UInt64.max
        var lastInput = BusClock.monotonicNanoseconds()
        let quietNanos: UInt64 = 200_000_000
        while true {
            let now = BusClock.monotonicNanoseconds()
            if stop.isRaised && !stopping {
                stopping = true
                deadline = now + UInt64(options.lingerMilliseconds) * 1_000_000
                lastInput = now
                logger.info("stopping: forwarding what was received")
            }
            if stopping {
                let idle = held == nil && heldAcked == nil && links.allSatisfy { $0.inFlight == 0 }
                if (idle && now - lastInput >= quietNanos) || now >= deadline { break }
            }
            let before = received + receivedAcked
            let poller = ZMQPoller()
            let pullIndex = pull.flatMap { held == nil ? poller.addReadable($0) : nil }
            // After the stop the front is no longer read: an event read then could not be sure of its reply.
            let frontIndex = front.flatMap { heldAcked == nil && !stopping ? poller.addReadable($0) : nil }
            let linkIndexes = links.map { poller.addReadable($0.socket) }
            let blocked = held != nil || heldAcked != nil
            try poller.poll(timeoutMilliseconds: blocked ? 1 : stopping ? 20 : 100)
            if let pull {
                if let h = held, try send(h, pushes) { held = nil }
                if held == nil, pullIndex.map(poller.isReadable) ?? true {
                    held = try drainPull(pull, pushes, message, limit: 512)
                }
            }
            if let front {
                for (link, index) in zip(links, linkIndexes) where poller.isReadable(index) {
                    try link.relayReplies(to: front, checker: replies)
                }
                if let h = heldAcked, try links[heldAckedShard].forward(h) { heldAcked = nil }
                if heldAcked == nil, !stopping, frontIndex.map(poller.isReadable) ?? true,
                    let (h, shard) = try drainFront(front, links, limit: 512)
                {
                    heldAcked = h
                    heldAckedShard = shard
                }
                let now = BusClock.monotonicNanoseconds()
                for link in links { try link.checkTimeout(now: now, timeoutNanos: options.ackTimeoutNanos) }
            }
            if received + receivedAcked != before { lastInput = BusClock.monotonicNanoseconds() }
            if options.statsIntervalNanos > 0, BusClock.monotonicNanoseconds() >= nextStats {
                logCounts("routed", links)
                nextStats = BusClock.monotonicNanoseconds() + options.statsIntervalNanos
            }
        }

        // Stop accepting fire-and-forget input and forward what is still queued. The acknowledged
        // front stays bound, unread, until here: the replies relayed above still reach their
        // producers; events it did not read get no reply and are retried by their producers.
        if let pull, let listen = bound.listen { try? pull.unbind(listen) }
        if let pull {
            while BusClock.monotonicNanoseconds() < deadline {
                if let h = held {
                    if try send(h, pushes) { held = nil } else { usleep(1000); continue }
                }
                held = try drainPull(pull, pushes, message, limit: 512)
                if try held == nil && !hasInput(pull) { break }
            }
            if held != nil { undelivered += 1 }
        }
        if let front {
            for link in links { try link.relayReplies(to: front, checker: replies) }
            if heldAcked != nil { undelivered += 1 }
            undelivered += links.reduce(0) { $0 + $1.inFlight }
        }
        logCounts("stopped", links)
        if undelivered > 0 {
            logger.error("events not delivered to their shard, or not answered by it, before the linger ran out",
                         ["count": String(undelivered)])
        }
        // What is left of the linger is all the PUSH queues and the replies still queued for the
        // producers get: the sockets close when this returns, and the context waits for them.
        let now = BusClock.monotonicNanoseconds()
        let remaining = Int32(clamping: now < deadline ? (deadline - now) / 1_000_000 : 0)
        for push in pushes { try push.setLinger(milliseconds: remaining) }
        try front?.setLinger(milliseconds: remaining)
        return pushes.isEmpty ? nil : deadline
    }

    /// Receives and forwards fire-and-forget events, at most `limit`, without blocking.
    /// - Returns: the event its shard could not take, if any (the caller holds it).
    private func drainPull(_ pull: ZMQSocket, _ pushes: [ZMQSocket], _ message: ZMQMessage, limit: Int) throws -> Held? {
        var n = 0
        while n < limit, try pull.receive(into: message, dontWait: true) {
            n += 1
            received += 1
            if message.hasMore {
                // Several frames: the shard dead-letters it as `multipart`; route it by its first frame.
                var frames = [message.bytes]
                while message.hasMore {
                    _ = try pull.receive(into: message)
                    frames.append(message.bytes)
                }
                unowned += 1
                let h = Held(shard: frames[0].withUnsafeBytes { ShardRouter.fallbackShard($0, count: shardCount) },
                             frames: frames)
                if !(try send(h, pushes)) { return h }
                continue
            }
            let route = message.withUnsafeBytes { router.route($0) }
            if !route.owned { unowned += 1 }
            let sent = try message.withUnsafeBytes { try pushes[route.shard].send($0, dontWait: true) }
            if !sent { return Held(shard: route.shard, frames: [message.bytes]) }
            forwarded[route.shard] += 1
        }
        return nil
    }

    /// Sends a held event without blocking. - Returns: whether its shard took it.
    private func send(_ h: Held, _ pushes: [ZMQSocket]) throws -> Bool {
        for (i, frame) in h.frames.enumerated() {
            guard try pushes[h.shard].send(frame, more: i < h.frames.count - 1, dontWait: i == 0) else { return false }
        }
        forwarded[h.shard] += 1
        return true
    }

    /// Receives acknowledged events, at most `limit`, and forwards each to its shard's link.
    /// - Returns: the event its shard could not take, if any, and that shard.
    private func drainFront(_ front: ZMQSocket, _ links: [AckedShardLink], limit: Int) throws
        -> (AckedShardLink.Relayed, Int)?
    {
        var n = 0
        while n < limit, let frames = try front.receiveMultipart(dontWait: true) {
            n += 1
            guard frames.count >= 2 else { continue }
            receivedAcked += 1
            // DEALER: [identity][event]. REQ: [identity][empty][event]. As the daemon reads them.
            let delimiter = frames.count >= 3 && frames[1].isEmpty
            let body = Array(frames.dropFirst(delimiter ? 2 : 1))
            let shard: Int
            var eventID: String?
            if body.count == 1 {
                let route = router.route(body[0])
                if !route.owned { unowned += 1 }
                shard = route.shard
                eventID = router.lastEventID
            } else {
                unowned += 1
                shard = body[0].withUnsafeBytes { ShardRouter.fallbackShard($0, count: shardCount) }
            }
            let relayed = AckedShardLink.Relayed(
                waiting: .init(identity: frames[0], delimiter: delimiter, eventID: eventID, sentAt: 0), body: body)
            if !(try links[shard].forward(relayed)) { return (relayed, shard) }
        }
        return nil
    }

    private func hasInput(_ socket: ZMQSocket) throws -> Bool {
        let poller = ZMQPoller()
        poller.addReadable(socket)
        return try poller.poll(timeoutMilliseconds: 0) > 0
    }

    /// The counts last logged, so an idle relay does not repeat them every interval.
    private var lastLogged: [Int] = []

    private func logCounts(_ msg: String, _ links: [AckedShardLink]) {
        func list(_ values: [Int]) -> String { values.map(String.init).joined(separator: ",") }
        let snapshot = [received, receivedAcked, unowned, undelivered] + forwarded
            + links.flatMap { [$0.acknowledged, $0.rejected, $0.unanswered] }
        if msg == "routed" && snapshot == lastLogged { return }
        lastLogged = snapshot
        logger.info(msg, [
            "received": String(received), "forwarded_by_shard": list(forwarded), "unowned": String(unowned),
            "received_acked": String(receivedAcked), "forwarded_acked_by_shard": list(links.map(\.forwarded)),
            "acknowledged_by_shard": list(links.map(\.acknowledged)), "rejected_by_shard": list(links.map(\.rejected)),
            "unanswered_by_shard": list(links.map(\.unanswered)), "undelivered": String(undelivered),
        ])
    }
}
