#if canImport(Glibc)
import Glibc
#endif
import NATS
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// Publishes every envelope of the bus into a JetStream stream, each exactly once.
///
/// For each envelope the bridge publishes one message to the subject named by the envelope's
/// topic (`checkout.complete`, `checkout.fail.network_error`, `bus.deadletter`, …) with the header
/// `Nats-Msg-Id: <shard>:<seq>`. Publishing is asynchronous, at most ``BridgeOptions/window``
/// messages awaiting their acknowledgement; when the window is full, after each burst of
/// envelopes, and when stopping, the bridge waits for every acknowledgement, publishes again what
/// was not acknowledged (under the same id), and only then commits each shard's cursor. So a
/// cursor never passes an envelope the stream has not stored.
///
/// **Exactly once.** After a crash the bridge resumes after the cursor and may publish again what
/// it published but had not committed. Two things keep those out of the stream: the stream drops a
/// message whose `Nats-Msg-Id` it has seen within its duplicate window, and, before subscribing,
/// the bridge reads the ids at the stream's tail back to each shard's cursor and skips what it
/// finds there — which holds however long the bridge was down (docs/jetstream.md).
///
/// Not `Sendable`: ``run(stop:onReady:)`` owns the NATS connection and the subscriber on the
/// calling thread until it returns.
public final class JetStreamBridge {
    /// What the bridge has done since it started. `Sendable`.
    public struct Statistics: Sendable, Equatable {
        /// Envelopes handed over by the subscriber.
        public var handled = 0
        /// Messages published (first attempts).
        public var published = 0
        /// Envelopes found already stored at start and not published again.
        public var alreadyStored = 0
        /// Messages published again after a failed or unanswered publish.
        public var republished = 0
        /// Cursor commits.
        public var commits = 0
    }

    public let options: BridgeOptions
    public private(set) var statistics = Statistics()
    private let logger: BusLogger

    // Set up in run.
    private var jetStream: JetStream?
    private var cursors: [AcknowledgedCursor] = []
    /// Messages published and not yet known to be stored, by `Nats-Msg-Id`.
    private var unacknowledged: [String: (subject: String, payload: [UInt8])] = [:]
    /// When the last flush began (monotonic nanoseconds).
    private var lastFlush: UInt64 = 0
    /// Ids found in the stream at start beyond the cursors.
    private var storedBeyondCursor: Set<String> = []

    public init(options: BridgeOptions, logger: BusLogger) {
        self.options = options
        self.logger = logger
    }

