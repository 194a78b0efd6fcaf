#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusCore
import ZeroMQ

/// The daemon's pipeline: ingest → decode → rules → envelope → publish, on one thread.
///
/// Not `Sendable`: ``run(stop:ready:)`` creates every socket on the calling thread and uses them
/// there until it returns. One thread keeps per-checkout order and the rules' state simple and
/// lock-free; libzmq's I/O thread does the network work beside it.
public final class BusDaemon {
    /// The endpoints as actually bound (ports resolved), printed as the ready line.
    public struct BoundEndpoints: Sendable {
        public var ingest: String
        public var publish: String
        public var dataDirectory: String

        /// The ready line: one JSON object on one line.
        public var readyLine: String {
            var w = JSONWriter(capacity: 256)
            w.append("{\"ready\":true,\"ingest\":")
            w.appendString(ingest)
            w.append(",\"publish\":")
            w.appendString(publish)
            w.append(",\"data_dir\":")
            w.appendString(dataDirectory)
            w.append(",\"pid\":")
            w.append(int: Int(getpid()))
            w.append("}")
            return String(decoding: w.bytes, as: UTF8.self)
        }
    }

    public let configuration: DaemonConfiguration
    public let logger: Logger
    private let processor: EventProcessor
    /// Ingest messages read per poll wake-up before the loop looks at subscriptions and timers.
    private let batchSize = 512

    public init(configuration: DaemonConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        self.processor = EventProcessor(options: configuration.processor)
    }

    /// Binds, reports the bound endpoints through `ready`, and runs until `stop` is raised; then
    /// stops accepting, publishes everything already received, and returns.
    /// - Throws: ``ZMQError`` when an endpoint cannot be bound, or a ``DaemonError``.
    public func run(stop: StopSignal, ready: (BoundEndpoints) -> Void) throws {
        try makeDirectory(configuration.dataDirectory)
        let context = try ZMQContext(ioThreads: 1)
        defer { context.shutdown() }
        let ingest = try ZMQSocket(context: context, type: .pull)
        let publish = try ZMQSocket(context: context, type: .xpub)
        try ingest.setOption(.receiveHighWaterMark, 100_000)
        try ingest.setLinger(milliseconds: 0)
        try publish.setOption(.sendHighWaterMark, configuration.publishHighWaterMark)
        try publish.setOption(.xpubVerbose, 1)
        try publish.setLinger(milliseconds: 2000)
        try ingest.bind(configuration.ingest)
        try publish.bind(configuration.publish)
        let bound = BoundEndpoints(ingest: try ingest.lastEndpoint, publish: try publish.lastEndpoint,
                                   dataDirectory: configuration.dataDirectory)
        ready(bound)
        logger.info("started", ["ingest": bound.ingest, "publish": bound.publish, "zmq": ZMQContext.version])

        let poller = ZMQPoller()
        let ingestIndex = poller.addReadable(ingest)
        let publishIndex = poller.addReadable(publish)
        let message = ZMQMessage()
        let heartbeatNanos = UInt64(configuration.heartbeatMilliseconds) * 1_000_000
        var nextHeartbeat = BusClock.monotonicNanoseconds() + heartbeatNanos

        while !stop.isRaised {
            let now = BusClock.monotonicNanoseconds()
            if now >= nextHeartbeat {
                try sendHeartbeat(publish)
                processor.tick(now: BusClock.monotonicSeconds())
                nextHeartbeat = now + heartbeatNanos
            }
            let wait = min(Int((nextHeartbeat - min(now, nextHeartbeat)) / 1_000_000) + 1, 200)
            guard try poller.poll(timeoutMilliseconds: wait) > 0 else { continue }
            if poller.isReadable(publishIndex) { try readSubscriptions(publish) }
            if poller.isReadable(ingestIndex) { try drainIngest(ingest, publish, message, limit: batchSize) }
        }

        // Drain: stop accepting new connections' data, publish what is already queued, then flush.
        logger.info("stopping: draining ingest")
        try? ingest.unbind(bound.ingest)
        try drainIngest(ingest, publish, message, limit: Int.max)
        try sendHeartbeat(publish)
        let c = processor.counters
        logger.info("stopped", [
            "received": String(c.received), "published": String(c.publishedByKind.reduce(0, +)),
            "suppressed": String(c.suppressed), "deadlettered": String(c.deadLetteredTotal),
            "last_seq": String(processor.lastSeq),
        ])
    }

    /// Reads and processes queued ingest messages, at most `limit`, without blocking.
    private func drainIngest(_ ingest: ZMQSocket, _ publish: ZMQSocket, _ message: ZMQMessage, limit: Int) throws {
        var n = 0
        while n < limit, try ingest.receive(into: message, dontWait: true) {
            n += 1
            let receivedAt = BusClock.wallClock()
            let now = BusClock.monotonicSeconds()
            let outcome: EventProcessor.Outcome
            if message.hasMore {
                let first = message.bytes
                var frames = 1
                while message.hasMore {
                    _ = try ingest.receive(into: message)
                    frames += 1
                }
                outcome = first.withUnsafeBytes {
                    processor.reject(.multipart, "message of \(frames) frames; send one event per single-frame message",
                                     $0, receivedAt: receivedAt)
                }
            } else {
                outcome = message.withUnsafeBytes { processor.process($0, receivedAt: receivedAt, now: now) }
            }
            switch outcome {
            case .published, .deadLettered: try send(publish)
            case .suppressed: break
            }
        }
    }

    /// Publishes the processor's current topic and envelope as one two-frame message.
    private func send(_ publish: ZMQSocket) throws {
        try processor.topic.bytes.withUnsafeBytes { _ = try publish.send($0, more: true) }
        try processor.envelope.bytes.withUnsafeBytes { _ = try publish.send($0) }
    }

    private func sendHeartbeat(_ publish: ZMQSocket) throws {
        processor.writeHeartbeat(at: BusClock.wallClock())
        try send(publish)
    }

    /// Reads subscription changes. Every new subscription is answered with a heartbeat, so a
    /// subscriber that also subscribes to `bus.heartbeat` knows the moment its filters are live.
    private func readSubscriptions(_ publish: ZMQSocket) throws {
        var subscribed = false
        while let frames = try publish.receiveMultipart(dontWait: true) {
            guard let first = frames.first, let flag = first.first else { continue }
            if flag == 1 {
                subscribed = true
                logger.debug("subscribe", ["topic": String(decoding: first.dropFirst(), as: UTF8.self)])
            }
        }
        if subscribed { try sendHeartbeat(publish) }
    }

    private func makeDirectory(_ path: String) throws {
        var current = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            current += "/" + part
            if mkdir(current, 0o750) != 0 && errno != EEXIST {
                throw DaemonError("cannot create data directory \(path): \(String(cString: strerror(errno)))")
            }
        }
    }
}

/// A daemon failure that is not a libzmq error. `Sendable`.
public struct DaemonError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
