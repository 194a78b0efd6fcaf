#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusTools
import CheckoutBusCore
import ZeroMQ
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// Drives a bus (the daemon, or the raw forwarder baseline) from one thread: a PUSH producer and a
/// SUB subscriber in one poll loop, so the driver takes one core and the bus the other.
///
/// Against shards (several ingest endpoints), each event goes to the shard owning its checkout
/// (``ShardRouter``, decided before the clock starts) and one SUB per shard's publish endpoint
/// receives; the counts and latencies cover every shard.
///
/// Each event's `event_id` carries its send time (monotonic nanoseconds, a clock shared by every
/// process on the host), stamped just before sending; the subscriber reads it back from what
/// arrives — the daemon's envelope or the forwarded raw bytes alike — for end-to-end latency.
/// Not `Sendable`; its sockets live on the calling thread.
package final class LoadDriver {
    /// What one run measured.
    package struct Result: Sendable {
        package var sent = 0
        package var receivedByKind = [Int](repeating: 0, count: LifecycleKind.allCases.count)
        package var receivedOther = 0
        package var deadLetters = 0
        package var seconds = 0.0
        /// End-to-end latencies in nanoseconds, one per received event.
        package var latencies: [UInt64] = []
        package var timedOut = false

        package var received: Int { receivedByKind.reduce(0, +) + receivedOther }
        package var throughput: Double { seconds > 0 ? Double(received) / seconds : 0 }

        /// The latency at quantile `q` (0...1), in microseconds.
        package func latencyMicros(_ q: Double, sorted: [UInt64]) -> Double {
            guard !sorted.isEmpty else { return 0 }
            let i = min(sorted.count - 1, Int((Double(sorted.count) * q).rounded(.up)) - 1)
            return Double(sorted[max(0, i)]) / 1000
        }
    }

    package enum Target: Sendable {
        /// `checkoutbusd`: typed topics; synchronise on the heartbeat that answers a subscription.
        case daemon
        /// The raw PULL→PUB forwarder: everything forwarded; synchronise with a probe message.
        case rawForwarder
    }

    package let context: ZMQContext
    /// One PUSH per ingest endpoint (per shard), in shard order.
    package let pushes: [ZMQSocket]
    /// One SUB per publish endpoint.
    package let subs: [ZMQSocket]
    package let target: Target
    /// Called about twice a second with (sent, received) while running.
    package var progress: ((Int, Int) -> Void)?

    /// - Parameter curve: CURVE client keys for both sockets (the key must be in both of the
    ///   daemon's allowlists).
    /// - Parameter sendHighWaterMark: the producer's queue (`ZMQ_SNDHWM`) when it should differ
    ///   from `highWaterMark`, which then bounds only the subscriber's.
    package convenience init(ingest: String, publish: String, target: Target, highWaterMark: Int32 = 1_000_000,
                            sendHighWaterMark: Int32? = nil, curve: CurveClientKeys? = nil) throws {
        try self.init(ingest: [ingest], publish: [publish], target: target, highWaterMark: highWaterMark,
                      sendHighWaterMark: sendHighWaterMark, curve: curve)
    }

    /// Drives shards: `ingest` lists the shards' `--ingest` endpoints in shard order (one: no
    /// routing; a `route` front counts as one), `publish` every publish endpoint to receive from.
    /// - Parameter curve: CURVE client keys for every socket.
    package init(ingest: [String], publish: [String], target: Target, highWaterMark: Int32 = 1_000_000,
                sendHighWaterMark: Int32? = nil, curve: CurveClientKeys? = nil) throws {
        precondition(!ingest.isEmpty && !publish.isEmpty, "LoadDriver needs an ingest and a publish endpoint")
        self.target = target
        context = try ZMQContext()
        let context = context
        subs = try publish.map { endpoint in
            let sub = try ZMQSocket(context: context, type: .sub)
            try sub.setOption(.receiveHighWaterMark, highWaterMark)
            try sub.setLinger(milliseconds: 0)
            try curve?.apply(to: sub)
            try sub.connect(endpoint)
            return sub
        }
        pushes = try ingest.map { endpoint in
            let push = try ZMQSocket(context: context, type: .push)
            try push.setOption(.sendHighWaterMark, sendHighWaterMark ?? highWaterMark)
            try push.setLinger(milliseconds: 0)
            try curve?.apply(to: push)
            try push.connect(endpoint)
            return push
        }
    }

    /// Subscribes and waits until the subscription is provably live on every publish endpoint.
    package func synchronize(timeoutSeconds: Double = 10) throws {
        let deadline = BusClock.monotonicNanoseconds() + UInt64(timeoutSeconds * 1e9)
        switch target {
        case .daemon:
            var live = Set<Int>()
            for sub in subs {
                try sub.subscribe("checkout.")
                try sub.subscribe("bus.deadletter")
                try sub.subscribe("bus.heartbeat")
            }
            while BusClock.monotonicNanoseconds() < deadline {
                // A heartbeat answers the subscription: that endpoint's subscriptions are live.
                if let (i, frames) = try receive(timeoutMilliseconds: 100), frames.first?.elementsEqual("bus.heartbeat".utf8) == true {
                    live.insert(i)
                    if live.count == subs.count { return }
                }
            }
        case .rawForwarder:
            let sub = subs[0]
            let push = pushes[0]
            try sub.subscribe("")
            while BusClock.monotonicNanoseconds() < deadline {
                try push.send("probe")
                if let (_, frames) = try receive(timeoutMilliseconds: 50), frames.first?.elementsEqual("probe".utf8) == true {
                    // Drain further probes already in flight.
                    while let (_, f) = try receive(timeoutMilliseconds: 50), f.first?.elementsEqual("probe".utf8) == true {}
                    return
                }
            }
        }
        throw ToolError("the bus did not answer a subscription within \(timeoutSeconds)s")
    }

    /// One message from any SUB, with that SUB's index.
    private func receive(timeoutMilliseconds: Int) throws -> (Int, [[UInt8]])? {
        let poller = ZMQPoller()
        for sub in subs { poller.addReadable(sub) }
        guard try poller.poll(timeoutMilliseconds: timeoutMilliseconds) > 0 else { return nil }
        for (i, sub) in subs.enumerated() where poller.isReadable(i) {
            if let frames = try sub.receiveMultipart(dontWait: true) { return (i, frames) }
        }
        return nil
    }

    /// Sends `events` (flat out, or at `rate` per second) and receives until `expected` messages
    /// arrived or nothing arrived for `idleTimeoutSeconds`.
    /// - Parameter expected: how many messages must arrive, given how many events were sent.
    package func run(_ events: inout [FloodGenerator.Event], rate: Double?, expected: (Int) -> Int,
                    sendLimitSeconds: Double? = nil, idleTimeoutSeconds: Double = 5) throws -> Result {
        var result = Result()
        result.latencies.reserveCapacity(events.count)
        // Each event's shard, decided before the clock starts (the stamp changes only event_id).
        var shardOf: [Int] = []
        if pushes.count > 1 {
            let router = ShardRouter(count: pushes.count)
            shardOf = events.map { router.route($0.bytes).shard }
        }
        let message = ZMQMessage()
        let poller = ZMQPoller()
        for sub in subs { poller.addReadable(sub) }
        let start = BusClock.monotonicNanoseconds()
        let interval = rate.map { UInt64(1e9 / $0) } ?? 0
        let sendDeadline = sendLimitSeconds.map { start + UInt64($0 * 1e9) } ?? UInt64.max
        var lastActivity = start
        var lastProgress = start
        var next = 0
        var sendingDone = events.isEmpty
        var mustArrive = sendingDone ? expected(0) : Int.max
        var blocked = false
        while true {
            var now = BusClock.monotonicNanoseconds()
            // Send what is due.
            if !sendingDone {
                var burst = 0
                while next < events.count && burst < 64 {
                    if interval > 0 && now < start + UInt64(next) * interval { break }
                    if now >= sendDeadline { break }
                    let stamp = BusClock.monotonicNanoseconds()
                    LoadDriver.stamp(&events[next], stamp)
                    let push = shardOf.isEmpty ? pushes[0] : pushes[shardOf[next]]
                    let sent = try events[next].bytes.withUnsafeBytes { try push.send($0, dontWait: true) }
                    if !sent {
                        blocked = true
                        break
                    }
                    blocked = false
                    next += 1
                    burst += 1
                    now = stamp
                }
                if next == events.count || now >= sendDeadline {
                    sendingDone = true
                    result.sent = next
                    mustArrive = expected(next)
                }
            }
            // Receive everything queued.
            var got = 0
            for sub in subs {
                while try sub.receive(into: message, dontWait: true) {
                    // Heartbeats are not progress: a run whose events stopped arriving must time out.
                    if try account(message, from: sub, &result) { got += 1 }
                }
            }
            now = BusClock.monotonicNanoseconds()
            if got > 0 || (!sendingDone && next > 0) { lastActivity = now }
            if sendingDone && result.received + result.deadLetters >= mustArrive { break }
            if now - lastActivity > UInt64(idleTimeoutSeconds * 1e9) {
                result.timedOut = true
                break
            }
            if let progress, now - lastProgress > 500_000_000 {
                lastProgress = now
                progress(next, result.received)
            }
            if got == 0 {
                // Nothing arrived: wait for the subscriber, or for the next send slot when paced.
                if sendingDone {
                    try poller.poll(timeoutMilliseconds: 50)
                } else if interval > 0 {
                    let due = start + UInt64(next) * interval
                    if due > now + 1_500_000 {
                        try poller.poll(timeoutMilliseconds: Int((due - now) / 1_000_000) - 1)
                    } else if due > now {
                        usleep(20)
                    }
                } else if blocked {
                    try poller.poll(timeoutMilliseconds: 1)
                }
            }
        }
        result.sent = next
        result.seconds = Double(BusClock.monotonicNanoseconds() - start) / 1e9
        return result
    }

    /// Counts one received frame (topic, or a raw forwarded event) and records its latency.
    /// - Returns: false for a heartbeat.
    @discardableResult
    private func account(_ message: ZMQMessage, from sub: ZMQSocket, _ result: inout Result) throws -> Bool {
        let now = BusClock.monotonicNanoseconds()
        switch target {
        case .daemon:
            // Topic frame, then the envelope.
            let kind: Int? = message.withUnsafeBytes { LoadDriver.kindIndex(topic: $0) }
            let isDeadLetter = message.withUnsafeBytes { $0.starts(with: "bus.deadletter".utf8) }
            let isHeartbeat = message.withUnsafeBytes { $0.starts(with: "bus.heartbeat".utf8) }
            guard message.hasMore else { return true }
            _ = try sub.receive(into: message)
            if isHeartbeat { return false }
            if isDeadLetter {
                result.deadLetters += 1
                return true
            }
            if let kind { result.receivedByKind[kind] += 1 } else { result.receivedOther += 1 }
        case .rawForwarder:
            result.receivedOther += 1
        }
        if let sent = message.withUnsafeBytes({ LoadDriver.sendStamp(in: $0) }), now > sent {
            result.latencies.append(now - sent)
        }
        return true
    }

    package static func kindIndex(topic: UnsafeRawBufferPointer) -> Int? {
        guard topic.count > 9, topic.starts(with: "checkout.".utf8) else { return nil }
        switch topic[9] {
        case UInt8(ascii: "s"): return Int(LifecycleKind.start.rawValue)
        case UInt8(ascii: "u"): return Int(LifecycleKind.update.rawValue)
        case UInt8(ascii: "c"): return Int(LifecycleKind.complete.rawValue)
        case UInt8(ascii: "f"): return Int(LifecycleKind.fail.rawValue)
        case UInt8(ascii: "d"): return Int(LifecycleKind.dismiss.rawValue)
        default: return nil
        }
    }

    /// Writes `nanos` as 19 zero-padded digits into the event's stamp field.
    package static func stamp(_ event: inout FloodGenerator.Event, _ nanos: UInt64) {
        let offset = event.stampOffset
        event.bytes.withUnsafeMutableBufferPointer { buf in
            var v = nanos
            var i = offset + 18
            while i >= offset {
                buf[i] = UInt8(ascii: "0") + UInt8(v % 10)
                v /= 10
                i -= 1
            }
        }
    }

    /// Finds `"event_id":"<run>:<n>:<19 digits>"` and returns the digits' value.
    package static func sendStamp(in bytes: UnsafeRawBufferPointer) -> UInt64? {
        let key: StaticString = #""event_id":""#
        let keyBytes = UnsafeRawBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount)
        let n = bytes.count
        guard n > keyBytes.count else { return nil }
        var i = 0
        let limit = min(n - keyBytes.count, 600)
        outer: while i < limit {
            for k in 0..<keyBytes.count where bytes[i + k] != keyBytes[k] {
                i += 1
                continue outer
            }
            var j = i + keyBytes.count
            var colons = 0
            while j < n && colons < 2 {
                if bytes[j] == UInt8(ascii: ":") { colons += 1 }
                if bytes[j] == UInt8(ascii: "\"") { return nil }
                j += 1
            }
            guard j + 19 <= n else { return nil }
            var v: UInt64 = 0
            for k in 0..<19 {
                let d = bytes[j + k] &- UInt8(ascii: "0")
                guard d < 10 else { return nil }
                v = v * 10 + UInt64(d)
            }
            return v
        }
        return nil
    }
}