    /// Connects to NATS, makes sure of the stream, and bridges until `stop` is raised.
    /// - Parameter onReady: called once, when the stream is checked and the subscriptions are live.
    /// - Throws: ``BridgeError`` for an incompatible stream or an unreadable cursor; the subscriber's
    ///   errors.
    public func run(stop: StopSignal, onReady: @escaping ([String: String]) -> Void) throws {
        guard let connection = try connect(stop: stop) else { return }
        var jsOptions = JetStream.Options()
        jsOptions.maxPending = Int64(options.window)
        jsOptions.stallWaitMilliseconds = options.ackWaitMilliseconds
        let js = try JetStream(connection: connection, options: jsOptions)
        jetStream = js
        guard let info = try ensureStream(js, stop: stop) else { return }

        let shardIDs = options.bridgedShards
        let shardCount = options.busShardCount
        cursors = try FileCursor.paths(options.cursorPath, shardIDs: shardIDs, of: shardCount).map { path in
            AcknowledgedCursor(try FileCursor(path: path))
        }
        // Several daemons, or --shard-ids: endpoint p is shard shardIDs[p] (the subscriber checks
        // it), and only those shards' ids in the stream are this bridge's. One daemon without
        // --shard-ids: whichever shard it is, read from its envelopes, owns the one cursor.
        var positions: [Int?: Int64] = [:]
        if options.shardIDs == nil && shardCount == 1 {
            positions[nil] = cursors[0].committed
        } else {
            for (shard, cursor) in zip(shardIDs, cursors) { positions[shard] = cursor.committed }
        }
        while true {
            do {
                try reconcile(js, shards: positions)
                break
            } catch let error as NATSError {
                logger.warning("cannot read the stream's tail; retrying", ["error": "\(error)"])
                sleepUnlessStopped(stop, milliseconds: 1000)
                if stop.isRaised { return }
            }
        }

        let shardOptions = zip(options.publish, options.control).map { publish, control in
            var o = BusSubscriber.Options(publish: publish, control: control)
            o.prefixes = ["checkout.", "bus.deadletter"]
            // Every journaled topic: `seq` is contiguous on the wire, so the journal is read only for real gaps.
            o.liveSubscription = .everything
            o.name = options.name
            o.receiveHighWaterMark = options.receiveHighWaterMark
            o.curve = options.curve
            return o
        }
        let subscriber = options.shardIDs == nil
            ? ShardedSubscriber(shards: shardOptions, cursors: cursors)
            : ShardedSubscriber(shards: shardOptions, cursors: cursors, shardIDs: shardIDs, of: shardCount)
        subscriber.logger = logger
        var announced = false
        subscriber.onSubscribed = { [self] in
            guard !announced else { return }
            announced = true
            onReady(["stream": options.stream, "nats": connection.connectedURL ?? "", "stream_last_seq": String(info.lastSequence),
                     "cursor": cursors.map { String($0.committed) }.joined(separator: ","), "shards": String(shardCount),
                     "shard_ids": shardIDs.map(String.init).joined(separator: ","), "subject_prefix": options.subjectPrefix])
        }
        var lastReport = BusClock.monotonicNanoseconds()
        var handledAtBatchEnd = 0
        var failure: (any Error)?
        subscriber.onBatchEnd = { [self] in
            // While envelopes keep coming, the window fills and flushes itself (publish); a flush
            // here drains the pipeline, so it waits for a quiet round or 100 ms, whichever first:
            // the cursor lags the stream by at most that, plus the window.
            let now = BusClock.monotonicNanoseconds()
            let quiet = statistics.handled == handledAtBatchEnd
            handledAtBatchEnd = statistics.handled
            if quiet || now - lastFlush >= 100_000_000 {
                do { try flush(stop: stop) } catch {
                    failure = error
                    stop.raise()
                }
            }
            if now - lastReport >= 10_000_000_000 {
                lastReport = now
                logProgress(js)
            }
        }
        do {
            try subscriber.run(stop: stop) { envelope in
                try publish(envelope, shard: envelope.shard, stop: stop)
            }
        } catch {
            failure = failure ?? error
        }
        // Stopping: what was published gets its acknowledgement and its commit, if it comes.
        do { try flush(stop: nil) } catch { failure = failure ?? error }
        logProgress(js)
        if let failure { throw failure }
    }

    // MARK: Publishing

    private func publish(_ envelope: BusEnvelope, shard: Int, stop: StopSignal) throws {
        statistics.handled += 1
        let id = "\(shard):\(envelope.seq)"
        if !storedBeyondCursor.isEmpty, storedBeyondCursor.remove(id) != nil {
            statistics.alreadyStored += 1
            return
        }
        if unacknowledged.count >= options.window { try flush(stop: stop) }
        let subject = options.prefixed(BridgeSubject.subject(forTopic: envelope.topic))
        unacknowledged[id] = (subject, envelope.bytes)
        statistics.published += 1
        do {
            try jetStream!.publishAsync(subject: subject, payload: envelope.bytes, headers: [("Nats-Msg-Id", id)],
                                        ackWaitMilliseconds: options.ackWaitMilliseconds)
        } catch {
            // Not even sent (no room within the stall wait, or the connection is closed): no answer
            // will come for it, so the flush below publishes it again, synchronously.
            logger.warning("publish not sent; retrying after the acknowledgements", ["id": id, "error": "\(error)"])
            try flush(stop: stop)
        }
    }

