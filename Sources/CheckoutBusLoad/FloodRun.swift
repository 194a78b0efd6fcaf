#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusTools
import Dispatch
import Foundation
import Synchronization
import CheckoutBusClient
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusRuntime
import ZeroMQ

/// `checkoutbus flood`'s engine: producer threads that generate and send, subscriber threads that
/// receive and time, and the calling thread that watches them, stops them and gathers the result.
///
/// Each producer owns a share of the checkouts (``FloodGenerator/Stream``: generated as sent, O(1)
/// per event) and its own connection — a PUSH to `--ingest`, or with `acked` a DEALER to
/// `--ingest-acked` with a window of events in flight — one per shard. Each subscriber owns a SUB
/// per publish endpoint and counts everything the bus publishes. Every event carries its send
/// time in its `event_id`: latency needs no table of events in flight, and an acknowledgement's
/// latency comes from the `event_id` in the reply.
///
/// The tool measures itself: each producer's lag behind its send schedule and the time the bus
/// held it back (a full queue), each thread's busy share, so a report can say when flood, not the
/// bus, limited the run. Everything is kept per second for the timeline.
///
/// `Sendable`: the threads share only atomics and what ``run(stop:progress:)`` gathers after
/// joining them; each thread's sockets are made and used on that thread.
package final class FloodRun: Sendable {
    /// What to run. `Sendable`.
    package struct Configuration: Sendable {
        /// Ingest endpoints, one per shard in shard order (`--ingest-acked` ones with `acked`).
        package var ingest: [String]
        package var publish: [String]
        package var generator: FloodGenerator
        package var producers = 1
        package var subscribers = 1
        package var acked = false
        /// Events in flight per acknowledged producer.
        package var window = 1000
        /// Events per second, over all producers (nil: flat out).
        package var rate: Double?
        package var count: Int?
        package var duration: Double?
        package var curve: CurveClientKeys?
        /// After sending ends, give up when nothing arrives for this long.
        package var idleTimeoutSeconds = 5.0
        /// After an interruption, wait at most this long for what is in flight.
        package var graceSeconds = 2.0

        package init(ingest: [String], publish: [String], generator: FloodGenerator) {
            self.ingest = ingest
            self.publish = publish
            self.generator = generator
        }
    }

    /// One second of a run (from the start of sending), as one producer or subscriber saw it,
    /// then summed. `Sendable`.
    package struct Second: Sendable {
        package var sent = 0
        /// Of the events sent this second, those the generator expects published / suppressed.
        package var expectedPublished = 0
        package var expectedSuppressed = 0
        /// Lifecycle envelopes the first subscriber received this second.
        package var published = 0
        package var deadLetters = 0
        /// End-to-end latency of what arrived this second (every subscriber).
        package var latency = SecondLatencies()
        /// Acknowledgement latency of the replies that arrived this second.
        package var ack = SecondLatencies()
        package var acked = 0
        package var rejected = 0
        /// The longest a producer was behind its send schedule this second.
        package var maxSendLagNanos: UInt64 = 0
        /// Time producers were held back by a full queue (the bus not taking more), summed.
        package var heldBackNanos: UInt64 = 0
        /// The busiest subscriber's busy share this second (0...1).
        package var subscriberBusy = 0.0

        mutating func add(_ o: Second) {
            sent += o.sent
            expectedPublished += o.expectedPublished
            expectedSuppressed += o.expectedSuppressed
            published += o.published
            deadLetters += o.deadLetters
            latency.merge(o.latency)
            ack.merge(o.ack)
            acked += o.acked
            rejected += o.rejected
            maxSendLagNanos = max(maxSendLagNanos, o.maxSendLagNanos)
            heldBackNanos += o.heldBackNanos
            subscriberBusy = max(subscriberBusy, o.subscriberBusy)
        }
    }

    /// A second's latencies: a histogram made only for seconds with observations. `Sendable`.
    package struct SecondLatencies: Sendable {
        package var histogram: LatencyHistogram? = nil
        mutating func merge(_ other: SecondLatencies) {
            guard let h = other.histogram else { return }
            if histogram == nil { histogram = h } else { histogram!.merge(h) }
        }
    }

    /// What one producer did. `Sendable`.
    package struct ProducerResult: Sendable {
        package var sent = 0
        package var expectedPublished = [Int](repeating: 0, count: LifecycleKind.allCases.count)
        package var expectedSuppressed = 0
        package var sendLag = LatencyHistogram()
        package var ack = LatencyHistogram()
        package var acked = 0
        package var rejected = 0
        package var unanswered = 0
        package var heldBackNanos: UInt64 = 0
        package var busyNanos: UInt64 = 0
        package var activeNanos: UInt64 = 0
        package var seconds: [Second] = []
        package var error: String?
    }

    /// What one subscriber received. `Sendable`.
    package struct SubscriberResult: Sendable {
        package var receivedByKind = [Int](repeating: 0, count: LifecycleKind.allCases.count)
        package var receivedOther = 0
        /// Envelopes of other traffic on the bus (another run, a producer of its own): seen, for
        /// the gaps, and otherwise left out of every figure.
        package var foreign = 0
        package var deadLetters = 0
        /// Envelopes never received: gaps in `seq` (dropped at the daemon's `--publish-hwm` for this
        /// subscriber, which did not keep up, or lost in a daemon crash).
        package var missed: UInt64 = 0
        /// Silences over ``FloodRun/outageNanos`` (not even a heartbeat: the daemon was down or
        /// unreachable), and the envelopes published but never received across them.
        package var outages = 0
        package var lostInOutages: UInt64 = 0
        package var latency = LatencyHistogram()
        /// The end-to-end latency split at the daemon's `received_at` (wall clock, milliseconds):
        /// from flood's send to the daemon taking the event (flood's producer queue, the wire, the
        /// daemon's ingest queue), and from there to this subscriber reading the envelope (the
        /// pipeline, publishing, and this subscriber's own queue). Millisecond resolution.
        package var toDaemon = LatencyHistogram()
        package var daemonToRead = LatencyHistogram()
        package var busyNanos: UInt64 = 0
        package var activeNanos: UInt64 = 0
        package var seconds: [Second] = []
        package var error: String?
        package var received: Int { receivedByKind.reduce(0, +) + receivedOther }
    }

    /// The whole run. `Sendable`.
    package struct Outcome: Sendable {
        package var producers: [ProducerResult]
        package var subscribers: [SubscriberResult]
        /// Seconds from the start of sending to the end of receiving.
        package var seconds: Double
        /// Seconds spent sending.
        package var sendSeconds: Double
        package var timedOut: Bool
        package var interrupted: Bool
        package var timeline: [Second]
        package var configuration: Configuration

        package var sent: Int { producers.reduce(0) { $0 + $1.sent } }
        package var expectedPublished: [Int] {
            producers.reduce(into: [Int](repeating: 0, count: LifecycleKind.allCases.count)) { acc, p in
                for i in acc.indices { acc[i] += p.expectedPublished[i] }
            }
        }
        package var expectedSuppressed: Int { producers.reduce(0) { $0 + $1.expectedSuppressed } }
        package var latency: LatencyHistogram {
            subscribers.reduce(into: LatencyHistogram()) { $0.merge($1.latency) }
        }
        package var ack: LatencyHistogram { producers.reduce(into: LatencyHistogram()) { $0.merge($1.ack) } }
        package var sendLag: LatencyHistogram { producers.reduce(into: LatencyHistogram()) { $0.merge($1.sendLag) } }
        package var heldBackSeconds: Double { Double(producers.reduce(0) { $0 + $1.heldBackNanos }) / 1e9 }
        /// The busiest producer's share of its running time spent generating and sending.
        package var producerBusy: Double {
            producers.map { $0.activeNanos > 0 ? Double($0.busyNanos) / Double($0.activeNanos) : 0 }.max() ?? 0
        }
        /// The busiest subscriber's share of the run spent receiving (not waiting for messages).
        package var subscriberBusy: Double {
            subscribers.map { $0.activeNanos > 0 ? Double($0.busyNanos) / Double($0.activeNanos) : 0 }.max() ?? 0
        }
        package var errors: [String] { producers.compactMap(\.error) + subscribers.compactMap(\.error) }
    }

    package let configuration: Configuration
    /// Raised to stop the producers (interrupt, deadline); the subscribers stop on `finish`.
    private let stopSending = StopSignal()
    private let finish = StopSignal()
    private let subscribersReady = Atomic<Int>(0)
    /// Producers that finished sending (acknowledged ones may still wait for replies).
    private let producersDone = Atomic<Int>(0)
    private let subscriberResults: Mutex<[SubscriberResult?]>
    private let producerResults: Mutex<[ProducerResult?]>
    /// Per producer: events sent so far; per subscriber: lifecycle envelopes plus dead letters.
    private let sentCounters: [Counter]
    private let expectedCounters: [Counter]
    private let receivedCounters: [Counter]
    /// Per acknowledged producer: events sent and not answered yet.
    private let inFlightCounters: [Counter]
    private let startNanos = Atomic<UInt64>(0)

    package final class Counter: Sendable {
        let value = Atomic<Int>(0)
        init() {}
    }

    package init(_ configuration: Configuration) throws {
        precondition(!configuration.ingest.isEmpty && !configuration.publish.isEmpty)
        self.configuration = configuration
        sentCounters = (0..<configuration.producers).map { _ in Counter() }
        expectedCounters = (0..<configuration.producers).map { _ in Counter() }
        receivedCounters = (0..<configuration.subscribers).map { _ in Counter() }
        inFlightCounters = (0..<configuration.producers).map { _ in Counter() }
        subscriberResults = Mutex(Array(repeating: nil, count: configuration.subscribers))
        producerResults = Mutex(Array(repeating: nil, count: configuration.producers))
    }

    // MARK: Running

    /// Runs the flood to its end: every expected envelope received by every subscriber, nothing
    /// arriving for the idle timeout, or `stop` raised (then sending stops and what is in flight
    /// gets ``Configuration/graceSeconds``).
    /// - Parameter progress: called about twice a second with (sent, received by the first subscriber).
    package func run(stop: StopSignal, progress: ((Int, Int) -> Void)? = nil) throws -> Outcome {
        let config = configuration
        let joined = DispatchSemaphore(value: 0)
        for i in 0..<config.subscribers {
            let thread = Thread { [self] in
                let r = subscribe(index: i)
                self.subscriberResults.withLock { $0[i] = r }
                joined.signal()
            }
            thread.name = "flood-sub-\(i)"
            thread.start()
        }
        func joinAll(_ n: Int) { for _ in 0..<n { joined.wait() } }
        // The subscriptions must be live before the first event is sent.
        let readyDeadline = BusClock.monotonicNanoseconds() + 10_000_000_000
        while subscribersReady.load(ordering: .acquiring) < config.subscribers {
            if BusClock.monotonicNanoseconds() > readyDeadline || stop.isRaised {
                finish.raise()
                joinAll(config.subscribers)
                let why = subscriberResults.withLock { $0.compactMap { $0?.error }.first }
                throw ToolError(why ?? (stop.isRaised ? "interrupted before the bus answered a subscription"
                                                         : "the bus did not answer a subscription within 10s"))
            }
            usleep(1000)
        }
        let start = BusClock.monotonicNanoseconds()
        startNanos.store(start, ordering: .releasing)
        for i in 0..<config.producers {
            let thread = Thread { [self] in
                let r = produce(index: i, start: start)
                self.producerResults.withLock { $0[i] = r }
                joined.signal()
            }
            thread.name = "flood-push-\(i)"
            thread.start()
        }
        var interruptedAt: UInt64?
        var sendEnd: UInt64?
        var timedOut = false
        var lastReceived = -1
        var lastChange = start
        var lastProgress = start
        while true {
            let now = BusClock.monotonicNanoseconds()
            if stop.isRaised && interruptedAt == nil {
                interruptedAt = now
                stopSending.raise()
            }
            let received = receivedCounters.map { $0.value.load(ordering: .relaxed) }
            if received.reduce(0, +) != lastReceived {
                lastReceived = received.reduce(0, +)
                lastChange = now
            }
            if let progress, now - lastProgress > 500_000_000 {
                lastProgress = now
                progress(sentCounters.reduce(0) { $0 + $1.value.load(ordering: .relaxed) }, received.first ?? 0)
            }
            if producersDone.load(ordering: .acquiring) == config.producers {
                if sendEnd == nil {
                    sendEnd = now
                    lastChange = max(lastChange, now)
                }
                let mustArrive = expectedCounters.reduce(0) { $0 + $1.value.load(ordering: .relaxed) }
                let unanswered = inFlightCounters.reduce(0) { $0 + $1.value.load(ordering: .relaxed) }
                if received.allSatisfy({ $0 >= mustArrive }) && unanswered == 0 { break }
                if let interruptedAt, now - interruptedAt > UInt64(config.graceSeconds * 1e9) { break }
                if now - lastChange > UInt64(config.idleTimeoutSeconds * 1e9) {
                    timedOut = interruptedAt == nil
                    break
                }
            }
            usleep(2000)
        }
        let end = BusClock.monotonicNanoseconds()
        finish.raise()
        stopSending.raise()
        joinAll(config.subscribers + config.producers)
        let producers = producerResults.withLock { $0.map { $0 ?? ProducerResult(error: "a producer did not report") } }
        let subscribers = subscriberResults.withLock { $0.map { $0 ?? SubscriberResult(error: "a subscriber did not report") } }
        var timeline: [Second] = []
        for part in producers.map(\.seconds) + subscribers.map(\.seconds) {
            if part.count > timeline.count { timeline.append(contentsOf: repeatElement(Second(), count: part.count - timeline.count)) }
            for (i, s) in part.enumerated() { timeline[i].add(s) }
        }
        return Outcome(producers: producers, subscribers: subscribers, seconds: Double(end - start) / 1e9,
                       sendSeconds: Double((sendEnd ?? end) - start) / 1e9, timedOut: timedOut,
                       interrupted: interruptedAt != nil, timeline: timeline, configuration: config)
    }

    // MARK: Producers

    private func produce(index p: Int, start: UInt64) -> ProducerResult {
        let config = configuration
        var r = ProducerResult()
        var stream = FloodGenerator.Stream(config.generator, producer: p, of: config.producers)
        let limit = config.count.map { $0 / config.producers + (p < $0 % config.producers ? 1 : 0) } ?? Int.max
        let interval = config.rate.map { UInt64(1e9 * Double(config.producers) / $0) } ?? 0
        // Producers start staggered within one interval, so paced producers do not send in step.
        let offset = interval / UInt64(config.producers) * UInt64(p)
        let sendDeadline = config.duration.map { start + UInt64($0 * 1e9) } ?? UInt64.max
        let sentCounter = sentCounters[p]
        let expectedCounter = expectedCounters[p]
        var waitedNanos: UInt64 = 0
        var signalledDone = false
        do {
            // A context (an I/O thread) per producer and per subscriber: a producer flat out must
            // not starve a subscriber's reading.
            let context = try ZMQContext()
            let sockets = try config.ingest.map { endpoint in
                let s = try ZMQSocket(context: context, type: config.acked ? .dealer : .push)
                try s.setOption(.sendHighWaterMark, 1_000_000)
                if config.acked { try s.setOption(.receiveHighWaterMark, 1_000_000) }
                try s.setLinger(milliseconds: 0)
                try config.curve?.apply(to: s)
                try s.connect(endpoint)
                return s
            }
            let router = sockets.count > 1 ? ShardRouter(count: sockets.count) : nil
            let poller = ZMQPoller()
            for s in sockets { poller.addReadable(s) }
            let reply = ZMQMessage()
            var pending: FloodGenerator.Event?
            var pendingShard = 0
            var inFlight = 0
            var expectedPublished = 0

            func second(_ now: UInt64) -> Int { Int((now - start) / 1_000_000_000) }
            func at(_ i: Int) -> Int {
                if r.seconds.count <= i { r.seconds.append(contentsOf: repeatElement(Second(), count: i + 1 - r.seconds.count)) }
                return i
            }
            /// Reads every acknowledgement that has arrived.
            func readReplies() throws {
                for s in sockets {
                    while try s.receive(into: reply, dontWait: true) {
                        let now = BusClock.monotonicNanoseconds()
                        inFlight -= 1
                        let (ok, stamp) = reply.withUnsafeBytes { bytes in
                            (FloodRun.replyIsOK(bytes), LoadDriver.sendStamp(in: bytes))
                        }
                        let i = at(second(now))
                        if ok { r.acked += 1; r.seconds[i].acked += 1 } else { r.rejected += 1; r.seconds[i].rejected += 1 }
                        if let stamp, now > stamp {
                            r.ack.record(now - stamp)
                            if r.seconds[i].ack.histogram == nil { r.seconds[i].ack.histogram = LatencyHistogram() }
                            r.seconds[i].ack.histogram!.record(now - stamp)
                        }
                    }
                }
            }
            /// Waits up to `nanos` for replies (acked) or just time.
            func wait(_ nanos: UInt64) throws {
                let t0 = BusClock.monotonicNanoseconds()
                if config.acked && nanos >= 1_000_000 {
                    if try poller.poll(timeoutMilliseconds: Int(nanos / 1_000_000)) > 0 { try readReplies() }
                } else if nanos > 0 {
                    var ts = timespec(tv_sec: Int(nanos / 1_000_000_000), tv_nsec: Int(nanos % 1_000_000_000))
                    nanosleep(&ts, nil)
                }
                waitedNanos += BusClock.monotonicNanoseconds() - t0
            }

            while r.sent < limit && !stopSending.isRaised {
                var now = BusClock.monotonicNanoseconds()
                if now >= sendDeadline { break }
                if config.acked {
                    try readReplies()
                    if inFlight >= config.window {
                        try wait(1_000_000)
                        continue
                    }
                }
                let due = interval > 0 ? start + offset + UInt64(r.sent) * interval : now
                if now < due {
                    // Sleep at least a quantum, then send everything due: a few events per wake-up
                    // and per write of ZeroMQ's I/O thread instead of one (a third of the tool's CPU
                    // per event at 15,000/s), each still stamped when it is actually sent.
                    try wait(min(max(due - now, FloodRun.sendQuantumNanos), 1_000_000))
                    continue
                }
                if pending == nil {
                    guard var e = stream.next() else { break }
                    pendingShard = router?.route(e.bytes).shard ?? 0
                    now = BusClock.monotonicNanoseconds()
                    LoadDriver.stamp(&e, now)
                    pending = e
                } else {
                    // Stamped again: the time spent held back is the bus's, counted apart.
                    LoadDriver.stamp(&pending!, now)
                }
                let sent = try pending!.bytes.withUnsafeBytes { try sockets[pendingShard].send($0, dontWait: true) }
                if !sent {
                    // The queue is full (or not connected): the bus is not taking more.
                    let t0 = BusClock.monotonicNanoseconds()
                    if config.acked { _ = try poller.poll(timeoutMilliseconds: 1); try readReplies() } else { usleep(100) }
                    let held = BusClock.monotonicNanoseconds() - t0
                    waitedNanos += held
                    r.heldBackNanos += held
                    r.seconds[at(second(t0))].heldBackNanos += held
                    continue
                }
                let event = pending!
                pending = nil
                let i = at(second(now))
                if interval > 0 {
                    let lag = now - due
                    r.sendLag.record(lag)
                    r.seconds[i].maxSendLagNanos = max(r.seconds[i].maxSendLagNanos, lag)
                }
                r.sent += 1
                r.seconds[i].sent += 1
                if config.acked { inFlight += 1 }
                if let k = event.expected {
                    r.expectedPublished[Int(k.rawValue)] += 1
                    r.seconds[i].expectedPublished += 1
                    expectedPublished += 1
                } else {
                    r.expectedSuppressed += 1
                    r.seconds[i].expectedSuppressed += 1
                }
                sentCounter.value.store(r.sent, ordering: .relaxed)
            }
            let sendEnd = BusClock.monotonicNanoseconds()
            r.activeNanos = sendEnd - start
            r.busyNanos = r.activeNanos - min(waitedNanos, r.activeNanos)
            expectedCounter.value.store(expectedPublished, ordering: .relaxed)
            inFlightCounters[p].value.store(inFlight, ordering: .relaxed)
            producersDone.add(1, ordering: .releasing)
            signalledDone = true
            // Acknowledged: wait for the answers to what is in flight, as long as the run lasts.
            if config.acked {
                while inFlight > 0 && !finish.isRaised {
                    if try poller.poll(timeoutMilliseconds: 20) > 0 { try readReplies() }
                    inFlightCounters[p].value.store(inFlight, ordering: .relaxed)
                }
                r.unanswered = inFlight
            }
            // The sockets stay open until the run ends: closing one (linger 0) would drop what is
            // still queued in it. (Explicitly: an optimised build may end a local's life at its last use.)
            withExtendedLifetime(sockets) {
                while !finish.isRaised { usleep(2000) }
            }
        } catch {
            r.error = "producer \(p): \(error)"
            inFlightCounters[p].value.store(0, ordering: .relaxed)
            if !signalledDone { producersDone.add(1, ordering: .releasing) }
        }
        return r
    }

    /// The shortest sleep of a paced producer: 250 µs cut flood's CPU per event at 15,000/s from
    /// 37 to 23 µs (docs/performance.md).
    static let sendQuantumNanos: UInt64 = 250_000

    /// Longer than this without even a heartbeat (sent every second) is an outage of the bus.
    static let outageNanos: UInt64 = 1_500_000_000

    /// The time of day (UTC, milliseconds) of an envelope's `"received_at":"YYYY-MM-DDTHH:MM:SS.mmmZ"`.
    static func receivedAtMillisOfDay(_ bytes: UnsafeRawBufferPointer) -> Int64? {
        let key = #""received_at":""#.utf8
        let limit = min(bytes.count, 700) - key.count - 24
        guard limit > 0 else { return nil }
        var i = 0
        search: while i < limit {
            var k = 0
            for b in key {
                if bytes[i + k] != b {
                    i += 1
                    continue search
                }
                k += 1
            }
            let t = i + key.count + 11  // HH
            func num(_ at: Int, _ n: Int) -> Int64? {
                var v: Int64 = 0
                for j in at..<(at + n) {
                    let d = bytes[j] &- UInt8(ascii: "0")
                    guard d < 10 else { return nil }
                    v = v * 10 + Int64(d)
                }
                return v
            }
            guard let h = num(t, 2), let m = num(t + 3, 2), let sec = num(t + 6, 2), let ms = num(t + 9, 3) else { return nil }
            return ((h * 60 + m) * 60 + sec) * 1000 + ms
        }
        return nil
    }

    /// The `seq` of an envelope (`{"v":1,"seq":N,…`), or nil.
    static func envelopeSeq(_ bytes: UnsafeRawBufferPointer) -> UInt64? {
        let head = #"{"v":1,"seq":"#.utf8
        guard bytes.count > head.count + 1, bytes.starts(with: head) else { return nil }
        var v: UInt64 = 0
        var i = head.count
        while i < bytes.count, bytes[i] &- UInt8(ascii: "0") < 10 {
            v = v * 10 + UInt64(bytes[i] &- UInt8(ascii: "0"))
            i += 1
        }
        return i > head.count ? v : nil
    }

    /// `{"ok":true` at the start of an acknowledgement.
    static func replyIsOK(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.count >= 10 && bytes.starts(with: #"{"ok":true"#.utf8)
    }

    // MARK: Subscribers

    /// Whether an envelope (or a dead letter, whose raw text it quotes) belongs to this run: its
    /// ids are `<run>-<n>` (checkouts) and `<run>:<n>:…` (events), each after a quote.
    static func belongs(_ bytes: UnsafeRawBufferPointer, marks: [[UInt8]]) -> Bool {
        guard let first = marks.first?.first else { return true }
        var i = 0
        let end = bytes.count
        while i < end {
            if bytes[i] == first {
                for mark in marks where i + mark.count <= end {
                    var j = 1
                    while j < mark.count && bytes[i + j] == mark[j] { j += 1 }
                    if j == mark.count { return true }
                }
            }
            i += 1
        }
        return false
    }

    private func subscribe(index: Int) -> SubscriberResult {
        let config = configuration
        var r = SubscriberResult()
        // This run's ids, as they stand in its envelopes and in the raw text its dead letters quote.
        let runID = config.generator.runID
        let runMarks = [Array("\"\(runID)-".utf8), Array("\"\(runID):".utf8)]
        let counter = receivedCounters[index]
        do {
            let context = try ZMQContext()
            let subs = try config.publish.map { endpoint in
                let sub = try ZMQSocket(context: context, type: .sub)
                try sub.setOption(.receiveHighWaterMark, 1_000_000)
                try sub.setLinger(milliseconds: 0)
                try config.curve?.apply(to: sub)
                try sub.connect(endpoint)
                try sub.subscribe("checkout.")
                try sub.subscribe("bus.deadletter")
                try sub.subscribe("bus.heartbeat")
                return sub
            }
            let poller = ZMQPoller()
            for sub in subs { poller.addReadable(sub) }
            let message = ZMQMessage()
            var lastSeq = [UInt64](repeating: 0, count: subs.count)
            // The last time anything (a heartbeat included) came from each endpoint: a gap in seq
            // after a silence is an outage of the bus, not a subscriber that fell behind.
            var lastHeard = [UInt64](repeating: BusClock.monotonicNanoseconds(), count: subs.count)
            var afterOutage = [Bool](repeating: false, count: subs.count)
            let wallMinusMonotonicMillis = BusClock.wallMilliseconds() - Int64(BusClock.monotonicNanoseconds() / 1_000_000)
            // A heartbeat answers the subscription: that endpoint's subscriptions are live.
            var live = Set<Int>()
            while live.count < subs.count && !finish.isRaised {
                guard try poller.poll(timeoutMilliseconds: 100) > 0 else { continue }
                for (i, sub) in subs.enumerated() where poller.isReadable(i) {
                    while try sub.receive(into: message, dontWait: true) {
                        let heartbeat = message.withUnsafeBytes { $0.starts(with: "bus.heartbeat".utf8) }
                        while message.hasMore { _ = try sub.receive(into: message) }
                        if heartbeat { live.insert(i) }
                    }
                }
            }
            subscribersReady.add(1, ordering: .releasing)
            var start: UInt64 = 0
            var activeFrom: UInt64 = 0
            var waited: UInt64 = 0
            var secondWaited: UInt64 = 0
            var currentSecond = -1
            var total = 0
            while !finish.isRaised {
                let t0 = BusClock.monotonicNanoseconds()
                _ = try poller.poll(timeoutMilliseconds: 20)
                if start == 0 {
                    start = startNanos.load(ordering: .acquiring)
                    if start == 0 { continue }
                }
                // Read after `start`: every time below is at or after it.
                let t1 = BusClock.monotonicNanoseconds()
                let s = Int((t1 - start) / 1_000_000_000)
                if s != currentSecond {
                    // Close the previous second's busy share (each wait counts in the second it ended).
                    if currentSecond >= 0 && currentSecond < r.seconds.count {
                        r.seconds[currentSecond].subscriberBusy = max(0, 1 - Double(secondWaited) / 1e9)
                    }
                    secondWaited = 0
                    currentSecond = s
                    if r.seconds.count <= s { r.seconds.append(contentsOf: repeatElement(Second(), count: s + 1 - r.seconds.count)) }
                }
                if activeFrom == 0 {
                    activeFrom = t1
                } else {
                    waited += t1 - t0
                    secondWaited += t1 - t0
                }
                for (si, sub) in subs.enumerated() {
                    while try sub.receive(into: message, dontWait: true) {
                        let now = BusClock.monotonicNanoseconds()
                        let kind: Int? = message.withUnsafeBytes { LoadDriver.kindIndex(topic: $0) }
                        let isDeadLetter = message.withUnsafeBytes { $0.starts(with: "bus.deadletter".utf8) }
                        let isHeartbeat = message.withUnsafeBytes { $0.starts(with: "bus.heartbeat".utf8) }
                        guard message.hasMore else { continue }
                        _ = try sub.receive(into: message)
                        while message.hasMore { _ = try sub.receive(into: message) }
                        let silence = now - min(now, lastHeard[si])
                        lastHeard[si] = now
                        if silence > FloodRun.outageNanos {
                            r.outages += 1
                            afterOutage[si] = true
                        }
                        if isHeartbeat { continue }
                        let own = message.withUnsafeBytes { FloodRun.belongs($0, marks: runMarks) }
                        if let seq = message.withUnsafeBytes({ FloodRun.envelopeSeq($0) }) {
                            defer { afterOutage[si] = false }
                            if lastSeq[si] > 0 && seq > lastSeq[si] + 1 {
                                // The first gap after an outage: published while this subscriber
                                // was cut off (before its subscription reached the restarted daemon).
                                if afterOutage[si] {
                                    r.lostInOutages += seq - lastSeq[si] - 1
                                } else {
                                    r.missed += seq - lastSeq[si] - 1
                                }
                            }
                            lastSeq[si] = max(lastSeq[si], seq)
                        }
                        guard own else {
                            r.foreign += 1
                            continue
                        }
                        let sec = Int((now - start) / 1_000_000_000)
                        if r.seconds.count <= sec { r.seconds.append(contentsOf: repeatElement(Second(), count: sec + 1 - r.seconds.count)) }
                        if isDeadLetter {
                            r.deadLetters += 1
                            if index == 0 { r.seconds[sec].deadLetters += 1 }
                        } else if let kind {
                            r.receivedByKind[kind] += 1
                            if index == 0 { r.seconds[sec].published += 1 }
                        } else {
                            r.receivedOther += 1
                        }
                        if let sent = message.withUnsafeBytes({ LoadDriver.sendStamp(in: $0) }), now > sent {
                            if let arrival = message.withUnsafeBytes({ FloodRun.receivedAtMillisOfDay($0) }) {
                                // Both ends on the wall clock, in milliseconds of the UTC day.
                                let day: Int64 = 86_400_000
                                let sentWall = (Int64(sent / 1_000_000) + wallMinusMonotonicMillis) % day
                                let readWall = (Int64(now / 1_000_000) + wallMinusMonotonicMillis) % day
                                // Forwards across midnight; a millisecond backwards (truncation) is 0.
                                func span(_ from: Int64, _ to: Int64) -> UInt64 {
                                    let d = (to - from + day) % day
                                    return d > day - 60_000 ? 0 : UInt64(d) * 1_000_000
                                }
                                r.toDaemon.record(span(sentWall, arrival))
                                r.daemonToRead.record(span(arrival, readWall))
                            }
                            r.latency.record(now - sent)
                            if r.seconds[sec].latency.histogram == nil { r.seconds[sec].latency.histogram = LatencyHistogram() }
                            r.seconds[sec].latency.histogram!.record(now - sent)
                        }
                        total += 1
                    }
                }
                counter.value.store(total, ordering: .relaxed)
            }
            if currentSecond >= 0 && currentSecond < r.seconds.count {
                // The last, partial second: its share of the time it lasted (none under 0.1 s).
                let elapsed = Double((BusClock.monotonicNanoseconds() - start) % 1_000_000_000) / 1e9
                r.seconds[currentSecond].subscriberBusy = elapsed >= 0.1 ? max(0, 1 - Double(secondWaited) / 1e9 / elapsed) : 0
            }
            if activeFrom > 0 {
                r.activeNanos = BusClock.monotonicNanoseconds() - activeFrom
                r.busyNanos = r.activeNanos - min(waited, r.activeNanos)
            }
        } catch {
            r.error = "subscriber \(index): \(error)"
            subscribersReady.add(1, ordering: .releasing)
        }
        return r
    }
}
