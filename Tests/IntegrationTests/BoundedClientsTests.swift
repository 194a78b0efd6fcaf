import CheckoutBusDaemon
import CheckoutBusProtocol
import Foundation
import Synchronization
import Testing
import ZeroMQ

#if canImport(Glibc)
import Glibc
#endif

/// The second round of hostile clients (docs/security.md, "Limits"): each one over the wire
/// against the real daemon, which must then still serve and exit 0. Part of the serialized suite
/// of the first round: several of them hold thousands of descriptors in this process.
extension NoClientStallsTests {
    @Test("an HTTP head past 8 KiB is answered 431 whatever its size, never routed")
    func largeHeads() throws {
        let daemon = try DaemonProcess()
        let address = try #require(daemon.ready["metrics"] as? String)
        let p = try port(of: address)
        for size in [8_193, 9_000, 12_000, 12_288, 16_000] {
            let start = Array("GET /healthz HTTP/1.1\r\nX-Pad: ".utf8)
            let end = Array("\r\n\r\n".utf8)
            let head = start + [UInt8](repeating: 0x61, count: size - start.count - end.count) + end
            #expect(head.count == size)
            let fd = try tcpConnect(port: p)
            defer { close(fd) }
            tcpWrite(fd, head)
            let text = String(decoding: tcpReadAll(fd, timeout: 10) ?? [], as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 431"), "a head of \(size) bytes got: \(text.prefix(40))")
        }
        // At the limit it is still a request.
        let start = Array("GET /healthz HTTP/1.1\r\nX-Pad: ".utf8)
        let head = start + [UInt8](repeating: 0x61, count: MetricsHTTPServer.maxRequestBytes - start.count - 4) + Array("\r\n\r\n".utf8)
        let fd = try tcpConnect(port: p)
        defer { close(fd) }
        tcpWrite(fd, head)
        let text = String(decoding: tcpReadAll(fd, timeout: 10) ?? [], as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 200"), "a head of exactly 8 KiB got: \(text.prefix(40))")
        try expectServing(daemon, "large-heads")
        #expect(daemon.terminate() == 0)
    }

    @Test("during a storm of scrapers and stalled half-sent heads, a health check sent in two segments is answered, never cut")
    func splitHealthCheckInStorm() throws {
        _ = raiseFileLimit()
        let daemon = try DaemonProcess()
        let address = try #require(daemon.ready["metrics"] as? String)
        let p = try port(of: address)
        let stop = Atomic<Bool>(false)
        let scrapes = Atomic<Int>(0)
        let stalledOpened = Atomic<Int>(0)
        // 100 stalled half-sent heads, then 60 scrapers in tight loops: more than the 128 the
        // endpoint keeps.
        var stalled: [Int32] = []
        defer { for fd in stalled { close(fd) } }
        for _ in 0..<100 {
            let fd = try tcpConnect(port: p, source: 3)
            tcpWrite(fd, Array("GET /metr".utf8))
            stalled.append(fd)
            stalledOpened.add(1, ordering: .relaxed)
        }
        var scrapers: [Thread] = []
        for _ in 0..<60 {
            let t = Thread {
                while !stop.load(ordering: .relaxed) {
                    if let fd = try? tcpConnect(port: p, source: 4) {
                        tcpWrite(fd, Array("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
                        _ = tcpReadAll(fd, timeout: 5)
                        close(fd)
                        scrapes.add(1, ordering: .relaxed)
                    }
                }
            }
            t.start()
            scrapers.append(t)
        }
        defer { stop.store(true, ordering: .relaxed) }
        while scrapes.load(ordering: .relaxed) < 100 { usleep(10_000) }
        var outcomes: [String: Int] = [:]
        var nodelay: Int32 = 1
        for _ in 0..<15 {
            let fd = try tcpConnect(port: p, source: 5)
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &nodelay, socklen_t(MemoryLayout<Int32>.size))
            tcpWrite(fd, Array("GET /heal".utf8))
            usleep(30_000)
            tcpWrite(fd, Array("thz HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            let text = String(decoding: tcpReadAll(fd, timeout: 10) ?? [], as: UTF8.self)
            close(fd)
            let outcome = text.isEmpty ? "cut" : text.hasPrefix("HTTP/1.1 200") ? "200" : String(text.suffix(40))
            outcomes[outcome, default: 0] += 1
            usleep(100_000)
        }
        stop.store(true, ordering: .relaxed)
        print("split health checks in a storm (\(scrapes.load(ordering: .relaxed)) scrapes, \(stalledOpened.load(ordering: .relaxed)) stalled heads): \(outcomes)")
        // Accepted, a health check is answered: it is never closed between its two segments.
        // (A newcomer may be told 503 while all 128 are busy: a clear answer.)
        #expect(outcomes["cut"] == nil, "health checks cut between their segments: \(outcomes)")
        #expect((outcomes["200"] ?? 0) >= 10, "\(outcomes)")
        for t in scrapers { while !t.isFinished { usleep(10_000) } }
        let metrics = try httpGet(address, "/metrics").body
        print(metrics.split(separator: "\n").filter { $0.hasPrefix("checkoutbus_http") }.joined(separator: "\n"))
        #expect((metric(metrics, "checkoutbus_http_connections_total{outcome=\"evicted\"}") ?? 0) > 0, "the endpoint was full")
        try expectServing(daemon, "split-in-storm")
        #expect(daemon.terminate() == 0)
    }

    @Test("a subscription past the prefix limit cuts its connection before libzmq stores it; 64-byte prefixes work")
    func longSubscriptions() throws {
        let daemon = try DaemonProcess()
        let pid = daemon.process.processIdentifier
        let context = try ZMQContext()
        // A SUB with a prefix of exactly the limit, and the heartbeat: it keeps its connection.
        let fair = try ZMQSocket(context: context, type: .sub)
        try fair.setLinger(milliseconds: 0)
        try fair.setOption(.receiveTimeout, 5_000)
        try fair.subscribe(String(repeating: "p", count: TopicLimits.maxPrefixBytes))
        try fair.subscribe("bus.heartbeat")
        try fair.connect(daemon.publish)
        #expect(try fair.receiveMultipart()?.first == Array("bus.heartbeat".utf8))
        let before = rssKilobytes(pid)
        // The issue's client: 150 subscriptions of 64 KiB, then as many unsubscriptions.
        let hostile = try ZMQSocket(context: context, type: .xsub)
        try hostile.setLinger(milliseconds: 0)
        try hostile.setOption(.sendTimeout, 2_000)
        try hostile.connect(daemon.publish)
        for flag in [UInt8(1), 0] {
            for i in 0..<150 {
                var message = [flag] + withUnsafeBytes(of: UInt32(i).bigEndian, Array.init)
                message += [UInt8](repeating: 0x7A, count: 65_531)
                _ = try? hostile.send(message, dontWait: true)
            }
        }
        usleep(2_000_000)
        let grown = rssKilobytes(pid) - before
        let metrics = try httpGet(try #require(daemon.ready["metrics"] as? String), "/metrics").body
        let closed = metric(metrics, "checkoutbus_connections_closed_total{socket=\"publish\"}") ?? 0
        print("long subscriptions: RSS +\(grown) KiB, publish connections cut \(closed)")
        #expect(closed >= 1, "the subscriber sending 64 KiB subscriptions was cut")
        #expect(grown < 32 * 1024, "RSS grew \(grown) KiB for 9.4 MiB of subscriptions")
        // The tools refuse such a prefix up front instead of being cut over and over.
        let tail = try runTool("checkoutbus", ["tail", "--from", daemon.publish, "--topic", "checkout." + String(repeating: "x", count: 56)])
        #expect(tail.status != 0 && tail.output.contains("at most 64"), "\(tail)")
        // The fair subscriber was not cut: it still gets heartbeats, and it is the only one left.
        for _ in 0..<2 { #expect(try fair.receiveMultipart()?.first == Array("bus.heartbeat".utf8)) }
        try expectServing(daemon, "long-subscriptions")
        #expect(daemon.terminate() == 0)
    }

    @Test("churning 100,000 distinct short subscriptions leaves live latency within a ratio of its baseline")
    func subscriptionChurn() throws {
        let daemon = try DaemonProcess()
        let baseline = try liveLatencies(daemon, count: 300, tag: "base")
        let stop = Atomic<Bool>(false)
        let sent = Atomic<Int>(0)
        let endpoint = daemon.publish
        let churn = Thread {
            guard let context = try? ZMQContext(), let xsub = try? ZMQSocket(context: context, type: .xsub) else { return }
            try? xsub.setLinger(milliseconds: 0)
            try? xsub.setOption(.sendTimeout, 100)
            try? xsub.connect(endpoint)
            var i = 0
            // 100,000 distinct prefixes, over and over until the measurement ends.
            while !stop.load(ordering: .relaxed) {
                let prefix = Array("churn.\(i % 100_000)".utf8)
                _ = try? xsub.send([1] + prefix)
                _ = try? xsub.send([0] + prefix)
                i += 1
                sent.store(i, ordering: .relaxed)
            }
        }
        churn.start()
        defer { stop.store(true, ordering: .relaxed) }
        while sent.load(ordering: .relaxed) < 5_000 { usleep(5_000) }
        let during = try liveLatencies(daemon, count: 300, tag: "churn")
        let churned = sent.load(ordering: .relaxed)
        stop.store(true, ordering: .relaxed)
        let p99 = { (l: [Double]) in l[l.count * 99 / 100] }
        // A floor of 1 ms under the baseline: an idle daemon's sub-millisecond p99 is noise.
        let ratio = p99(during) / max(p99(baseline), 1_000)
        print("subscription churn: \(churned) prefixes subscriptions and cancellations sent; live p99 \(p99(baseline)) µs baseline, \(p99(during)) µs during (ratio \(ratio))")
        #expect(churned >= 5_000)
        // The issue measured 43–228 ms against 0.5 ms before subscriptions had a budget.
        #expect(ratio < 30, "live p99 during the churn is \(ratio)× its baseline")
        try expectServing(daemon, "churn")
        #expect(daemon.terminate() == 0)
    }

    @Test("a replay names at most 32 prefixes of at most 64 bytes; a page stays under 4 MiB when records are large")
    func replayBounds() throws {
        let daemon = try DaemonProcess(["--max-message-bytes", "3000000", "--max-wire-bytes", "4000000"])
        let control = try ControlClient(daemon.control)
        let many = (0..<(TopicLimits.maxReplayPrefixes + 1)).map { "\"checkout.\($0)\"" }.joined(separator: ",")
        let tooMany = try control.request(#"{"op":"replay","from":1,"prefix":[\#(many)]}"#).status
        #expect(tooMany["ok"] as? Bool == false)
        #expect(tooMany["error"] as? String == "bad_request", "\(tooMany)")
        let long = String(repeating: "c", count: TopicLimits.maxPrefixBytes + 1)
        let tooLong = try control.request(#"{"op":"replay","from":1,"prefix":"\#(long)"}"#).status
        #expect(tooLong["error"] as? String == "bad_request", "\(tooLong)")
        let fine = (0..<TopicLimits.maxReplayPrefixes).map { "\"checkout.\($0)\"" }.joined(separator: ",")
        #expect(try control.request(#"{"op":"replay","from":1,"prefix":[\#(fine)]}"#).status["ok"] as? Bool == true)
        // Three checkouts with a snapshot of 2 MB: about 2 MB a record (ids are at most 1 KiB).
        let note = String(repeating: "i", count: 2_000_000)
        let events = (0..<3).map {
            #"{"event_id":"big-\#($0)","checkout_id":"big-\#($0)","payload":{"event":"onCheckoutStarted","checkout":{"id":"big-\#($0)","note":"\#(note)"}}}"#
        }
        for event in events {
            let acked = try send([event], to: daemon.ingestAcked, arguments: ["--acked", "--timeout", "20"])
            #expect(acked.status == 0, "\(acked.stderr)")
        }
        var next = 1
        var pages = 0
        var records = 0
        while records < 3 && pages < 10 {
            let reply = try control.request(#"{"op":"replay","from":\#(next),"prefix":"checkout."}"#)
            let bytes = reply.frames.reduce(0) { $0 + $1.count }
            print("replay page \(pages): \(reply.frames.count / 2) records, \(bytes) bytes")
            #expect(bytes <= ControlService.maxPageBytes || reply.frames.count == 2, "a page of \(bytes) bytes")
            records += reply.frames.count / 2
            next = try #require(reply.status["next"] as? Int)
            pages += 1
        }
        #expect(records == 3)
        #expect(pages >= 2, "2 MB records: more than one page")
        try expectServing(daemon, "replay-bounds")
        #expect(daemon.terminate() == 0)
    }

    @Test("multipart control requests parked while the control thread is busy stay within the per-client bound")
    func multipartControlRequests() throws {
        let daemon = try DaemonProcess()
        let pid = daemon.process.processIdentifier
        let before = rssKilobytes(pid)
        let context = try ZMQContext()
        let client = try ZMQSocket(context: context, type: .dealer)
        try client.setLinger(milliseconds: 0)
        try client.setOption(.sendTimeout, 200)
        try client.setOption(.sendHighWaterMark, 1_000)
        try client.connect(daemon.control)
        // The issue's client: 40 requests of 100 frames of 64 KiB, none of them ever read back.
        let frame = [UInt8](repeating: 0x7B, count: Int(ControlServer.maxRequestBytes))
        var sentRequests = 0
        for _ in 0..<40 {
            let frames = [Array(#"{"op":"stats"}"#.utf8)] + Array(repeating: frame, count: 99)
            if (try? client.sendMultipart(frames)) == true { sentRequests += 1 }
        }
        usleep(2_000_000)
        let grown = rssKilobytes(pid) - before
        print("multipart control requests: \(sentRequests) sent, RSS +\(grown) KiB")
        // Per client: the 8 requests libzmq queues plus the one arriving, 100 frames of 64 KiB each.
        let bound = (Int(ControlServer.receiveHighWaterMark) + 1) * 100 * Int(ControlServer.maxRequestBytes) / 1024
        #expect(grown < bound, "RSS grew \(grown) KiB, more than the per-client bound of \(bound) KiB")
        try expectServing(daemon, "multipart-control")
        #expect(daemon.terminate() == 0)
    }

    @Test("2,000 subscribers that never read: those past --max-subscribers are cut, the queues stay within --subscriber-memory")
    func subscribersThatNeverRead() throws {
        _ = raiseFileLimit()
        let budget = 64 << 20
        let daemon = try DaemonProcess(["--subscriber-memory", String(budget)])
        let pid = daemon.process.processIdentifier
        let publishPort = try port(of: daemon.publish.replacingOccurrences(of: "tcp://", with: ""))
        let before = rssKilobytes(pid)
        // ZMTP 3.0 SUB peers (rfc.zeromq.org/spec/23) subscribed to everything, with small receive
        // buffers, that never read a byte after their handshake.
        let greeting = ZMTP.nullGreeting
        let ready = ZMTP.ready(socketType: "SUB")
        let subscribeAll: [UInt8] = [0x00, 0x01, 0x01]
        var fds: [Int32] = []
        defer { for fd in fds { close(fd) } }
        for i in 0..<2_000 {
            let c = try tcpConnect(port: publishPort, source: UInt8(2 + i % 16))
            var small: Int32 = 4096
            setsockopt(c, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
            tcpWrite(c, greeting)
            fds.append(c)
        }
        // The rest of the handshake once the daemon answered the greetings (sent with the greeting
        // in one segment, libzmq 4.3.4 closes a SUB peer's connection).
        for c in fds { tcpWrite(c, ready + subscribeAll) }
        let control = try ControlClient(daemon.control)
        // Every connection counted, and the mark shared among them.
        let expectedMark = BusDaemon.sharedPublishHighWaterMark(budget: budget, subscribers: DaemonConfiguration().maxSubscribers,
                                                                configured: 100_000)
        var stats: [String: Any] = [:]
        for _ in 0..<100 {
            stats = try control.stats()
            let publish = (stats["connections"] as? [String: Any])?["publish"] as? [String: Any] ?? [:]
            if (publish["accepted"] as? Int ?? 0) >= fds.count && (publish["open"] as? Int ?? 0) <= DaemonConfiguration().maxSubscribers { break }
            usleep(100_000)
        }
        let publish = (stats["connections"] as? [String: Any])?["publish"] as? [String: Any] ?? [:]
        print("subscribers that never read: connections \(publish)")
        // (Some of the first may have timed out in their handshake, making room for later ones.)
        #expect((publish["refused"] as? Int ?? 0) >= 1_000, "\(publish)")
        #expect((publish["open"] as? Int ?? 0) <= DaemonConfiguration().maxSubscribers, "\(publish)")
        #expect(stats["publish_hwm"] as? Int == Int(expectedMark), "publish_hwm \(stats["publish_hwm"] ?? "none"), expected \(expectedMark)")
        let connected = rssKilobytes(pid)
        // 5,000 events to 2,000 subscribers that read none of them: 10 M deliveries.
        let events = (0..<5_000).map { #"{"event_id":"slow-\#($0)","checkout_id":"slow-\#($0)","payload":{"event":"onCheckoutStarted"}}"# }
        let sent = try send(events, to: daemon.ingest)
        #expect(sent.status == 0, "\(sent.stderr)")
        for _ in 0..<300 {
            if (try control.stats()["last_seq"] as? Int ?? 0) >= 5_000 { break }
            usleep(100_000)
        }
        usleep(1_000_000)
        let flooded = rssKilobytes(pid)
        print("subscribers that never read: RSS \(before) KiB before, \(connected) KiB with \(fds.count) connected, \(flooded) KiB after 5,000 events; mark \(expectedMark)")
        #expect(flooded - connected < budget / 1024, "the queues grew \(flooded - connected) KiB past the \(budget >> 20) MiB budget")
        for fd in fds { close(fd) }
        fds = []
        try expectServing(daemon, "never-read")
        #expect(daemon.terminate() == 0)
    }

    @Test("connections past --max-connections are cut as they are accepted: the journal rotates, /healthz and replay answer")
    func connectionCap() throws {
        _ = raiseFileLimit()
        let daemon = try DaemonProcess(["--max-connections", "64", "--segment-bytes", "4096"])
        let pid = daemon.process.processIdentifier
        let ingestPort = try port(of: daemon.ingest.replacingOccurrences(of: "tcp://", with: ""))
        let greeting = ZMTP.nullGreeting
        let ready = ZMTP.ready(socketType: "PUSH")
        var fds: [Int32] = []
        defer { for fd in fds { close(fd) } }
        // The issue's client: connections that finish the ZeroMQ handshake and idle.
        for i in 0..<1_000 {
            let c = try tcpConnect(port: ingestPort, source: UInt8(2 + i % 16))
            tcpWrite(c, greeting + ready)
            fds.append(c)
        }
        let control = try ControlClient(daemon.control)
        var connections: [String: Any] = [:]
        for _ in 0..<100 {
            connections = try control.stats()["connections"] as? [String: Any] ?? [:]
            let ingest = connections["ingest"] as? [String: Any] ?? [:]
            if (ingest["refused"] as? Int ?? 0) >= 1_000 - 64 && (ingest["open"] as? Int ?? 1_000) <= 64 { break }
            usleep(100_000)
        }
        let ingest = connections["ingest"] as? [String: Any] ?? [:]
        let descriptors = openDescriptors(pid)
        print("connection cap: ingest \(ingest); the daemon holds \(descriptors) descriptors")
        #expect((ingest["refused"] as? Int ?? 0) >= 1_000 - 64, "\(ingest)")
        #expect((ingest["open"] as? Int ?? 1_000) <= 64, "\(ingest)")
        #expect(descriptors < 400, "\(descriptors) descriptors")
        // Journal segments still open (4 KiB segments: every few events a new one), acks come back.
        let events = (0..<200).map { #"{"event_id":"cap-\#($0)","checkout_id":"cap-\#($0)","payload":{"event":"onCheckoutStarted"}}"# }
        let acked = try send(events, to: daemon.ingestAcked, arguments: ["--acked", "--timeout", "20"])
        #expect(acked.status == 0, "\(acked.stderr)")
        let replay = try control.request(#"{"op":"replay","from":1,"limit":10000}"#)
        #expect(replay.status["ok"] as? Bool == true)
        #expect(replay.frames.count / 2 >= 100, "replayed \(replay.frames.count / 2) records")
        let metrics = try httpGet(try #require(daemon.ready["metrics"] as? String), "/metrics").body
        #expect((metric(metrics, "checkoutbus_connections_refused_total{socket=\"ingest\"}") ?? 0) >= Double(1_000 - 64))
        try expectServing(daemon, "connection-cap")
        #expect(daemon.terminate() == 0)
    }

    @Test("with a low open-file limit, 3,000 idle handshaken producers never exhaust descriptors: ingest, rotation, replay and /healthz go on")
    func descriptorExhaustion() throws {
        _ = raiseFileLimit()
        // 2,048 descriptors: each port keeps (2048 - 512) / 4 = 384 connections.
        let daemon = try DaemonProcess(["--segment-bytes", "4096"], launcher: ["/usr/bin/prlimit", "--nofile=2048:2048", "--"])
        let pid = daemon.process.processIdentifier
        let ingestPort = try port(of: daemon.ingest.replacingOccurrences(of: "tcp://", with: ""))
        let greeting = ZMTP.nullGreeting
        let ready = ZMTP.ready(socketType: "PUSH")
        var fds: [Int32] = []
        defer { for fd in fds { close(fd) } }
        var peak = 0
        for i in 0..<3_000 {
            guard let c = try? tcpConnect(port: ingestPort, source: UInt8(2 + i % 16)) else { continue }
            tcpWrite(c, greeting + ready)
            fds.append(c)
            if i % 100 == 0 { peak = max(peak, openDescriptors(pid)) }
        }
        let control = try ControlClient(daemon.control)
        // Ingest goes on: acknowledged events across many 4 KiB segments.
        let events = (0..<300).map { #"{"event_id":"fd-\#($0)","checkout_id":"fd-\#($0)","payload":{"event":"onCheckoutStarted"}}"# }
        let acked = try send(events, to: daemon.ingestAcked, arguments: ["--acked", "--timeout", "20"])
        #expect(acked.status == 0, "\(acked.stderr)")
        // (Paged: a page ends after 10 ms of reading.)
        let replayed = try control.replayAll(prefixes: [])
        #expect(replayed.count >= 300, "replayed \(replayed.count) records")
        let stats = try control.stats()
        let ingest = (stats["connections"] as? [String: Any])?["ingest"] as? [String: Any] ?? [:]
        print("descriptor exhaustion: \(fds.count) connections made; ingest \(ingest); the daemon peaked at \(peak) descriptors of 2048")
        #expect((ingest["open"] as? Int ?? 3_000) <= BusDaemon.connectionsPerSocket(configured: 4096, descriptorLimit: 2048), "\(ingest)")
        #expect(peak < 2048 - 256, "the daemon reached \(peak) descriptors")
        #expect(!daemon.stderrText.contains("Too many open files"), "\(daemon.stderrText.suffix(400))")
        try expectServing(daemon, "descriptors")
        #expect(daemon.terminate() == 0)
    }

    @Test("six clients replaying with the most prefixes allowed: stats stays within a ratio of its baseline")
    func replayPrefixStorm() throws {
        let daemon = try DaemonProcess()
        let events = (0..<20_000).map { #"{"event_id":"p-\#($0)","checkout_id":"p-\#($0)","payload":{"event":"onCheckoutStarted"}}"# }
        #expect(try send(events, to: daemon.ingestAcked, arguments: ["--acked", "--timeout", "60"]).status == 0)
        let control = try ControlClient(daemon.control)
        func statsTimes(_ n: Int) throws -> [Double] {
            try (0..<n).map { _ in
                let started = DispatchTime.now().uptimeNanoseconds
                _ = try control.stats()
                return Double(DispatchTime.now().uptimeNanoseconds - started) / 1000
            }.sorted()
        }
        let baseline = try statsTimes(50)
        // The worst a replay may ask: 32 prefixes of 64 bytes that match nothing, so every page
        // examines its 100,000 records (here the whole journal) against each of them.
        let prefixes = (0..<TopicLimits.maxReplayPrefixes).map {
            "\"checkout.none.\($0)." + String(repeating: "z", count: TopicLimits.maxPrefixBytes - 16 - String($0).count) + "\""
        }.joined(separator: ",")
        let request = #"{"op":"replay","from":1,"prefix":[\#(prefixes)]}"#
        let stop = Atomic<Bool>(false)
        let pages = Atomic<Int>(0)
        let endpoint = daemon.control
        var storm: [Thread] = []
        for _ in 0..<6 {
            let t = Thread {
                guard let client = try? ControlClient(endpoint) else { return }
                while !stop.load(ordering: .relaxed) {
                    if (try? client.request(request))?.status["ok"] as? Bool == true { pages.add(1, ordering: .relaxed) }
                }
            }
            t.start()
            storm.append(t)
        }
        defer { stop.store(true, ordering: .relaxed) }
        while pages.load(ordering: .relaxed) < 6 { usleep(10_000) }
        let during = try statsTimes(50)
        stop.store(true, ordering: .relaxed)
        let p90 = { (l: [Double]) in l[l.count * 9 / 10] }
        let ratio = p90(during) / max(p90(baseline), 1_000)
        print("replay prefix storm: \(pages.load(ordering: .relaxed)) pages of 32 prefixes; stats p90 \(p90(baseline)) µs baseline, \(p90(during)) µs during (ratio \(ratio))")
        // The issue measured 6–8 s for stats behind six replays of 16,368 prefixes.
        #expect(ratio < 100, "stats p90 during the storm is \(ratio)× its baseline")
        for t in storm { while !t.isFinished { usleep(10_000) } }
        try expectServing(daemon, "prefix-storm")
        #expect(daemon.terminate() == 0)
    }

    @Test("64 control clients asking for large replay pages and never reading stay within --control-memory")
    func controlClientsThatNeverRead() throws {
        let budget = 16 << 20
        let daemon = try DaemonProcess(["--control-memory", String(budget)])
        let pid = daemon.process.processIdentifier
        // 3,000 records of about 4 KB: a page of the whole journal would be 4 MiB.
        let pad = String(repeating: "x", count: 4_000)
        let events = (0..<3_000).map {
            #"{"event_id":"big-\#($0)","checkout_id":"big-\#($0)","payload":{"event":"onCheckoutStarted","checkout":{"id":"big-\#($0)","note":"\#(pad)"}}}"#
        }
        #expect(try send(events, to: daemon.ingestAcked, arguments: ["--acked", "--timeout", "60"]).status == 0)
        let before = rssKilobytes(pid)
        let context = try ZMQContext()
        var clients: [ZMQSocket] = []
        for _ in 0..<64 { clients.append(try nonReadingDealer(context, daemon.control)) }
        // Connected before they ask: the pages are sized for all 64.
        let control = try ControlClient(daemon.control)
        for _ in 0..<100 {
            let open = ((try control.stats()["connections"] as? [String: Any])?["control"] as? [String: Any])?["open"] as? Int ?? 0
            if open >= 65 { break }
            usleep(50_000)
        }
        for c in clients {
            for _ in 0..<8 { _ = try c.send(#"{"op":"replay","from":1,"limit":10000}"#, dontWait: true) }
        }
        usleep(2_000_000)
        let grown = rssKilobytes(pid) - before
        let page = ControlService.pageBytes(budget: budget, clients: 65)
        print("control clients that never read: RSS +\(grown) KiB for 64 × 2 pages of at most \(page) bytes")
        #expect(grown < budget / 1024 + 8 * 1024, "RSS grew \(grown) KiB; the replies' budget is \(budget >> 20) MiB")
        // A client that reads gets its pages, smaller while the others are connected.
        let reply = try control.request(#"{"op":"replay","from":1,"limit":10000}"#)
        let bytes = reply.frames.reduce(0) { $0 + $1.count }
        #expect(reply.status["ok"] as? Bool == true && bytes <= page && bytes > 0, "a page of \(bytes) bytes, at most \(page)")
        clients = []
        try expectServing(daemon, "control-never-read")
        #expect(daemon.terminate() == 0)
    }

    @Test("control clients that hold the half of --control-memory for ordinary pages and never read: a client that connects later is still sent its page")
    func controlClientsThatNeverReadDoNotHoldUpALaterReader() throws {
        let budget = 1 << 20
        let daemon = try DaemonProcess(["--control-memory", String(budget)])
        let address = try #require(daemon.ready["metrics"] as? String)
        let pad = String(repeating: "w", count: 4_000)
        let events = (0..<2_000).map {
            #"{"event_id":"w-\#($0)","checkout_id":"w-\#($0)","payload":{"event":"onCheckoutStarted","checkout":{"id":"w-\#($0)","note":"\#(pad)"}}}"#
        }
        #expect(try send(events, to: daemon.ingestAcked, arguments: ["--acked", "--timeout", "60"]).status == 0)
        let context = try ZMQContext()
        var clients: [ZMQSocket] = []
        for _ in 0..<8 { clients.append(try nonReadingDealer(context, daemon.control)) }
        // Pages of ~32 KB (half the budget, 8 clients, 2 pages each): enough of them that the
        // kernel's buffers for each connection fill and 2 stay queued in the daemon.
        for c in clients {
            for _ in 0..<300 { _ = try c.send(#"{"op":"replay","from":1,"limit":10000}"#, dontWait: true) }
        }
        let (requests, busy, queued) = try controlFigures(address, untilRequests: 2_400, tries: 600,
                                                          pauseMilliseconds: 50)
        print("8 clients never reading: \(Int(busy)) of \(Int(requests)) replays answered busy, \(Int(queued)) bytes queued")
        #expect(requests >= 2_400 && busy > 0)
        // The half for pages within a share was full (the busy answers) and is never passed. (How much
        // of it stays queued once the replies stop depends on how much the kernel's buffers for the
        // connections took meanwhile: measured, anything from 0 to all of it, old builds alike.)
        #expect(queued <= Double(budget / 2), "\(Int(queued)) bytes queued")
        // A client that connects now has a share of its own: its page is sent, not answered busy.
        let reply = try ControlClient(daemon.control).request(#"{"op":"replay","from":1,"limit":10000}"#)
        #expect(reply.status["ok"] as? Bool == true && reply.frames.count > 2, "\(reply.status)")
        clients = []
        try expectServing(daemon, "control-never-read-half")
        #expect(daemon.terminate() == 0)
    }

    @Test("large stats replies to clients that never read count in --control-memory; a long req is refused, not echoed")
    func largeStatsRepliesCounted() throws {
        let budget = 4 << 20
        let daemon = try DaemonProcess(["--control-memory", String(budget)])
        let pid = daemon.process.processIdentifier
        let address = try #require(daemon.ready["metrics"] as? String)
        let control = try ControlClient(daemon.control)
        // A long `req` would be repeated by every reply, busy ones included.
        let long = try control.request(#"{"op":"stats","req":"\#(String(repeating: "r", count: 100))"}"#)
        #expect(long.status["ok"] as? Bool == false && long.status["error"] as? String == "bad_request")
        #expect(long.status["req"] == nil, "\(long.status)")
        // 1,024 reported subscribers with long names: each stats reply lists them all (~400 KB).
        let name = String(repeating: "n", count: 180)
        for i in 0..<1_024 {
            _ = try control.request(#"{"op":"report","subscriber":"\#(name)-\#(i)","last_seq":0,"missed":0,"recovered":0,"gaps":0}"#)
        }
        let size = try JSONSerialization.data(withJSONObject: try control.stats()).count
        #expect(size > 200_000, "a stats reply of \(size) bytes")
        let before = anonymousKilobytes(pid)
        let context = try ZMQContext()
        var clients: [ZMQSocket] = []
        for _ in 0..<20 { clients.append(try nonReadingDealer(context, daemon.control)) }
        // Before, each queued 8 such replies beyond what its connection's kernel buffers took (a few
        // MB): 20 × 8 × ~400 KB.
        for c in clients {
            for _ in 0..<40 { _ = try c.send(#"{"op":"stats"}"#, dontWait: true) }
        }
        let (requests, busy, queued) = try controlFigures(address, untilRequests: 1_024 + 2 + 800, tries: 240,
                                                          pauseMilliseconds: 250)
        let grown = anonymousKilobytes(pid) - before
        print("20 clients asking stats of \(size) bytes, never reading: \(Int(busy)) answered busy, \(Int(queued)) bytes "
              + "queued, anonymous memory +\(grown) KiB")
        #expect(requests >= 1_024 + 2 + 800 && busy > 0)
        #expect(queued <= Double(budget + size), "\(Int(queued)) bytes queued")
        #expect(grown < 24 * 1024, "anonymous memory grew \(grown) KiB")
        // `checkoutbus stats` asked now — answered busy while the non-readers' replies hold the
        // budget (how many the kernel's buffers took decides), it asks again (statsAsksAgainAfterBusy)
        // — prints the stats once they leave; before, it exited 1 at the first busy.
        let tool = Process()
        tool.executableURL = Products.url("checkoutbus")
        tool.arguments = ["stats", "--control", daemon.control, "--json", "--timeout", "60"]
        let out = Pipe()
        tool.standardOutput = out
        tool.standardError = out
        try tool.start()
        let reader = PipeLineReader(out.fileHandleForReading)
        usleep(500_000)
        clients = []
        let printed = reader.readAll(timeout: 60).joined(separator: "\n")
        #expect(waitForExit(tool, timeout: 30) == 0, "\(printed.prefix(300))")
        let stats = try JSONSerialization.jsonObject(with: Data((printed.split(separator: "\n").last ?? "").utf8)) as? [String: Any]
        #expect(stats?["ok"] as? Bool == true && (stats?["subscribers"] as? [String: Any])?.count == 1_024,
                "\(printed.prefix(300))")
        try expectServing(daemon, "control-never-read-stats")
        #expect(daemon.terminate() == 0)
    }

    @Test("clients that ask for a large /metrics page and never read share one rendered page: memory does not grow per client")
    func largeMetricsPagesShared() throws {
        let daemon = try DaemonProcess()
        let pid = daemon.process.processIdentifier
        let address = try #require(daemon.ready["metrics"] as? String)
        let port = try #require(UInt16(address.split(separator: ":").last ?? ""))
        let control = try ControlClient(daemon.control)
        // 1,024 reported subscribers with names of 200 bytes: every page lists them all (~1.8 MB).
        let name = String(repeating: "m", count: 190)
        for i in 0..<1_024 {
            _ = try control.request(#"{"op":"report","subscriber":"\#(name)-\#(i)","last_seq":1,"missed":5,"recovered":5,"gaps":1}"#)
        }
        let page = try httpGet(address, "/metrics").body
        #expect(page.utf8.count > 1_000_000, "a page of \(page.utf8.count) bytes")
        let before = anonymousKilobytes(pid)
        let requestsBefore = metric(try httpGet(address, "/metrics").body, "checkoutbus_http_requests_total") ?? 0
        // 100 clients with small receive buffers ask for the page and never read it.
        var fds: [Int32] = []
        defer { for fd in fds { close(fd) } }
        for _ in 0..<100 {
            let c = try tcpConnect(port: port)
            var small: Int32 = 1024
            setsockopt(c, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
            #expect(tcpWrite(c, Array("GET /metrics HTTP/1.1\r\n\r\n".utf8)))
            fds.append(c)
        }
        // Every request counted (each poll counts itself too), then answered within the second a
        // request waits for the pipeline's figures at most.
        var theirs = 0.0
        var polls = 0.0
        for _ in 0..<200 where theirs < 100 {
            polls += 1
            let requests = metric(try httpGet(address, "/metrics").body, "checkoutbus_http_requests_total") ?? 0
            theirs = requests - requestsBefore - polls
            usleep(50_000)
        }
        usleep(1_500_000)
        let grown = anonymousKilobytes(pid) - before
        print("100 clients holding /metrics pages of \(page.utf8.count) bytes unread: anonymous memory +\(grown) KiB")
        #expect(theirs >= 100, "\(Int(theirs)) of their requests counted")
        // Before, each held a copy of its own: 100 × 1.8 MB.
        #expect(grown < 32 * 1024, "anonymous memory grew \(grown) KiB")
        let health = try httpGet(address, "/healthz")
        #expect(health.status == 200, "\(health)")
        for fd in fds { close(fd) }
        fds = []
        try expectServing(daemon, "metrics-never-read")
        #expect(daemon.terminate() == 0)
    }

    @Test("control clients replaying records larger than their share and never reading: the daemon holds --control-memory and one record, answers busy; a reader gets every record once they leave")
    func controlClientsThatNeverReadLargeRecords() throws {
        let budget = 1 << 20
        let daemon = try DaemonProcess(["--control-memory", String(budget)])
        let pid = daemon.process.processIdentifier
        let address = try #require(daemon.ready["metrics"] as? String)
        // Records of ~900 KB: each one larger than any client's share of the budget.
        let pad = String(repeating: "y", count: 900_000)
        let events = (0..<10).map {
            #"{"event_id":"huge-\#($0)","checkout_id":"huge-\#($0)","payload":{"event":"onCheckoutStarted","checkout":{"id":"huge-\#($0)","note":"\#(pad)"}}}"#
        }
        #expect(try send(events, to: daemon.ingestAcked, arguments: ["--acked", "--timeout", "60"]).status == 0)
        let before = anonymousKilobytes(pid)
        let context = try ZMQContext()
        var clients: [ZMQSocket] = []
        for _ in 0..<20 { clients.append(try nonReadingDealer(context, daemon.control)) }
        // Before the bound, each queued 8 pages of one record (what the kernel's buffers for the
        // connection did not take, a few MB): 20 × 8 × ~1 MB.
        for c in clients {
            for _ in 0..<8 { _ = try c.send(#"{"op":"replay","from":1,"limit":10000}"#, dontWait: true) }
        }
        let (requests, busy, queued) = try controlFigures(address, untilRequests: 160, tries: 300,
                                                          pauseMilliseconds: 50)
        let grown = anonymousKilobytes(pid) - before
        print("20 clients replaying 900 KB records, never reading: \(Int(busy)) of \(Int(requests)) answered busy, "
              + "\(Int(queued)) bytes queued, anonymous memory +\(grown) KiB")
        #expect(requests >= 160)
        #expect(busy > 0)
        // The budget, and one record (~900 KB plus its envelope's other members) past it.
        #expect(queued > 0 && queued <= Double(budget + 1_200_000), "\(Int(queued)) bytes queued")
        #expect(grown < 16 * 1024, "anonymous memory grew \(grown) KiB")
        // A subscriber asking now is answered busy, and asks again until the pages are given back.
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("large-records-\(pid).jsonl")
        defer { try? FileManager.default.removeItem(at: file) }
        let recorder = try RecorderProcess(publish: daemon.publish, control: daemon.control, file: file, name: "large")
        usleep(500_000)
        clients = []
        var lines = 0
        for _ in 0..<200 {
            lines = ((try? Data(contentsOf: file)) ?? Data()).reduce(0) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
            if lines >= events.count { break }
            usleep(100_000)
        }
        let summary = try recorder.stop()
        print("the reader: \(lines) records, \(summary)")
        #expect(lines == events.count)
        #expect((summary["replay_busy"] ?? 0) > 0, "\(summary)")
        var drained = -1.0
        for _ in 0..<100 {
            drained = metric(try httpGet(address, "/metrics").body, "checkoutbus_replay_bytes_queued") ?? -1
            if drained == 0 { break }
            usleep(50_000)
        }
        #expect(drained == 0, "pages still counted after every client left or read them")
        try expectServing(daemon, "control-never-read-large")
        #expect(daemon.terminate() == 0)
    }
}

/// Polls the daemon's `/metrics` until it has served `n` control requests (or `tries` polls pass):
/// the requests, the replays and stats answered busy, and the bytes of replies queued.
func controlFigures(_ address: String, untilRequests n: Int, tries: Int, pauseMilliseconds: UInt32) throws
    -> (requests: Double, busy: Double, queued: Double)
{
    var figures = (requests: 0.0, busy: 0.0, queued: 0.0)
    for _ in 0..<tries {
        let text = try httpGet(address, "/metrics").body
        figures = (metric(text, "checkoutbus_control_requests_total") ?? 0, metric(text, "checkoutbus_replay_busy_total") ?? 0,
                   metric(text, "checkoutbus_replay_bytes_queued") ?? 0)
        if figures.requests >= Double(n) { break }
        usleep(pauseMilliseconds * 1000)
    }
    return figures
}

/// Live latency (µs) of `count` start events pushed one at a time to `daemon.ingest`, each timed
/// until it arrives on the publish socket.
func liveLatencies(_ daemon: DaemonProcess, count: Int, tag: String) throws -> [Double] {
    let context = try ZMQContext()
    let sub = try ZMQSocket(context: context, type: .sub)
    try sub.setLinger(milliseconds: 0)
    try sub.setOption(.receiveTimeout, 10_000)
    try sub.subscribe("checkout.start")
    try sub.subscribe("bus.heartbeat")
    try sub.connect(daemon.publish)
    // Synchronised on the heartbeat that answers the subscription, not on a sleep.
    while let frames = try sub.receiveMultipart(), frames.first != Array("bus.heartbeat".utf8) {}
    let push = try ZMQSocket(context: context, type: .push)
    try push.setLinger(milliseconds: 1000)
    try push.connect(daemon.ingest)
    var out: [Double] = []
    for i in 0..<count {
        let id = "lat-\(tag)-\(i)"
        let started = DispatchTime.now().uptimeNanoseconds
        _ = try push.send(#"{"event_id":"\#(id)","checkout_id":"\#(id)","payload":{"event":"onCheckoutStarted"}}"#)
        while true {
            guard let frames = try sub.receiveMultipart() else { throw HarnessError("no envelope for \(id)") }
            if frames.first == Array("checkout.start".utf8), String(decoding: frames.last ?? [], as: UTF8.self).contains(id) { break }
        }
        out.append(Double(DispatchTime.now().uptimeNanoseconds - started) / 1000)
    }
    return out.sorted()
}

/// A raw ZMTP 3.0 peer's handshake with the NULL mechanism (rfc.zeromq.org/spec/23), for clients
/// that misbehave below what libzmq lets a socket do.
enum ZMTP {
    /// The 64-byte greeting: signature, version 3.0, mechanism NULL, as-server 0.
    static let nullGreeting: [UInt8] = [0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F, 3, 0] + Array("NULL".utf8)
        + [UInt8](repeating: 0, count: 16) + [0] + [UInt8](repeating: 0, count: 31)

    /// The READY command frame with a `Socket-Type` property.
    static func ready(socketType: String) -> [UInt8] {
        let body: [UInt8] = [5] + Array("READY".utf8) + [11] + Array("Socket-Type".utf8)
            + [0, 0, 0, UInt8(socketType.utf8.count)] + Array(socketType.utf8)
        return [0x04, UInt8(body.count)] + body
    }
}