    /// Waits for every acknowledgement, publishes again what was not acknowledged, and commits the
    /// cursors.
    ///
    /// Only a positive answer takes an id out of ``unacknowledged``: an acknowledgement the
    /// stream sent for it (recorded by id in the tracker), or a synchronous publish that returned.
    /// Everything else — reported failures, unanswered messages, a failure reported too late to be
    /// listed, messages never sent — is published again under its id; and the cursors are
    /// committed only when nothing is left, so a cursor never passes an envelope the stream has
    /// not acknowledged, whatever happened before (a stop raised during an outage included).
    /// - Parameter stop: retries give up when it is raised (nil: one attempt each, when stopping).
    private func flush(stop: StopSignal?) throws {
        lastFlush = BusClock.monotonicNanoseconds()
        guard let js = jetStream, !unacknowledged.isEmpty || cursors.contains(where: \.needsCommit) else { return }
        if !unacknowledged.isEmpty {
            let failures = js.waitForAcknowledgements(timeoutMilliseconds: options.ackWaitMilliseconds + 1000)
            for id in js.tracker.takeAcknowledgedIDs() { unacknowledged.removeValue(forKey: id) }
            let again = unacknowledged.keys.sorted(by: BridgeSubject.idOrder)
            if !again.isEmpty {
                logger.warning("publishing again what the stream did not acknowledge",
                               ["count": String(again.count), "first_reason": failures.first?.reason ?? "not acknowledged"])
            }
            for id in again {
                guard let message = unacknowledged[id] else { continue }
                try publishSynchronously(js, id: id, message: message, stop: stop)
                unacknowledged.removeValue(forKey: id)
            }
        }
        guard unacknowledged.isEmpty else { return }
        for cursor in cursors where cursor.needsCommit {
            try cursor.commitHandled()
            statistics.commits += 1
        }
    }

    private func publishSynchronously(_ js: JetStream, id: String, message: (subject: String, payload: [UInt8]),
                                      stop: StopSignal?) throws {
        var delayMilliseconds: UInt32 = 100
        var attempt = 0
        while true {
            attempt += 1
            do {
                let ack = try js.publish(subject: message.subject, payload: message.payload, headers: [("Nats-Msg-Id", id)],
                                         timeoutMilliseconds: options.ackWaitMilliseconds)
                statistics.republished += 1
                logger.debug("published again", ["id": id, "attempt": String(attempt), "duplicate": String(ack.duplicate)])
                return
            } catch {
                logger.warning("publish failed; retrying", ["id": id, "attempt": String(attempt), "error": "\(error)"])
                if stop == nil || stop!.isRaised {
                    throw BridgeError("stopped with \(id) not acknowledged by the stream; the cursor stays before it")
                }
                usleep(delayMilliseconds * 1000)
                delayMilliseconds = min(delayMilliseconds * 2, 2000)
            }
        }
    }

    private func logProgress(_ js: JetStream) {
        logger.info("progress", [
            "handled": String(statistics.handled), "published": String(statistics.published),
            "acknowledged": String(js.tracker.acknowledged), "duplicates": String(js.tracker.duplicates),
            "already_stored": String(statistics.alreadyStored), "republished": String(statistics.republished),
            "cursor": cursors.map { String($0.committed) }.joined(separator: ","),
        ])
    }

    // MARK: Start

    private func connect(stop: StopSignal) throws -> NATSConnection? {
        var options = NATSConnection.Options(servers: self.options.servers, name: self.options.name)
        options.reconnectBufferBytes = 64 << 20
        let logger = self.logger
        while !stop.isRaised {
            do {
                let connection = try NATSConnection(options: options) { event in
                    switch event {
                    case .disconnected: logger.warning("nats disconnected; reconnecting")
                    case .reconnected(let url): logger.info("nats reconnected", ["url": url])
                    case .closed: logger.info("nats connection closed")
                    }
                }
                logger.info("nats connected", ["url": connection.connectedURL ?? "-"])
                return connection
            } catch {
                logger.warning("cannot connect to nats; retrying", ["servers": self.options.servers.joined(separator: ","),
                                                                   "error": "\(error)"])
                sleepUnlessStopped(stop, milliseconds: 1000)
            }
        }
        return nil
    }

    /// The stream's info after creating it if missing; nil when stopped while JetStream is unavailable.
    private func ensureStream(_ js: JetStream, stop: StopSignal) throws -> StreamInfo? {
        while !stop.isRaised {
            do {
                if let info = try js.streamInfo(options.stream) {
                    try StreamCompatibility.check(info.configuration, against: options, logger: logger)
                    logger.info("stream found", ["stream": options.stream, "messages": String(info.messages),
                                                 "replicas": String(info.configuration.replicas)])
                    return info
                }
                guard options.createStream else { throw BridgeError("no stream \(options.stream), and --no-create was given") }
                let info = try js.addStream(options.streamConfiguration)
                logger.info("stream created", ["stream": options.stream, "subjects": options.subjects.joined(separator: ","),
                                               "replicas": String(options.replicas)])
                return info
            } catch let error as NATSError {
                // A stream that cannot be created as configured stays so: no retry will help.
                if JetStreamBridge.permanentStreamErrors.contains(error.jetStreamCode) {
                    throw BridgeError("cannot create stream \(options.stream): \(error.message) (jetstream error \(error.jetStreamCode)); "
                                      + "another stream takes these subjects: use --subject-prefix, or bridge into that stream")
                }
                // JetStream answers "unavailable" while a cluster elects its meta leader.
                logger.warning("jetstream not ready; retrying", ["error": "\(error)"])
                sleepUnlessStopped(stop, milliseconds: 500)
            }
        }
        return nil
    }

