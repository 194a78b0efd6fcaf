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
/// **Async.** The bridge reads the bus through the async ``Subscriber``: a loop over its envelopes
/// publishes, and a ticker task flushes when the bus goes quiet (or every 100 ms); each shard's
/// newest acknowledged envelope is then committed to the subscriber, whose ``FileCursor``s are the
/// bridge's cursors — the JetStream acknowledgement first, the commit after.
///
/// `Sendable` (an actor): the NATS connection, the unacknowledged messages and the commits are
/// touched on the actor only. Its NATS calls block (waiting for acknowledgements, retrying during an
/// outage), holding the actor's thread meanwhile; the subscriber polls on a thread of its own.
package actor JetStreamBridge {
    /// What the bridge has done since it started. `Sendable`.
    package struct Statistics: Sendable, Equatable {
        /// Envelopes handed over by the subscriber.
        package var handled = 0
        /// Messages published (first attempts).
        package var published = 0
        /// Envelopes found already stored at start and not published again.
        package var alreadyStored = 0
        /// Messages published again after a failed or unanswered publish.
        package var republished = 0
        /// Cursor commits.
        package var commits = 0
    }

    package let options: BridgeOptions
    package private(set) var statistics = Statistics()
    private let logger: BusLogger

    // Set up in run.
    private var jetStream: JetStream?
    /// Each position's cursor as last committed (loaded at start), in endpoint order.
    private var committedSeqs: [Int64] = []
    /// Each position's newest envelope handed over and not yet committed.
    private var handled: [ReceivedEnvelope?] = []
    /// Envelopes acknowledged up to, waiting to be committed, in order.
    private var acknowledged = RingBuffer<ReceivedEnvelope>()
    /// A commit is under way (``commitAcknowledged(_:)`` suspends): no second one meanwhile.
    private var committing = false
    /// The position of a shard's envelopes in the endpoint list.
    private var positionOfShard: [Int: Int] = [:]
    /// Messages published and not yet known to be stored, by `Nats-Msg-Id`.
    private var unacknowledged: [String: (subject: String, payload: [UInt8])] = [:]
    /// When the last flush began (monotonic nanoseconds).
    private var lastFlush: UInt64 = 0
    /// Ids found in the stream at start beyond the cursors.
    private var storedBeyondCursor: Set<String> = []

    package init(options: BridgeOptions, logger: BusLogger) {
        self.options = options
        self.logger = logger
    }

    /// Connects to NATS, makes sure of the stream, and bridges until the calling task is cancelled;
    /// then waits for what was published to be acknowledged (one attempt each) and commits it.
    /// - Parameter onReady: called once, on the subscriber's poll thread, when the stream is checked
    ///   and the subscriptions are live.
    /// - Throws: ``BridgeError`` for an incompatible stream or an unreadable cursor; the subscriber's
    ///   errors.
    package func run(onReady: @escaping @Sendable ([String: String]) -> Void) async throws {
        // The NATS calls block and retry: they watch this flag, raised when the task is cancelled.
        let stop = StopSignal()
        try await withTaskCancellationHandler {
            try await bridge(stop: stop, onReady: onReady)
        } onCancel: {
            stop.raise()
        }
    }

    private func bridge(stop: StopSignal, onReady: @escaping @Sendable ([String: String]) -> Void) async throws {
        if options.duplicateWindowNanoseconds <= options.ackWaitMilliseconds * 1_000_000 {
            logger.warning("--duplicate-window is not longer than --ack-wait: a publish sent again after its wait "
                + "is kept out of the stream by the bridge's reading of the stream's tail alone (docs/jetstream.md)", [
                "duplicate_window_ms": String(options.duplicateWindowNanoseconds / 1_000_000),
                "ack_wait_ms": String(options.ackWaitMilliseconds),
            ])
        }
        guard let connection = try connect(stop: stop) else { return }
        var jsOptions = JetStream.Options()
        jsOptions.maxPending = Int64(options.window)
        jsOptions.stallWaitMilliseconds = options.ackWaitMilliseconds
        let js = try JetStream(connection: connection, options: jsOptions)
        jetStream = js
        guard let info = try ensureStream(js, stop: stop) else { return }

        let shardIDs = options.bridgedShards
        let shardCount = options.busShardCount
        let files = try FileCursor.paths(options.cursorPath, shardIDs: shardIDs, of: shardCount).map { path in
            try FileCursor(path: path)
        }
        committedSeqs = files.map { $0.load() }
        handled = Array(repeating: nil, count: files.count)
        let oneDaemon = options.shardIDs == nil && shardCount == 1
        if !oneDaemon {
            for (position, shard) in shardIDs.enumerated() { positionOfShard[shard] = position }
        }
        // Several daemons, or --shard-ids: endpoint p is shard shardIDs[p] (the subscriber checks
        // it), and only those shards' ids in the stream are this bridge's. One daemon without
        // --shard-ids: whichever shard it is, read from its envelopes, owns the one cursor.
        try readStreamTail(js, stop: stop)
        if stop.isRaised { return }

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
        let ready = ["stream": options.stream, "nats": connection.connectedURL ?? "", "stream_last_seq": String(info.lastSequence),
                     "cursor": committedSeqs.map(String.init).joined(separator: ","), "shards": String(shardCount),
                     "shard_ids": shardIDs.map(String.init).joined(separator: ","), "subject_prefix": options.subjectPrefix]
        // The subscriber owns the cursor files from here; they move only by commitAcknowledged.
        let subscriber = options.shardIDs == nil
            ? Subscriber(shards: shardOptions, cursors: files, logger: logger, onSubscribed: { onReady(ready) })
            : Subscriber(shards: shardOptions, cursors: files, shardIDs: shardIDs, of: shardCount, logger: logger,
                         onSubscribed: { onReady(ready) })
        // The loop and the ticker: the first to end (cancelled, or a failed flush) ends the other.
        var failure = await withTaskGroup(of: (any Error)?.self) { group in
            group.addTask { await self.capture { try await self.forward(subscriber, stop: stop) } }
            group.addTask { await self.capture { try await self.flushWhenQuiet(subscriber, stop: stop) } }
            var failure = await group.next() ?? nil
            group.cancelAll()
            while let next = await group.next() { failure = failure ?? next }
            return failure
        }
        // Stopping: what was published gets its acknowledgement and its commit, if it comes.
        do {
            try flush(stop: nil)
            try await commitAcknowledged(subscriber)
        } catch {
            failure = failure ?? error
        }
        logProgress(js)
        if let failure { throw failure }
    }

    /// What `body` threw, nil when it returned.
    private func capture(_ body: () async throws -> Void) async -> (any Error)? {
        do {
            try await body()
            return nil
        } catch {
            return error
        }
    }

    /// Publishes each envelope the subscriber delivers until the task is cancelled or `stop` raised.
    private func forward(_ subscriber: Subscriber, stop: StopSignal) async throws {
        for try await envelope in subscriber.envelopes {
            if stop.isRaised { break }
            do {
                try publish(envelope.raw, shard: envelope.shard, stop: stop)
                handled[positionOfShard[envelope.shard] ?? 0] = envelope
                try await commitAcknowledged(subscriber)
            } catch {
                // Not a clean stop: the daemon shows it as a crash (docs/observability.md). Said
                // before the loop is left, whose end stops the subscriber's thread.
                subscriber.abandon()
                throw error
            }
        }
    }

    /// While envelopes keep coming, the window fills and flushes itself (``publish(_:shard:stop:)``);
    /// this flushes when a ticker round finds nothing new was handled, or 100 ms after the last
    /// flush, whichever first: the cursor lags the stream by at most that, plus the window. And a
    /// progress line every 10 s.
    private func flushWhenQuiet(_ subscriber: Subscriber, stop: StopSignal) async throws {
        var lastReport = BusClock.monotonicNanoseconds()
        var handledAtLastRound = statistics.handled
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(20))
            if Task.isCancelled { break }
            let now = BusClock.monotonicNanoseconds()
            let quiet = statistics.handled == handledAtLastRound
            handledAtLastRound = statistics.handled
            if quiet || now - lastFlush >= 100_000_000 {
                try flush(stop: stop)
                try await commitAcknowledged(subscriber)
            }
            if now - lastReport >= 10_000_000_000, let js = jetStream {
                lastReport = now
                logProgress(js)
            }
        }
    }

    /// Commits, in order, the envelopes ``flush(stop:)`` found acknowledged: each moves its shard's
    /// cursor file. One caller at a time (the other returns at once and its envelopes are committed
    /// by the first), so a cursor never moves back.
    private func commitAcknowledged(_ subscriber: Subscriber) async throws {
        guard !committing else { return }
        committing = true
        defer { committing = false }
        while let envelope = acknowledged.popFirst() {
            try await subscriber.commit(envelope)
            committedSeqs[positionOfShard[envelope.shard] ?? 0] = envelope.seq
            statistics.commits += 1
        }
    }

    // MARK: Publishing

    private func publish(_ envelope: BusEnvelope, shard: Int, stop: StopSignal) throws {
        statistics.handled += 1
        let id = "\(shard):\(envelope.seq)"
        if takeAlreadyStored(id) { return }
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

    /// Waits for every acknowledgement, publishes again what was not acknowledged, and queues each
    /// shard's newest handled envelope for its commit (``commitAcknowledged(_:)``).
    ///
    /// Only a positive answer takes an id out of ``unacknowledged``: an acknowledgement the
    /// stream sent for it (recorded by id in the tracker), or a synchronous publish that returned.
    /// Everything else — reported failures, unanswered messages, a failure reported too late to be
    /// listed, messages never sent — is published again under its id; and envelopes are queued for
    /// their commit only when nothing is left, so a cursor never passes an envelope the stream has
    /// not acknowledged, whatever happened before (a stop raised during an outage included).
    /// - Parameter stop: retries give up when it is raised (nil: one attempt each, when stopping).
    private func flush(stop: StopSignal?) throws {
        lastFlush = BusClock.monotonicNanoseconds()
        guard let js = jetStream, !unacknowledged.isEmpty || handled.contains(where: { $0 != nil }) else { return }
        if !unacknowledged.isEmpty {
            let failures = js.waitForAcknowledgements(timeoutMilliseconds: options.ackWaitMilliseconds + 1000)
            for id in js.tracker.takeAcknowledgedIDs() { unacknowledged.removeValue(forKey: id) }
            let again = unacknowledged.keys.sorted(by: BridgeSubject.idOrder)
            if !again.isEmpty {
                logger.warning("publishing again what the stream did not acknowledge",
                               ["count": String(again.count), "first_reason": failures.first?.reason ?? "not acknowledged"])
                // Stored, with the acknowledgement lost (NATS went away after storing it), perhaps
                // longer ago than the duplicate window: the stream's tail says, as at start (rule 3
                // of docs/jetstream.md), rather than the window alone.
                try readStreamTail(js, stop: stop)
            }
            for id in again {
                guard let message = unacknowledged[id] else { continue }
                if takeAlreadyStored(id) {
                    unacknowledged.removeValue(forKey: id)
                    continue
                }
                try publishSynchronously(js, id: id, message: message, stop: stop)
                unacknowledged.removeValue(forKey: id)
            }
        }
        guard unacknowledged.isEmpty else { return }
        for position in handled.indices {
            guard let envelope = handled[position] else { continue }
            acknowledged.append(envelope)
            handled[position] = nil
        }
    }

    /// Whether the stream's tail showed `id` stored beyond its cursor (``reconcile(_:shards:)``):
    /// then it is not published (again), only counted `already_stored`.
    private func takeAlreadyStored(_ id: String) -> Bool {
        guard !storedBeyondCursor.isEmpty, storedBeyondCursor.remove(id) != nil else { return false }
        statistics.alreadyStored += 1
        return true
    }

    /// Each bridged shard's committed `seq`, keyed as ``reconcile(_:shards:)`` takes them (nil: the
    /// single daemon, whichever shard it is).
    private func cursorPositions() -> [Int?: Int64] {
        var positions: [Int?: Int64] = [:]
        if options.shardIDs == nil && options.busShardCount == 1 {
            positions[nil] = committedSeqs[0]
        } else {
            for (shard, seq) in zip(options.bridgedShards, committedSeqs) { positions[shard] = seq }
        }
        return positions
    }

    /// ``reconcile(_:shards:)`` from the committed cursors, at start and before publishing again
    /// what the stream did not acknowledge: tried until NATS answers or `stop` is raised; once when
    /// stopping (`stop` nil). When NATS does not answer, the ids stay to be published again, under
    /// their ids; any other error ends the bridge.
    private func readStreamTail(_ js: JetStream, stop: StopSignal?) throws {
        let positions = cursorPositions()
        while true {
            do {
                try reconcile(js, shards: positions)
                return
            } catch let error as NATSError {
                logger.warning("cannot read the stream's tail; retrying", ["error": "\(error)"])
                guard let stop, !stop.isRaised else { return }
                sleepUnlessStopped(stop, milliseconds: 1000)
            }
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
            } catch where error.isOverMaxPayload {
                // Refused every time: retrying would hold every later envelope behind it for ever.
                throw BridgeError("envelope \(id) is \(message.payload.count) bytes, more than the NATS server's "
                    + "max_payload (\(error.message)); the cursor stays before it. Raise max_payload in "
                    + "nats-server's configuration (up to 64 MB; the daemon's envelopes can exceed "
                    + "--max-message-bytes: docs/jetstream.md) and start the bridge again")
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
            "cursor": committedSeqs.map(String.init).joined(separator: ","),
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
                if error.jetStreamCode == JetStreamBridge.invalidStreamConfiguration {
                    throw BridgeError("cannot create stream \(options.stream): \(error.message) "
                        + "(jetstream error \(error.jetStreamCode)); the server refuses its configuration as given "
                        + "(--duplicate-window is at most --max-age; --replicas at most the cluster's size)")
                }
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
    /// JetStream's "stream configuration validation error": the flags ask for a stream the server
    /// will never create (a duplicate window longer than the age limit, say).
    static let invalidStreamConfiguration = 10052

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
            guard let info = try js.streamInfo(options.stream), info.messages > 0 else {
                storedBeyondCursor = []  // an empty stream stores nothing beyond any cursor
                return
            }
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
package struct BridgeError: Error, CustomStringConvertible, Sendable {
    package let description: String
    package init(_ description: String) { self.description = description }
}
