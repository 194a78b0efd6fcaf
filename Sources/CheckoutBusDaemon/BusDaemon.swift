#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusCore
import ZeroMQ
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// The daemon's pipeline: ingest → decode → rules → envelope → journal → publish, on one thread.
///
/// Not `Sendable`: ``run(stop:ready:)`` creates every socket on the calling thread and uses them
/// there until it returns. One thread keeps per-checkout order and the rules' state simple and
/// lock-free; libzmq's I/O thread does the network work beside it, and the journal's writer and
/// sync threads write and `fdatasync` each batch behind it (``Journal``).
package final class BusDaemon {
    /// The endpoints as actually bound (ports resolved), printed as the ready line.
    package struct BoundEndpoints: Sendable {
        package var ingest: String
        package var ingestAcked: String
        package var publish: String
        package var control: String
        /// `HOST:PORT` of the metrics endpoint, or nil when off.
        package var metrics: String?
        package var dataDirectory: String
        /// The last seq in the journal at start (0 for a new one).
        package var lastSeq: UInt64
        /// The daemon's CURVE public key, clients' `--curve-server` (nil without CURVE).
        package var curvePublicKey: String?
        /// This daemon's shard, `I/N`.
        package var shard: ShardMap

        /// The ready line: one JSON object on one line.
        package var readyLine: String {
            var w = JSONWriter(capacity: 256)
            w.append("{\"ready\":true,\"ingest\":")
            w.appendString(ingest)
            w.append(",\"ingest_acked\":")
            w.appendString(ingestAcked)
            w.append(",\"publish\":")
            w.appendString(publish)
            w.append(",\"control\":")
            w.appendString(control)
            w.append(",\"metrics\":")
            if let metrics { w.appendString(metrics) } else { w.append("null") }
            w.append(",\"data_dir\":")
            w.appendString(dataDirectory)
            w.append(",\"last_seq\":")
            w.append(int: Int64(lastSeq))
            w.append(",\"curve_public_key\":")
            if let curvePublicKey { w.appendString(curvePublicKey) } else { w.append("null") }
            w.append(",\"shard\":")
            w.appendString(shard.description)
            w.append(",\"pid\":")
            w.append(int: Int(getpid()))
            w.append("}")
            return String(decoding: w.bytes, as: UTF8.self)
        }
    }

    /// An acknowledged producer's reply, held until the journal is durable up to `seq`.
    package struct PendingAck {
        var identity: [UInt8]
        /// Empty for a DEALER producer; the REQ delimiter frame otherwise.
        var delimiter: Bool
        var durableAt: UInt64
        var reply: [UInt8]
    }

    package let configuration: DaemonConfiguration
    package let logger: BusLogger
    package let processor: EventProcessor
    /// Bytes a subscription message may have on the publish socket (a topic prefix of at most
    /// ``TopicLimits/maxPrefixBytes``); a larger one disconnects its subscriber as its size arrives,
    /// before libzmq reads it or adds it to its subscription trie.
    package static let maxSubscriptionBytes = Int64(TopicLimits.maxSubscriptionMessageBytes)
    /// Subscription messages queued inside the daemon per subscriber connection (the publish
    /// socket's `ZMQ_RCVHWM`): libzmq applies a connection's queued subscriptions all at once when
    /// the pipeline next touches the socket, so this bounds that work per connection and turn; a
    /// subscriber sending faster waits in its own TCP buffers.
    package static let subscriptionQueue: Int32 = 64
    /// Subscription messages the pipeline reads per turn at most, between ingest batches.
    package static let subscriptionsPerTurn = 1024

    /// Acknowledgements queued per producer connection at most (the acknowledged socket's
    /// `ZMQ_SNDHWM`): a producer that sends and never reads its acknowledgements holds at most this
    /// many; further ones to it are dropped, counted. libzmq learns what its peer has read only
    /// every half mark, so a queue may look full at half of it: the windows of `checkoutbus send`,
    /// `flood`, ``AcknowledgedProducer`` and the Python producer (at most 10,000) stay well below
    /// 50,000, and `route`'s links read theirs into a queue of 100,000 on their side. A producer
    /// that reads its acknowledgements loses none.
    package static let ackQueue: Int32 = 100_000
    /// A peer that has not finished its ZeroMQ handshake this long after connecting is cut off
    /// (`ZMQ_HANDSHAKE_IVL`): junk and idle connections on the ZeroMQ ports do not accumulate.
    package static let handshakeTimeoutMilliseconds: Int32 = 10_000
    /// How long SIGTERM's drain reads the ingest sockets at most (docs/durability.md, "Stopping").
    package static let shutdownDrainNanoseconds: UInt64 = 2_000_000_000
    /// The drain at a stop ends once nothing has arrived on either ingest socket for this long.
    package static let shutdownQuietMilliseconds = 20
    /// Ingest messages read per poll wake-up before the loop looks at subscriptions and timers.
    private let batchSize = 512
    /// The journal, opened (recovered) when the daemon is made; closed when ``run(stop:ready:)``
    /// returns, or when a daemon that never ran goes away.
    private let journal: Journal
    /// The journal's batches, from append to publication.
    private let batches: JournalBatch
    /// `--error-map`, read (and checked) when the daemon is made, installed when it runs.
    private let errorMap: ErrorMap?
    /// ``run(stop:ready:)`` was called: a daemon runs once.
    private var ran = false
    /// Event ids of suppressed updates, for retries across a restart (nil with `--dedupe-window 0`).
    private var suppressedLog: SuppressedLog?
    private var acks = RingBuffer<PendingAck>(initialCapacity: 1024)
    /// Acknowledgements dropped: their producer's queue was full (it does not read them) or it had gone.
    private var ackRepliesDropped: UInt64 = 0
    /// Where the threads that serve clients get the pipeline's figures (set while running).
    private var snapshots: SnapshotExchange?
    /// A reader asked for a snapshot that is not yet published.
    private var snapshotOwed = false
    /// The pipeline thread's time by stage over the sampled events (the processor times decode,
    /// rules and envelope; this loop the rest).
    private var pipelineStages = StageTimes()
    private var ingestCountdown = 0
    private var publishCountdown = 0
    private var sampleRandom: UInt64 = 0x9E37_79B9_7F4A_7C15
    private var lastSnapshotAt: UInt64 = 0
    /// The least time between two snapshots (ns).
    package static let snapshotInterval: UInt64 = 2_000_000
    /// Subscribers' drop reports, recorded by the control thread, shown by stats and metrics.
    private let reports: SubscriberReportBook
    /// Connections and refusals counted by the threads that serve clients.
    private let serviceCounters = ServiceCounters()
    private var clock = EventClock()
    /// A new subscription arrived and its answering heartbeat has not gone out: it goes out once
    /// every record before it is published, at most one per ``subscriptionAnswerInterval``.
    private var subscriptionHeartbeatOwed = false
    private var lastSubscriptionAnswerAt: UInt64 = 0
    /// The least time between two heartbeats answering subscriptions (ns): each one publishes
    /// everything pending first, so a client that subscribes and unsubscribes in a loop must not
    /// make the pipeline do it for every message.
    package static let subscriptionAnswerInterval: UInt64 = 5_000_000
    private var receivedAtLastHeartbeat: UInt64 = 0
    /// The publish socket's high-water mark (``sharedPublishHighWaterMark(budget:subscribers:configured:)``).
    private var publishHighWaterMark: Int32 = 0
    /// The endpoints as bound, once they are.
    private var boundEndpoints: BoundEndpoints?
    private var trimmedSinceInput = true
    /// The process's allocator (set by the executable before ``run(stop:ready:)``; glibc's by default).
    package var allocator = MemoryAllocator.system

    /// With `--pipeline-threads` above 1: the threads that prepare messages beside the pipeline
    /// thread, and the slots a batch is received into.
    private var prepareWorkers: PrepareWorkers?
    private let slots: PreparedSlots

    /// The CURVE allowlists when CURVE is on; SIGHUP reloads them.
    package let allowlists: CurveAllowlists?
    private let curveKeys: ZMQCurveKeyPair?

    /// Reads the CURVE keys and the error map, and opens the journal (recovering it: docs/durability.md).
    /// A daemon runs once: ``run(stop:ready:)`` closes the journal; one that never runs closes it
    /// when it goes away.
    /// - Throws: ``DaemonError`` when CURVE is configured and its key file or directories cannot be
    ///   read; a ``JournalError`` when the data directory or the journal cannot be opened.
    package init(configuration: DaemonConfiguration, logger: BusLogger) throws {
        self.configuration = configuration
        // Subscribers report once per heartbeat: silence shorter than three of them is no silence.
        reports = SubscriberReportBook(lifetimes: .init(goneAfterMilliseconds: max(Int64(configuration.subscriberGoneAfterSeconds) * 1000,
                                                                                   3 * Int64(configuration.heartbeatMilliseconds)),
                                                        expireAfterMilliseconds: Int64(configuration.subscriberExpireAfterSeconds) * 1000))
        self.logger = logger
        self.processor = EventProcessor(options: configuration.processor)
        let threads = configuration.resolvedPipelineThreads
        slots = PreparedSlots(count: threads > 1 ? PreparedSlots.batch : 0)
        if threads > 1 { prepareWorkers = PrepareWorkers(workers: threads - 1) }
        if let keyPath = configuration.curveSecretKeyPath, let producers = configuration.curveProducersDirectory,
            let subscribers = configuration.curveSubscribersDirectory
        {
            curveKeys = try ZMQCurveKeyPair.readSecretKey(path: keyPath)
            allowlists = try CurveAllowlists(producersDirectory: producers, subscribersDirectory: subscribers)
        } else {
            curveKeys = nil
            allowlists = nil
        }
        // Before the journal: a bad map stops the start without touching the journal (as every
        // other configuration error does).
        errorMap = try configuration.errorMapPath.map { try DaemonConfiguration.loadErrorMap($0) }
        // Last: nothing after it can fail and leave the journal open.
        try JournalFiles.makeDirectory(configuration.dataDirectory)
        journal = try Journal(directory: configuration.dataDirectory + "/journal", options: configuration.journal,
                              logger: logger)
        batches = JournalBatch(journal: journal, measuresLatency: configuration.metrics != nil,
                               lendsPublishedBytes: true, logger: logger)
    }

    deinit {
        // A daemon made and never run: its journal's threads, descriptors and lock go with it.
        if !ran { batches.close() }
    }

    /// Binds, reports the bound endpoints through `ready`, and runs until `stop` is raised; then
    /// stops accepting, journals and publishes everything already received, syncs, and returns.
    /// - Throws: ``ZMQError`` when an endpoint cannot be bound, or a ``DaemonError``.
    package func run(stop: StopSignal, ready: (BoundEndpoints) -> Void) throws {
        // However the run ends, what is pending is written and the journal closed.
        defer { batches.close() }
        precondition(!ran, "a BusDaemon runs once (its journal is closed when run returns)")
        ran = true
        if let map = errorMap, let path = configuration.errorMapPath {
            ErrorMap.install(map)
            logger.info("error map loaded", ["path": path, "entries": String(map.count)])
        }
        let descriptors = BusDaemon.raiseDescriptorLimit(logger)
        let maxConnections = BusDaemon.connectionsPerSocket(configured: configuration.maxConnectionsPerSocket,
                                                            descriptorLimit: descriptors)
        if maxConnections < configuration.maxConnectionsPerSocket {
            logger.warning("--max-connections lowered to fit the open-file limit", [
                "max_connections": String(maxConnections), "open_file_limit": String(descriptors),
            ])
        }
        try DataDirectoryLock.claimShard(configuration.processor.shard, dataDirectory: configuration.dataDirectory,
                                         journalHasRecords: journal.lastSeq > 0)
        processor.restore(seq: journal.recovery.lastSeq, kindSeqs: journal.recovery.kindSeqs)
        processor.startedAt = Timestamp(milliseconds: BusClock.wallMilliseconds())
        let run = DataDirectoryLock.journalID(dataDirectory: configuration.dataDirectory, logger: logger).map {
            DaemonRun(journal: $0, startedAt: processor.startedAt?.rfc3339 ?? "")
        }
        processor.journalID = run?.journal
        if configuration.processor.dedupeWindow > 0 {
            suppressedLog = try SuppressedLog(directory: configuration.dataDirectory, journalSeq: journal.lastSeq,
                                              logger: logger)
        }
        defer { suppressedLog?.close() }
        try StateRestorer(journal: journal, processor: processor, dedupeWindow: configuration.processor.dedupeWindow,
                          restoreRecords: configuration.restoreRecords, logger: logger)
            .restore(suppressed: suppressedLog?.takeRecovered() ?? [])
        let exchange = try SnapshotExchange()
        snapshots = exchange
        defer { exchange.requests.close() }

        // Two contexts: the pipeline's sockets, and the control socket with an I/O thread of its
        // own, so replay pages never queue behind live envelopes.
        let context = try ZMQContext(ioThreads: 1)
        defer { context.shutdown() }
        let controlContext = try ZMQContext(ioThreads: 1)
        defer { controlContext.shutdown() }
        let ingest = try ZMQSocket(context: context, type: .pull)
        let acked = try ZMQSocket(context: context, type: .router)
        let publish = try ZMQSocket(context: context, type: .xpub)
        let wireLimit = Int64(configuration.maxWireBytes)
        for socket in [ingest, acked] {
            try socket.setOption(.receiveHighWaterMark, configuration.ingestHighWaterMark)
            // A message past the wire limit disconnects its producer as its size arrives, before
            // libzmq allocates it; one up to it is dead-lettered `oversized` with its head kept.
            try socket.setMaxMessageSize(wireLimit)
        }
        try ingest.setLinger(milliseconds: 0)
        try acked.setOption(.sendHighWaterMark, BusDaemon.ackQueue)
        // A full queue refuses the send (EAGAIN with ZMQ_DONTWAIT) rather than dropping unseen, so
        // the drop is counted; a producer gone is EHOSTUNREACH.
        try acked.setOption(.routerMandatory, 1)
        try acked.setLinger(milliseconds: 2000)
        publishHighWaterMark = BusDaemon.sharedPublishHighWaterMark(
            budget: configuration.subscriberMemoryBytes, subscribers: min(configuration.maxSubscribers, maxConnections),
            configured: configuration.publishHighWaterMark)
        try publish.setOption(.sendHighWaterMark, publishHighWaterMark)
        try publish.setOption(.receiveHighWaterMark, BusDaemon.subscriptionQueue)
        try publish.setOption(.xpubVerbose, 1)
        try publish.setMaxMessageSize(curveKeys == nil ? BusDaemon.maxSubscriptionBytes
                                                      : Int64(TopicLimits.maxCurveSubscriptionMessageBytes))
        try publish.setLinger(milliseconds: 2000)
        var monitors: [(socket: ServiceCounters.Socket, endpoint: String)] = []
        for (socket, kind) in [(ingest, ServiceCounters.Socket.ingest), (acked, .ingestAcked), (publish, .publish)] {
            try socket.setHandshakeTimeout(milliseconds: BusDaemon.handshakeTimeoutMilliseconds)
            let endpoint = "inproc://checkoutbus-monitor-\(kind.name)"
            try socket.monitor(endpoint)
            monitors.append((kind, endpoint))
        }
        if let curveKeys {
            try ingest.makeCurveServer(secretKey: curveKeys.secretKey, domain: CurveAllowlists.producersDomain)
            try acked.makeCurveServer(secretKey: curveKeys.secretKey, domain: CurveAllowlists.producersDomain)
            try publish.makeCurveServer(secretKey: curveKeys.secretKey, domain: CurveAllowlists.subscribersDomain)
        }
        // The control thread binds the ZAP handlers (before any CURVE socket accepts) and the
        // monitors' readers (before the sockets bind), then the control socket.
        let controlServer = try BusDaemon.naming("control", configuration.control) { () throws -> ControlServer in try ControlServer(ControlServer.Settings(
            endpoint: configuration.control, liveContext: context, controlContext: controlContext,
            allowlists: allowlists, curveSecretKey: curveKeys?.secretKey, shard: configuration.processor.shard,
            run: run,
            monitors: monitors,
            maxConnections: ServiceCounters.Socket.allCases.map { $0 == .publish ? min(configuration.maxSubscribers, maxConnections) : maxConnections },
            replyBudget: configuration.controlMemoryBytes, catalog: journal.catalog, exchange: exchange, reports: reports, counters: serviceCounters,
            logger: logger)) }
        defer { controlServer.stop() }
        // Runs first: the monitors stop before the control thread closes their readers.
        defer {
            for socket in [ingest, acked, publish] {
                do { try socket.stopMonitor() } catch {
                    logger.warning("a connection monitor could not be stopped", ["error": "\(error)"])
                }
            }
        }
        try BusDaemon.bind(ingest, configuration.ingest, flag: "ingest")
        try BusDaemon.bind(acked, configuration.ingestAcked, flag: "ingest-acked")
        try BusDaemon.bind(publish, configuration.publish, flag: "publish")
        var metricsServer: MetricsHTTPServer?
        if let address = configuration.metrics {
            metricsServer = try BusDaemon.naming("metrics", address) {
                try MetricsHTTPServer(MetricsHTTPServer.Settings(
                    address: address, exchange: exchange, reports: reports, counters: serviceCounters,
                    startedAt: BusClock.monotonicNanoseconds(), logger: logger))
            }
        }
        defer { metricsServer?.stop() }
        let bound = BoundEndpoints(
            ingest: try ingest.lastEndpoint, ingestAcked: try acked.lastEndpoint, publish: try publish.lastEndpoint,
            control: controlServer.endpoint, metrics: metricsServer?.boundAddress, dataDirectory: configuration.dataDirectory,
            lastSeq: journal.lastSeq, curvePublicKey: curveKeys?.publicKey, shard: configuration.processor.shard)
        boundEndpoints = bound
        ready(bound)
        logger.info("started", [
            "ingest": bound.ingest, "ingest_acked": bound.ingestAcked, "publish": bound.publish, "control": bound.control,
            "metrics": bound.metrics ?? "off",
            "last_seq": String(journal.lastSeq), "journal_segments": String(journal.segmentCount),
            "journal_writes": journal.writesDirect ? "direct" : "page_cache", "zmq": ZMQContext.version,
            "max_wire_bytes": String(configuration.maxWireBytes), "allocator": allocator.name,
        ])

        // Two pollers: everything, and — while a journal write is failing — everything but ingest,
        // so the daemon stops taking input yet still answers subscriptions and snapshot requests.
        let poller = ZMQPoller()
        let ingestIndex = poller.addReadable(ingest)
        let ackedIndex = poller.addReadable(acked)
        // Wakes the loop when the journal's writer thread has written a batch, to publish it.
        poller.addReadable(fileDescriptor: journal.writerWakeFD)
        let sides = SideSockets(poller: poller, publish: publish, snapshotRequests: exchange.requests.readFD)
        let blockedPoller = ZMQPoller()
        let blockedSides = SideSockets(poller: blockedPoller, publish: publish, snapshotRequests: exchange.requests.readFD)
        let message = ZMQMessage()
        let heartbeatNanos = UInt64(configuration.heartbeatMilliseconds) * 1_000_000
        var nextHeartbeat = BusClock.monotonicNanoseconds() + heartbeatNanos
        var nextRetention = BusClock.monotonicNanoseconds() + 60_000_000_000

        while !stop.isRaised {
            let now = BusClock.monotonicNanoseconds()
            if batches.retryDue(now: now) { _ = try commitBatch(publish) }
            // Heartbeats carry the last seq: sent once everything before them is published.
            if now >= nextHeartbeat && !batches.isFailing {
                if try settle(publish) { try sendHeartbeat(publish) }
                processor.tick(now: BusClock.monotonicSeconds())
                suppressedLog?.sync()
                nextHeartbeat = now + heartbeatNanos
                returnFreedMemoryWhenIdle()
            }
            try answerSubscriptions(publish, now: now)
            let blocked = batches.isFailing
            if now >= nextRetention {
                journal.enforceRetention(now: time(nil))
                nextRetention = now + 60_000_000_000
            }
            try releaseAcks(acked)
            answerSnapshotIfDue(now)
            if blocked {
                if try blockedPoller.poll(timeoutMilliseconds: snapshotOwed ? 2 : 100) > 0 { try serve(blockedSides) }
                continue
            }
            // Waiting acks are released as the sync thread advances: look again within a millisecond.
            let untilHeartbeat = Int((nextHeartbeat - min(now, nextHeartbeat)) / 1_000_000) + 1
            let wait = !acks.isEmpty ? 1 : min(untilHeartbeat, snapshotOwed || subscriptionHeartbeatOwed ? 2 : 200)
            guard try poller.poll(timeoutMilliseconds: wait) > 0 else { continue }
            if poller.isReadable(sides.publishIndex) { try readSubscriptions(publish) }
            if poller.isReadable(ingestIndex) { try drainIngest(ingest, message, limit: batchSize) }
            if poller.isReadable(ackedIndex) { try drainAcked(acked, limit: batchSize) }
            _ = try commitBatch(publish)
            try serve(sides, subscriptions: false)
        }

        // Drain: stop accepting, journal and publish what is already queued, sync, answer acks —
        // for at most `shutdownDrainNanoseconds`: a producer that never stops sending (the acked
        // socket stays bound, to answer) cannot hold SIGTERM off.
        logger.info("stopping: draining ingest")
        try? ingest.unbind(bound.ingest)
        let drainDeadline = BusClock.monotonicNanoseconds() + BusDaemon.shutdownDrainNanoseconds
        let arrivals = ZMQPoller()
        _ = arrivals.addReadable(ingest)
        _ = arrivals.addReadable(acked)
        while true {
            let before = processor.counters.received
            try drainIngest(ingest, message, limit: batchSize)
            try drainAcked(acked, limit: batchSize)
            _ = try commitBatch(publish)
            // A pass that found nothing: what producers sent just before the stop may still be on
            // its way through ZeroMQ's I/O thread (a moment behind on a busy host), so ingest is
            // taken for empty only once nothing has come for `shutdownQuietMilliseconds`.
            if processor.counters.received == before,
                try arrivals.poll(timeoutMilliseconds: BusDaemon.shutdownQuietMilliseconds) == 0 {
                break
            }
            if BusClock.monotonicNanoseconds() >= drainDeadline {
                logger.warning("stopping: producers were still sending when the drain's time ran out; what they send "
                               + "from now on is not read (acknowledged producers get no answer and send it again)",
                               ["drain_ms": String(BusDaemon.shutdownDrainNanoseconds / 1_000_000)])
                break
            }
        }
        suppressedLog?.close()
        // A journal that still cannot be written gets five more seconds; what it never took was
        // neither published nor acknowledged.
        var attempts = 0
        while !(try settle(publish)) {
            attempts += 1
            if attempts >= 50 { throw DaemonError(.notDrained, "stopping with events the journal could not take (disk full?)") }
            usleep(100_000)
        }
        batches.close()
        prepareWorkers?.stop()
        prepareWorkers = nil
        try releaseAcks(acked)
        try sendHeartbeat(publish)
        let c = processor.counters
        logger.info("stopped", [
            "received": String(c.received), "published": String(c.publishedByKind.reduce(0, +)),
            "suppressed": String(c.suppressed), "deadlettered": String(c.deadLetteredTotal),
            "last_seq": String(processor.lastSeq), "published_in_place": String(batches.envelopesLent),
        ])
    }

    /// Raises the soft limit on open files to the hard one: every connection on the ZeroMQ ports
    /// holds a descriptor until it leaves (or fails its handshake within
    /// ``handshakeTimeoutMilliseconds``), and the journal needs some of its own.
    /// - Returns: the soft limit now in force (1024 if it cannot be read).
    @discardableResult
    package static func raiseDescriptorLimit(_ logger: BusLogger) -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else {
            let code = errno
            logger.warning("the open-file limit cannot be read; assuming 1024", ["error": String(cString: strerror(code))])
            return 1024
        }
        guard limit.rlim_cur < limit.rlim_max else { return Int(clamping: limit.rlim_cur) }
        let before = limit.rlim_cur
        limit.rlim_cur = limit.rlim_max
        guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else {
            let code = errno
            logger.warning("the open-file limit cannot be raised", [
                "limit": String(before), "error": String(cString: strerror(code)),
            ])
            return Int(clamping: before)
        }
        logger.debug("open-file limit raised", ["from": String(before), "to": String(limit.rlim_max)])
        return Int(clamping: limit.rlim_max)
    }

    /// Descriptors kept out of the ZeroMQ ports' reach: the journal's segments and readers, the
    /// suppressed-id log, the metrics endpoint's 128 connections, libzmq's own. A quarter of
    /// the limit, and no more than 1024.
    package static func reservedDescriptors(_ descriptorLimit: Int) -> Int { min(1024, descriptorLimit / 4) }

    /// The connections each of the four ZeroMQ ports keeps: `configured`, lowered so that all four
    /// full leave ``reservedDescriptors(_:)`` of `descriptorLimit` (16 at least).
    package static func connectionsPerSocket(configured: Int, descriptorLimit: Int) -> Int {
        min(configured, max(16, (descriptorLimit - reservedDescriptors(descriptorLimit)) / 4))
    }

    /// Bytes one message queued for one subscriber costs (two `zmq_msg_t` of 64 bytes, topic and
    /// envelope, and libzmq's queue around them; measured 163–183 from /proc), with a margin, and
    /// what a queued envelope's content costs once, shared by every subscriber that holds it.
    package static let queuedMessageBytes = 224
    package static let sharedEnvelopeBytes = 1024

    /// The publish high-water mark per subscriber that keeps `subscribers` queues, each full,
    /// within `budget` bytes: at most `configured` (`--publish-hwm`; 0, libzmq's "no limit", counts
    /// as no limit here too), at least ``minimumPublishHighWaterMark``. It is set once, before the
    /// socket binds: libzmq 4.3 gives a connection the mark in force at bind, and a later change
    /// reaches no connection (measured).
    package static func sharedPublishHighWaterMark(budget: Int, subscribers: Int, configured: Int32) -> Int32 {
        let share = budget / (max(1, subscribers) * queuedMessageBytes + sharedEnvelopeBytes)
        let ceiling = configured == 0 ? Int(Int32.max) : Int(configured)
        return Int32(max(minimumPublishHighWaterMark, min(ceiling, share)))
    }

    /// The publish high-water mark is never shared below this: a subscriber that falls this far
    /// behind recovers from the journal.
    package static let minimumPublishHighWaterMark = 100

    /// After a burst, once a whole heartbeat interval passed without input, hands the memory the
    /// burst's queues freed back to the system (``MemoryAllocator/releaseFreed``), so RSS
    /// reflects what is tracked.
    private func returnFreedMemoryWhenIdle() {
        let received = processor.counters.received
        if received != receivedAtLastHeartbeat {
            receivedAtLastHeartbeat = received
            trimmedSinceInput = false
        } else if !trimmedSinceInput {
            allocator.releaseFreed()
            trimmedSinceInput = true
        }
    }

    /// Reads and processes queued fire-and-forget messages, at most `limit`, without blocking.
    private func drainIngest(_ ingest: ZMQSocket, _ message: ZMQMessage, limit: Int) throws {
        if let workers = prepareWorkers { return try drainIngestInParallel(ingest, workers, limit: limit) }
        // One reference for the whole batch, not a load of the property per event.
        let batches: JournalBatch = self.batches
        var n = 0
        while n < limit {
            // One event in `StageTimes.sampleInterval` is timed stage by stage (stats' `stages`).
            let timed = ingestCountdown == 0
            let receiveStart = timed ? StageTimes.now() : 0
            guard try ingest.receive(into: message, dontWait: true) else { break }
            n += 1
            let receiveEnd = timed ? StageTimes.now() : 0
            ingestCountdown = timed ? StageTimes.nextInterval(&sampleRandom) : ingestCountdown - 1
            let (arrival, receivedAt, now) = clock.now()
            let result: ProcessingResult
            if message.hasMore {
                let (first, frames) = try restOfMultipart(ingest, message)
                result = rejectMultipart(first, frames: frames, receivedAt: receivedAt)
            } else if timed {
                result = message.withUnsafeBytes { processor.process($0, receivedAt: receivedAt, now: now, timed: true) }
                let appendStart = StageTimes.now()
                journalOutput(result, arrival: arrival, to: batches)
                if let t = result.stages {
                    pipelineStages.add(receive: receiveEnd &- receiveStart, decode: t.decode, rules: t.rules,
                                       envelope: t.envelope, journalAppend: StageTimes.now() &- appendStart)
                }
                continue
            } else {
                result = message.withUnsafeBytes { processor.process($0, receivedAt: receivedAt, now: now) }
            }
            journalOutput(result, arrival: arrival, to: batches)
        }
    }

    /// ``drainIngest(_:_:limit:)`` with `--pipeline-threads` above 1: up to ``PreparedSlots/batch``
    /// messages at a time are received, prepared (parse, decode, hash) on the workers and this
    /// thread at once, then committed here one by one in the order they arrived: the rules, `seq`
    /// and the journal see exactly the sequence the sequential path would.
    private func drainIngestInParallel(_ ingest: ZMQSocket, _ workers: PrepareWorkers, limit: Int) throws {
        let batches: JournalBatch = self.batches
        let options = processor.options
        let window = options.dedupeWindow > 0
        var taken = 0
        while taken < limit {
            var n = 0
            while n < slots.count && taken + n < limit {
                let received = try slots[n].withValue { slot -> Bool in
                    guard try ingest.receive(into: slot.message, dontWait: true) else { return false }
                    (slot.arrival, slot.receivedAt, slot.now) = clock.now()
                    slot.frames = 1
                    if slot.message.hasMore { (slot.firstFrame, slot.frames) = try restOfMultipart(ingest, slot.message) }
                    // About one event in `StageTimes.sampleInterval` is timed (stats' `stages`).
                    slot.timed = ingestCountdown == 0 && slot.frames == 1
                    ingestCountdown = ingestCountdown == 0 ? StageTimes.nextInterval(&sampleRandom) : ingestCountdown - 1
                    return true
                }
                guard received else { break }
                n += 1
            }
            guard n > 0 else { return }
            taken += n
            let slots = self.slots
            let prepare: @Sendable (Int) -> Void = { i in
                slots[i].withValue { slot in
                    guard slot.frames == 1 else { return }
                    let slot = slot
                    slot.message.withUnsafeBytes { bytes in
                        slot.prepared = EventProcessor.prepare(bytes, options: options, eventIDWindow: window, in: slot.context,
                                                               timed: slot.timed, into: &slot.event) { _, _ in }
                    }
                }
            }
            // A few messages are not worth waking a thread for.
            if n < PreparedSlots.parallelFrom {
                for i in 0..<n { prepare(i) }
            } else {
                workers.run(count: n, prepare)
                pipelineStages.parallelBatches &+= 1
                pipelineStages.parallelMessages &+= UInt64(n)
            }
            for i in 0..<n {
                let (result, arrival, timed) = slots[i].withValue { slot -> (ProcessingResult, UInt64, Bool) in
                    let slot = slot
                    let result: ProcessingResult
                    if slot.frames > 1 {
                        result = rejectMultipart(slot.firstFrame, frames: slot.frames, receivedAt: slot.receivedAt)
                        slot.firstFrame = []
                    } else {
                        result = slot.message.withUnsafeBytes {
                            processor.commit($0, slot.context, slot.prepared.take()!, slot.event.take(), receivedAt: slot.receivedAt,
                                             now: slot.now)
                        }
                    }
                    return (result, slot.arrival, slot.timed)
                }
                let appendStart = timed ? StageTimes.now() : 0
                journalOutput(result, arrival: arrival, to: batches)
                if let t = result.stages {
                    // Receiving is not timed here: the batch is received before it is prepared.
                    pipelineStages.add(receive: 0, decode: t.decode, rules: t.rules, envelope: t.envelope,
                                       journalAppend: StageTimes.now() &- appendStart)
                }
            }
            if n < slots.count { return }  // the socket had no more
        }
    }

    /// Reads the rest of a multipart message whose first frame is in `message`, into it.
    /// - Returns: the first frame's bytes and how many frames there were.
    private func restOfMultipart(_ socket: ZMQSocket, _ message: ZMQMessage) throws -> (first: [UInt8], frames: Int) {
        let first = message.bytes
        var frames = 1
        while message.hasMore {
            _ = try socket.receive(into: message)
            frames += 1
        }
        return (first, frames)
    }

    /// Dead-letters a message of `frames` frames (`first` its first): one event per single-frame message.
    private func rejectMultipart(_ first: [UInt8], frames: Int, receivedAt: Timestamp) -> ProcessingResult {
        first.withUnsafeBytes {
            processor.reject(.multipart, "message of \(frames) frames; send one event per single-frame message",
                             $0, receivedAt: receivedAt)
        }
    }

    /// Reads and processes acknowledged messages; each one's reply waits in ``acks``.
    private func drainAcked(_ acked: ZMQSocket, limit: Int) throws {
        let batches: JournalBatch = self.batches
        var n = 0
        while n < limit, let frames = try acked.receiveMultipart(dontWait: true) {
            n += 1
            guard frames.count >= 2 else { continue }
            let (arrival, receivedAt, now) = clock.now()
            // DEALER: [identity][event]. REQ: [identity][empty][event].
            let delimiter = frames.count >= 3 && frames[1].isEmpty
            let body = frames.dropFirst(delimiter ? 2 : 1)
            let result: ProcessingResult
            if body.count == 1 {
                result = body.first!.withUnsafeBytes { processor.process($0, receivedAt: receivedAt, now: now) }
            } else {
                result = rejectMultipart(body.first!, frames: body.count, receivedAt: receivedAt)
            }
            journalOutput(result, arrival: arrival, to: batches)
            acks.append(PendingAck(identity: frames[0], delimiter: delimiter, durableAt: result.seq,
                                   reply: ackReply(result)))
        }
    }

    /// Appends what the processor produced, if anything, to the journal's pending batch.
    private func journalOutput(_ result: ProcessingResult, arrival: UInt64, to batches: JournalBatch) {
        if let p = result.publication {
            batches.append(seq: p.seq, kindSeq: p.kindSeq, kind: UInt8(p.kind.rawValue), topic: p.topic,
                           envelope: p.envelope, arrival: arrival)
        } else if let log = suppressedLog {
            result.withSuppressedIDs { checkout, id in log.append(seq: result.seq, checkoutID: checkout, eventID: id) }
        }
    }

    private func ackReply(_ result: ProcessingResult) -> [UInt8] {
        let outcome: AckReplyWire.Outcome
        switch result.outcome {
        case .published: outcome = .published(seq: result.seq)
        case .suppressed: outcome = .suppressed
        case .duplicate(let seq): outcome = .duplicate(seq: seq)
        case .duplicateDeadLetter(let seq, let reason): outcome = .duplicateDeadLetter(seq: seq, reason: reason.code)
        case .deadLettered(let reason): outcome = .deadLettered(seq: result.seq, reason: reason.code)
        }
        return AckReplyWire.write(outcome, eventID: result.eventID)
    }

    /// Moves batches through the journal (``JournalBatch/advance(_:)``), publishing what is written.
    /// - Returns: false when a write failed: nothing of that batch is published, it stays
    ///   pending, and ingest is not read until a retry succeeds.
    private func commitBatch(_ publish: ZMQSocket) throws -> Bool {
        // Suppressed ids reach their log before the records processed after them reach the
        // journal: after a kill -9 the log is never behind the journal.
        suppressedLog?.flush()
        return try batches.advance { topic, envelope, loan in try publishRecord(publish, topic, envelope, loan) }
    }

    /// Sends one journaled record's two frames, the envelope lent where it lies in the journal's
    /// batch when `loan` says so (``JournalBatch/Loan``); about one in `StageTimes.sampleInterval`
    /// is timed.
    @inline(__always)
    private func publishRecord(_ publish: ZMQSocket, _ topic: UnsafeRawBufferPointer,
                               _ envelope: UnsafeRawBufferPointer, _ loan: JournalBatch.Loan?) throws {
        guard publishCountdown == 0 else {
            publishCountdown -= 1
            try sendRecord(publish, topic, envelope, loan)
            return
        }
        publishCountdown = StageTimes.nextInterval(&sampleRandom)
        let start = StageTimes.now()
        try sendRecord(publish, topic, envelope, loan)
        pipelineStages.addPublish(StageTimes.now() &- start)
    }

    @inline(__always)
    private func sendRecord(_ publish: ZMQSocket, _ topic: UnsafeRawBufferPointer, _ envelope: UnsafeRawBufferPointer,
                            _ loan: JournalBatch.Loan?) throws {
        do {
            _ = try publish.send(topic, more: true)
        } catch {
            // The loan was counted: give it back, or its buffer would never be taken back.
            if let loan { JournalBatch.Loan.giveBack(nil, loan.hint) }
            throw error
        }
        if let loan {
            _ = try publish.send(lending: envelope, giveBack: JournalBatch.Loan.giveBack, hint: loan.hint)
        } else {
            _ = try publish.send(envelope)
        }
    }

    /// Writes and publishes everything appended so far before returning (heartbeats, stopping).
    /// - Returns: false when a write failed; what it did not take stays pending.
    private func settle(_ publish: ZMQSocket) throws -> Bool {
        suppressedLog?.flush()
        return try batches.settle { topic, envelope, loan in try publishRecord(publish, topic, envelope, loan) }
    }

    /// What the pipeline serves besides ingest, and their indexes in one poller: subscriptions,
    /// and the snapshot requests of the threads that serve clients (``SnapshotExchange``).
    package struct SideSockets {
        let poller: ZMQPoller
        let publishIndex: Int
        let snapshotIndex: Int
        let publish: ZMQSocket

        init(poller: ZMQPoller, publish: ZMQSocket, snapshotRequests: Int32) {
            self.poller = poller
            self.publish = publish
            publishIndex = poller.addReadable(publish)
            snapshotIndex = poller.addReadable(fileDescriptor: snapshotRequests)
        }
    }

    /// Serves what is readable among the side sockets after a poll.
    private func serve(_ s: SideSockets, subscriptions: Bool = true) throws {
        if subscriptions && s.poller.isReadable(s.publishIndex) { try readSubscriptions(s.publish) }
        if s.poller.isReadable(s.snapshotIndex), let snapshots, snapshots.takeRequest() {
            snapshotOwed = true
            answerSnapshotIfDue(BusClock.monotonicNanoseconds())
        }
    }

    /// Publishes the snapshot a reader asked for, at most one per ``snapshotInterval``: a storm of
    /// scrapes or `stats` costs the pipeline at most 500 small copies a second, and each request
    /// is still answered with figures taken after it arrived, within ~2 ms.
    private func answerSnapshotIfDue(_ now: UInt64) {
        guard snapshotOwed, let snapshots, now &- lastSnapshotAt >= BusDaemon.snapshotInterval else { return }
        snapshots.publish(takeSnapshot())
        lastSnapshotAt = now
        snapshotOwed = false
    }

    /// The pipeline's figures at this instant (between two batches): a few copies of counters.
    private func takeSnapshot() -> DaemonSnapshot {
        let c = processor.counters
        return DaemonSnapshot(
            takenAt: BusClock.monotonicNanoseconds(), counters: c, kindSeqs: processor.kindSeqs, lastSeq: journal.lastSeq,
            durableSeq: journal.durableSeq, firstSeq: journal.firstSeq, journalSegments: journal.segmentCount,
            journalBytes: journal.totalBytes, fsyncs: journal.fsyncCount, fsyncMaxMicros: journal.fsyncMaxMicros,
            fsyncHistogram: journal.fsyncHistogram, writesDirect: journal.writesDirect,
            journalWritable: journal.isWritable && !batches.isFailing, trackedCheckouts: processor.state.count,
            evictedCheckouts: processor.state.evicted, expiredCheckouts: processor.state.expired,
            stateBytes: processor.state.approximateBytes,
            pipelineLatency: batches.latency, stages: pipelineStages, recoveredFence: journal.recovery.fence,
            suppressedLogSyncFailures: suppressedLog?.syncFailures ?? 0, ackRepliesDropped: ackRepliesDropped,
            publishHighWaterMark: publishHighWaterMark, endpoints: boundEndpoints)
    }

    /// Answers acknowledged producers whose events are durable, in arrival order.
    private func releaseAcks(_ acked: ZMQSocket) throws {
        guard !acks.isEmpty else { return }
        // Durable and published: a record written ahead of a rotation is durable before its
        // batch is published.
        let durable = min(journal.durableSeq, batches.publishedSeq)
        while let a = acks.first, a.durableAt <= durable {
            _ = acks.popFirst()
            // Never waits: a producer whose queue is full, or that has gone, loses this one.
            var sent = false
            do {
                sent = try acked.send(a.identity, more: true, dontWait: true)
            } catch let e as ZMQError where e.code == EHOSTUNREACH {
                sent = false
            }
            guard sent else {
                ackRepliesDropped &+= 1
                continue
            }
            if a.delimiter { _ = try acked.send([UInt8](), more: true) }
            _ = try acked.send(a.reply)
        }
    }

    /// Publishes a heartbeat as one two-frame message.
    private func sendHeartbeat(_ publish: ZMQSocket) throws {
        // A test seam (docs/durability.md, "Failpoints"): die or stop just before a heartbeat.
        _ = Failpoints.hit("publish.heartbeat")
        let heartbeat = processor.writeHeartbeat(at: Timestamp(milliseconds: BusClock.wallMilliseconds()))
        _ = try publish.send(heartbeat.topic, more: true)
        _ = try publish.send(heartbeat.envelope)
    }

    /// Reads subscription changes. Every new subscription is answered with a heartbeat, so a
    /// subscriber that also subscribes to `bus.heartbeat` knows the moment its filters are live.
    private func readSubscriptions(_ publish: ZMQSocket) throws {
        var subscribed = false
        // At most ``subscriptionsPerTurn``: a read that finds the list empty makes libzmq take in
        // up to 64 more per subscriber connection, so a subscriber churning as fast as it can
        // would keep an unbounded loop here going (measured: live p99 258 ms). libzmq adds to its
        // list only as it processes commands, 64 per connection at a time, and each turn reads
        // up to this many, so the list does not grow behind the pipeline.
        var read = 0
        while read < BusDaemon.subscriptionsPerTurn, let frames = try publish.receiveMultipart(dontWait: true) {
            read += 1
            guard let first = frames.first, let flag = first.first else { continue }
            if flag == 1 {
                subscribed = true
                if logger.level <= .debug {
                    logger.debug("subscribe", ["topic": String(decoding: first.dropFirst(), as: UTF8.self)])
                }
            }
        }
        if subscribed {
            subscriptionHeartbeatOwed = true
            try answerSubscriptions(publish, now: BusClock.monotonicNanoseconds())
        }
    }

    /// Sends the heartbeat that answers new subscriptions, if one is owed and the last went out
    /// at least ``subscriptionAnswerInterval`` ago. It carries the last seq, so everything before
    /// it is published first; while the journal is failing that cannot happen, and the answer
    /// stays owed until a retry succeeds.
    private func answerSubscriptions(_ publish: ZMQSocket, now: UInt64) throws {
        guard subscriptionHeartbeatOwed, !batches.isFailing,
            now &- lastSubscriptionAnswerAt >= BusDaemon.subscriptionAnswerInterval, try settle(publish)
        else { return }
        try sendHeartbeat(publish)
        subscriptionHeartbeatOwed = false
        lastSubscriptionAnswerAt = now
    }
}

extension BusDaemon {
    /// Binds `socket` to `endpoint`, naming the flag it came from when it cannot be bound.
    static func bind(_ socket: ZMQSocket, _ endpoint: String, flag: String) throws {
        try naming(flag, endpoint) { try socket.bind(endpoint) }
    }

    /// Runs `body`; an error it throws is told with the flag and value it concerns (`--ingest
    /// tcp://127.0.0.1:7700: address in use …`), and what to do when the address is taken.
    static func naming<T>(_ flag: String, _ value: String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as ZMQError where error.code == EADDRINUSE {
            throw DaemonError(.badSetting, "--\(flag) \(value): address already in use (another checkoutbusd, or another "
                + "program, listens there): give a free port, or tcp://127.0.0.1:* for any")
        } catch let error as ZMQError {
            throw DaemonError(.badSetting, "--\(flag) \(value): cannot bind: \(String(cString: strerror(error.code)))")
        } catch let error as DaemonError where !error.description.hasPrefix("--") {
            let taken = error.description.contains("Address already in use")
            throw DaemonError(error.code, "--\(flag) \(value): \(error.description)"
                + (taken ? " (another checkoutbusd, or another program, listens there: give a free port, or 127.0.0.1:* for any)" : ""))
        }
    }
}