    /// JetStream errors that creating the stream will meet again however often it is retried:
    /// subjects that overlap another stream's (10065), a stream name already in use with another
    /// configuration (10058).
    static let permanentStreamErrors: Set<Int> = [10065, 10058]

    /// Finds the ids already stored beyond each cursor, reading the stream's tail backwards in
    /// growing steps until each cursor's own message is in view.
    ///
    /// `shards` maps a shard (nil: whichever shard the single daemon is) to its committed `seq`.
    /// Messages of other shards — another bridge's, writing into the same stream — are passed over:
    /// ids `<shard>:<seq>` of different shards never collide.
    private func reconcile(_ js: JetStream, shards: [Int?: Int64]) throws {
        var othersWarned = false
        var depth = UInt64(max(2 * options.window, 1024))
        let limit: UInt64 = 4_000_000
        while true {
            guard let info = try js.streamInfo(options.stream), info.messages > 0 else { return }
            let from = info.lastSequence > depth ? max(info.firstSequence, info.lastSequence - depth + 1) : info.firstSequence
            let reader = try StreamReader(jetStream: js, stream: options.stream, from: from, headersOnly: true)
            var found: Set<Int?> = []
            var beyond: Set<String> = []
            var read = 0
            var seen: Set<Int> = []
            while let message = try reader.next() {
                read += 1
                guard let id = message.messageID, let (shard, seq) = BridgeSubject.parseID(id) else { continue }
                let key: Int? = shards.keys.contains(shard) ? shard : shards.keys.contains(nil) ? nil : -1
                guard key != -1, let cursor = shards[key] else { continue }
                if key == nil { seen.insert(shard) }
                if seq == cursor { found.insert(key) }
                if seq > cursor { beyond.insert(id) }
            }
            if seen.count > 1 && !othersWarned {
                othersWarned = true
                logger.warning("the stream holds several shards' messages, and this bridge of one endpoint takes them all "
                    + "for its own; bridges sharing a stream need --shard-ids and --shard-count",
                               ["stream": options.stream, "shards_seen": seen.sorted().map(String.init).joined(separator: ",")])
            }
            let complete = found.count == shards.count || from <= info.firstSequence
            if complete || depth >= limit {
                storedBeyondCursor = beyond
                if !complete {
                    logger.warning("the cursor's message is not in the stream's last \(depth) messages; "
                        + "republished envelopes rely on the duplicate window", ["stream": options.stream])
                }
                logger.info("stream tail read", ["from": String(from), "messages": String(read),
                                                  "already_stored": String(beyond.count)])
                return
            }
            depth *= 4
        }
    }

    private func sleepUnlessStopped(_ stop: StopSignal, milliseconds: Int) {
        var left = milliseconds
        while left > 0 && !stop.isRaised {
            usleep(50_000)
            left -= 50
        }
    }
}

/// A bridge failure that is not a NATS or ZeroMQ error. `Sendable`.
public struct BridgeError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A shard's cursor that moves only when JetStream has acknowledged: the subscriber's commits
/// record what was handed over, ``commitHandled()`` writes it once acknowledged.
///
/// Not `Sendable`: the bridge's thread only.
final class AcknowledgedCursor: SubscriberCursor {
    private let file: FileCursor
    private(set) var committed: Int64
    private var handled: Int64

    init(_ file: FileCursor) {
        self.file = file
        committed = file.load()
        handled = committed
    }

    var needsCommit: Bool { handled > committed }

    func load() -> Int64 { committed }

    /// The subscriber's commit: handed over (published), not yet acknowledged.
    func commit(_ seq: Int64) { handled = seq }

    /// Writes the handed-over position; call only once everything up to it is acknowledged.
    func commitHandled() throws {
        try file.commit(handled)
        committed = handled
    }
}
