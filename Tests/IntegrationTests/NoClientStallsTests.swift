import CheckoutBusClient
import CheckoutBusDaemon
import CheckoutBusLoad
import CheckoutBusTools
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime
import Foundation
import Testing
import ZeroMQ

#if canImport(Glibc)
import Glibc
#endif

/// A TCP connection to `127.0.0.1:port`, from `127.0.0.<source>` when given (each source address
/// has ports of its own, so tens of thousands of connections do not exhaust the ephemeral range).
func tcpConnect(port: UInt16, source: UInt8? = nil) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw HarnessError("socket: \(String(cString: strerror(errno)))") }
    func address(_ host: String, _ port: UInt16) -> sockaddr_in {
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = port.bigEndian
        inet_pton(AF_INET, host, &a.sin_addr)
        return a
    }
    if let source {
        var local = address("127.0.0.\(source)", 0)
        _ = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }
    var remote = address("127.0.0.1", port)
    let rc = withUnsafePointer(to: &remote) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard rc == 0 else {
        let e = errno
        close(fd)
        throw HarnessError("connect to port \(port): \(String(cString: strerror(e)))")
    }
    return fd
}

/// Writes all of `bytes` (MSG_NOSIGNAL: a closed peer is an error, not a signal).
@discardableResult
func tcpWrite(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
    var sent = 0
    while sent < bytes.count {
        let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
        if n <= 0 { return false }
        sent += n
    }
    return true
}

/// Reads until EOF or `timeout` seconds; nil when nothing came before a timeout.
func tcpReadAll(_ fd: Int32, timeout: Double) -> [UInt8]? {
    let deadline = Date().addingTimeInterval(timeout)
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let remaining = deadline.timeIntervalSinceNow
        if remaining <= 0 { return out.isEmpty ? nil : out }
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        if poll(&pfd, 1, Int32(remaining * 1000) + 1) <= 0 { continue }
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n <= 0 { return out }
        out.append(contentsOf: buffer[0..<n])
    }
}

/// The port of a `HOST:PORT` address.
func port(of address: String) throws -> UInt16 {
    try #require(address.split(separator: ":").last.flatMap { UInt16($0) })
}

/// Raises this process's open-file limit to its hard limit; returns the new soft limit.
func raiseFileLimit() -> Int {
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    limit.rlim_cur = limit.rlim_max
    setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    return Int(limit.rlim_cur)
}

/// The open file descriptors of process `pid`.
func openDescriptors(_ pid: Int32) -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
}

/// A DEALER connected to `endpoint` that never reads: one message in its receive queue and a small
/// kernel buffer, so what the daemon sends it piles up on the daemon's side.
func nonReadingDealer(_ context: ZMQContext, _ endpoint: String, receiveBuffer: Int32 = 4096) throws -> ZMQSocket {
    let socket = try ZMQSocket(context: context, type: .dealer)
    try socket.setLinger(milliseconds: 0)
    try socket.setOption(.receiveHighWaterMark, 1)
    try socket.setOption(.receiveBuffer, receiveBuffer)
    try socket.connect(endpoint)
    return socket
}

func rssKilobytes(_ pid: Int32) -> Int { statusKilobytes(pid, "VmRSS:") }

/// The process's anonymous memory (`RssAnon`): what it allocated, without the journal's pages it maps.
func anonymousKilobytes(_ pid: Int32) -> Int { statusKilobytes(pid, "RssAnon:") }

/// A figure in KiB from `/proc/<pid>/status` (`field` with its colon), 0 when it cannot be read.
func statusKilobytes(_ pid: Int32, _ field: String) -> Int {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
    for line in text.split(separator: "\n") where line.hasPrefix(field) {
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }
    return 0
}

/// After a misbehaving client: the daemon still ingests and acknowledges, publishes, answers the
/// control socket and `/healthz`. (Each test then checks it exits 0 on SIGTERM.)
func expectServing(_ daemon: DaemonProcess, _ tag: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let tail = try TailProcess(from: daemon.publish, topics: ["checkout.start"], count: 1, timeout: 20)
    let event = #"{"event_id":"serving-\#(tag)","checkout_id":"serving-\#(tag)","payload":{"event":"onCheckoutStarted"}}"#
    let acked = try send([event], to: daemon.ingestAcked, arguments: ["--acked", "--timeout", "10"])
    #expect(acked.status == 0, "acknowledged ingest after \(tag): \(acked.stderr)", sourceLocation: sourceLocation)
    let published = try tail.envelopes(timeout: 20)
    #expect(published.first?["checkout_id"] as? String == "serving-\(tag)", "published after \(tag)",
            sourceLocation: sourceLocation)
    let stats = try ControlClient(daemon.control).stats()
    #expect(stats["ok"] as? Bool == true, "control after \(tag)", sourceLocation: sourceLocation)
    let address = try #require(daemon.ready["metrics"] as? String, sourceLocation: sourceLocation)
    let health = try httpGet(address, "/healthz")
    #expect(health.status == 200, "/healthz after \(tag): \(health.body)", sourceLocation: sourceLocation)
}

@Suite("no client can stall the bus", .serialized, .timeLimit(.minutes(4)))
struct NoClientStallsTests {
    @Test("HTTP clients that close early, reset, send junk or nothing: the daemon serves on and exits 0")
    func earlyClosingHTTPClients() throws {
        let daemon = try DaemonProcess()
        let address = try #require(daemon.ready["metrics"] as? String)
        let p = try port(of: address)
        // The test's own connections to the port, left out of the counts: each scrape below (it is
        // counted before it is answered) and expectServing's /healthz.
        var own = 0
        // Of the early-closing connections, how many the daemon has taken from its accept queue:
        // accepted, or refused with a 503 when 128 connections were open and none could make room.
        func taken() throws -> Double {
            own += 1
            let body = try httpGet(address, "/metrics").body
            let accepted = metric(body, "checkoutbus_http_connections_total{outcome=\"accepted\"}") ?? 0
            let refused = metric(body, "checkoutbus_http_connections_total{outcome=\"refused\"}") ?? 0
            return accepted + refused - Double(own)
        }
        // The HTTP thread takes them from its accept queue in turns with the scrapes: on a busy host
        // the count gets there a little after them, so it is read until it does (or 30 s).
        func waitTaken(_ n: Int) throws -> Double {
            let deadline = BusClock.monotonicNanoseconds() + 30_000_000_000
            var t = 0.0
            repeat {
                t = try taken()
                if t >= Double(n) { break }
                usleep(20_000)
            } while BusClock.monotonicNanoseconds() < deadline
            return t
        }
        for i in 0..<800 {
            let fd = try tcpConnect(port: p)
            switch i % 4 {
            case 0:
                // The issue's client: a request, then gone before the answer.
                tcpWrite(fd, Array("GET /healthz HTTP/1.0\r\n\r\n".utf8))
            case 1:
                // A reset (SO_LINGER 0) right after a scrape request.
                tcpWrite(fd, Array("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
                var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
            case 2:
                tcpWrite(fd, (0..<512).map { UInt8(truncatingIfNeeded: $0 &* 7919 &+ i) })
            default:
                break  // connect and close
            }
            close(fd)
            // In waves of 100, each taken before the next is sent: in one clean-clone run on a
            // loaded host, 99 of 800 sent in one burst were never counted (connections the kernel
            // may drop from a crowded accept queue never reach the daemon); none pile up now.
            if (i + 1) % 100 == 0 {
                let t = try waitTaken(i + 1)
                #expect(t >= Double(i + 1), "after \(i + 1) early-closing clients, \(t) taken")
            }
        }
        try expectServing(daemon, "early-close")
        own += 1  // expectServing's /healthz
        let early = try waitTaken(800)
        #expect(early >= 800, "the early-closing clients' connections accepted or refused (the test's own \(own) left out)")
        #expect(daemon.terminate() == 0)
    }

    @Test("20,000 idle connections to the metrics port: the oldest make room, health checks pass, descriptors stay bounded")
    func idleConnections() throws {
        let limit = raiseFileLimit()
        let daemon = try DaemonProcess()
        let address = try #require(daemon.ready["metrics"] as? String)
        let p = try port(of: address)
        // Headroom for the descriptors the tests running beside this one hold in this process.
        let wanted = min(20_000, limit - 2_000)
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        let t0 = Date()
        for i in 0..<wanted { held.append(try tcpConnect(port: p, source: UInt8(2 + i % 32))) }
        // Still held by this process; the daemon keeps at most its cap of them.
        let pid = daemon.process.processIdentifier
        let descriptors = openDescriptors(pid)
        print("idle connections: \(held.count) held open by the test (connected in \(Date().timeIntervalSince(t0)) s); the daemon has \(descriptors) descriptors")
        #expect(descriptors < 1000)
        for _ in 0..<5 {
            let health = try httpGet(address, "/healthz")
            #expect(health.status == 200)
        }
        try expectServing(daemon, "idle")
        let metrics = try httpGet(address, "/metrics").body
        // Each newcomer past the cap took the place of one silent 100 ms or more, or was told 503.
        let evicted = metric(metrics, "checkoutbus_http_connections_total{outcome=\"evicted\"}") ?? 0
        let refused = metric(metrics, "checkoutbus_http_connections_total{outcome=\"refused\"}") ?? 0
        #expect(evicted + refused >= Double(wanted - 200))
        #expect(evicted > 0)
        #expect((metric(metrics, "checkoutbus_http_connections_open") ?? 1000) <= 128)
        #expect(daemon.terminate() == 0)
    }

    @Test("request heads split across TCP segments, 100 pending at once, are all answered 200; past the cap never a wrong answer")
    func splitHeads() throws {
        let daemon = try DaemonProcess()
        let address = try #require(daemon.ready["metrics"] as? String)
        let p = try port(of: address)
        for (count, mustAnswerAll) in [(100, true), (400, false)] {
            let fds = try (0..<count).map { _ in try tcpConnect(port: p) }
            defer { for fd in fds { close(fd) } }
            var nodelay: Int32 = 1
            for fd in fds {
                setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &nodelay, socklen_t(MemoryLayout<Int32>.size))
                tcpWrite(fd, Array("GET /heal".utf8))
            }
            usleep(100_000)
            for fd in fds { tcpWrite(fd, Array("thz HTTP/1.1\r\nHost: x\r\n\r\n".utf8)) }
            var ok = 0
            for fd in fds {
                let text = String(decoding: tcpReadAll(fd, timeout: 10) ?? [], as: UTF8.self)
                if text.hasPrefix("HTTP/1.1 200") {
                    ok += 1
                } else {
                    // Made room for newer connections (closed without an answer), or told the
                    // endpoint is full: never a wrong answer.
                    #expect(text.isEmpty || text.hasPrefix("HTTP/1.1 503"), "a split head got: \(text.prefix(40))")
                }
            }
            print("split heads: \(ok) of \(count) answered 200")
            if mustAnswerAll { #expect(ok == count) } else { #expect(ok >= 128) }
        }
        try expectServing(daemon, "split-heads")
        #expect(daemon.terminate() == 0)
    }

    @Test("a client that sends its head a byte at a time is cut off after the request timeout")
    func slowHead() throws {
        let daemon = try DaemonProcess()
        let address = try #require(daemon.ready["metrics"] as? String)
        let fd = try tcpConnect(port: try port(of: address))
        defer { close(fd) }
        let started = Date()
        var cutOff = false
        for byte in Array("GET /metrics HTTP/1.1\r\nX-Slow: ".utf8) + [UInt8](repeating: 0x61, count: 200) {
            if !tcpWrite(fd, [byte]) {
                cutOff = true
                break
            }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&pfd, 1, 250) > 0 {
                // The daemon closed it (EOF, no answer).
                var b: UInt8 = 0
                cutOff = recv(fd, &b, 1, 0) <= 0
                break
            }
        }
        let seconds = Date().timeIntervalSince(started)
        print("slow head: cut off after \(seconds) s")
        #expect(cutOff)
        #expect(seconds < 30)
        let metrics = try httpGet(address, "/metrics").body
        #expect((metric(metrics, "checkoutbus_http_connections_total{outcome=\"timed_out\"}") ?? 0) >= 1)
        try expectServing(daemon, "slow-head")
        #expect(daemon.terminate() == 0)
    }

    @Test("a frame declared 512 MiB is refused as its size arrives: the producer is cut off, the daemon does not grow")
    func oversizedFrame() throws {
        let daemon = try DaemonProcess()
        let pid = daemon.process.processIdentifier
        let before = rssKilobytes(pid)
        let ingestPort = try #require(daemon.ingest.split(separator: ":").last.flatMap { UInt16($0) })
        let fd = try tcpConnect(port: ingestPort)
        defer { close(fd) }
        // ZMTP 3.0 as a PUSH peer with the NULL mechanism (rfc.zeromq.org/spec/23): greeting, READY.
        #expect(tcpWrite(fd, ZMTP.nullGreeting + ZMTP.ready(socketType: "PUSH")))
        // A long frame of 512 MiB, then up to half of it.
        var header: [UInt8] = [0x02]
        for shift in stride(from: 56, through: 0, by: -8) { header.append(UInt8(truncatingIfNeeded: (512 << 20) >> shift)) }
        var written = 0
        if tcpWrite(fd, header) {
            let chunk = [UInt8](repeating: 0x78, count: 1 << 20)
            while written < 256 << 20, tcpWrite(fd, chunk) { written += chunk.count }
        }
        let after = rssKilobytes(pid)
        print("512 MiB frame: \(written >> 20) MiB written before the daemon cut the connection; RSS \(before) → \(after) kB")
        #expect(written < 64 << 20)
        #expect(after - before < 64 * 1024)
        // And a message just over the wire limit through libzmq: cut off too, counted.
        let context = try ZMQContext()
        let push = try ZMQSocket(context: context, type: .push)
        try push.setLinger(milliseconds: 0)
        try push.connect(daemon.ingest)
        _ = try push.send([UInt8](repeating: 0x7B, count: 5 << 20))
        var closed = 0
        for _ in 0..<100 {
            let stats = try ControlClient(daemon.control).stats()
            let connections = stats["connections"] as? [String: Any]
            closed = (connections?["ingest"] as? [String: Any])?["disconnected"] as? Int ?? 0
            if closed >= 2 { break }
            usleep(100_000)
        }
        #expect(closed >= 2, "both connections over the limit are counted as closed")
        let metrics = try httpGet(try #require(daemon.ready["metrics"] as? String), "/metrics").body
        #expect((metric(metrics, "checkoutbus_connections_closed_total{socket=\"ingest\"}") ?? 0) >= 2)
        try expectServing(daemon, "oversized")
        #expect(daemon.terminate() == 0)
    }

    @Test("connection churn on every ZeroMQ port during a replay storm: counted, never blocking libzmq; SIGTERM exits 0")
    func connectionChurn() throws {
        let daemon = try DaemonProcess()
        let fill = try floodReport(["--to", daemon.ingest, "--from", daemon.publish, "--checkouts", "2000", "--count", "10000"])
        #expect(fill["sent"] as? Int == 10_000)
        // The control thread reads the monitors between replay pages: keep it busy meanwhile.
        let storm = ClientStorm(control: daemon.control, metrics: nil, replayClients: 4, scrapers: 0)
        let ports = try [daemon.ingest, daemon.ingestAcked, daemon.publish, daemon.control].map {
            try #require($0.split(separator: ":").last.flatMap { UInt16($0) })
        }
        for i in 0..<3000 {
            let fd = try tcpConnect(port: ports[i % ports.count], source: UInt8(2 + i % 16))
            if i % 3 == 0 { tcpWrite(fd, [0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F]) }  // half a greeting
            close(fd)
        }
        let tally = storm.stop()
        #expect(tally.pages > 0)
        var accepted = 0
        for _ in 0..<100 {
            let connections = try ControlClient(daemon.control).stats()["connections"] as? [String: Any] ?? [:]
            accepted = ["ingest", "ingest_acked", "publish", "control"].reduce(0) {
                $0 + ((connections[$1] as? [String: Any])?["accepted"] as? Int ?? 0)
            }
            if accepted >= 3000 { break }
            usleep(100_000)
        }
        print("connection churn: \(accepted) connections accepted and counted, \(tally.pages) replay pages meanwhile")
        #expect(accepted >= 3000)
        try expectServing(daemon, "churn")
        #expect(daemon.terminate() == 0)
    }

    @Test("a control client that sends and never reads loses its own replies, counted; other clients are answered")
    func controlClientNotReading() throws {
        let daemon = try DaemonProcess()
        // Something to replay: pages of ~4 MiB each.
        let fill = try floodReport(["--to", daemon.ingest, "--from", daemon.publish, "--checkouts", "3000", "--count", "15000"])
        #expect(fill["sent"] as? Int == 15_000)
        let context = try ZMQContext()
        let greedy = try nonReadingDealer(context, daemon.control, receiveBuffer: 65536)
        for _ in 0..<300 { _ = try greedy.send(#"{"op":"replay","from":1,"limit":10000}"#) }
        var dropped = 0
        for _ in 0..<200 {
            let stats = try ControlClient(daemon.control).stats()
            dropped = (stats["connections"] as? [String: Any])?["control_replies_dropped"] as? Int ?? 0
            if dropped > 0 { break }
            usleep(100_000)
        }
        print("control: \(dropped) replies to the client that does not read were dropped")
        #expect(dropped > 0)
        try expectServing(daemon, "greedy-control")
        #expect(daemon.terminate() == 0)
    }

    @Test("an acknowledged producer that never reads: past 100,000 unread acknowledgements dropped, counted; serving on")
    func ackedProducerNotReading() throws {
        let daemon = try DaemonProcess()
        let address = try #require(daemon.ready["metrics"] as? String)
        let context = try ZMQContext()
        let greedy = try nonReadingDealer(context, daemon.ingestAcked)
        let before = rssKilobytes(daemon.process.processIdentifier)
        // More than the 100,000 the daemon queues for one producer (before, a million could queue).
        let events = 120_000
        for i in 0..<events {
            let event = #"{"event_id":"greedy-\#(i)","checkout_id":"greedy-\#(i % 500)","payload":{"event":"onCheckoutUpdated","checkout":{"id":"greedy-\#(i % 500)","n":\#(i)}}}"#
            _ = try greedy.send(event)
        }
        var dropped = 0.0
        for _ in 0..<300 {
            dropped = metric(try httpGet(address, "/metrics").body, "checkoutbus_ack_replies_dropped_total") ?? 0
            if dropped > 0 { break }
            usleep(100_000)
        }
        let grown = rssKilobytes(daemon.process.processIdentifier) - before
        print("acked: \(Int(dropped)) acknowledgements to the producer that does not read dropped; daemon grew \(grown) KiB")
        #expect(dropped > 0)
        // Every event was taken (the acknowledgements only were dropped), and published before the
        // check below listens for its own.
        var lastSeq = 0
        for _ in 0..<600 {
            lastSeq = try ControlClient(daemon.control).stats()["last_seq"] as? Int ?? 0
            if lastSeq >= events { break }
            usleep(100_000)
        }
        #expect(lastSeq == events)
        try expectServing(daemon, "greedy-acked")
        #expect(daemon.terminate() == 0)
    }

    @Test("replay and metrics storms: live p99 no worse than the same storm on a twin daemon with a copy of the journal")
    func stormsAgainstTwin() throws {
        let first = try DaemonProcess()
        let fill = try floodReport(["--to", first.ingest, "--from", first.publish, "--checkouts", "8000", "--count", "40000"])
        #expect(fill["sent"] as? Int == 40_000)
        #expect(first.terminate() == 0)
        let twinDirectory = first.dataDirectory.deletingLastPathComponent().appendingPathComponent("twin")
        try FileManager.default.copyItem(at: first.dataDirectory, to: twinDirectory)
        let bus = try DaemonProcess(dataDirectory: first.dataDirectory)
        let twin = try DaemonProcess(dataDirectory: twinDirectory)
        func liveP99() throws -> Double {
            let r = try floodReport(["--to", bus.ingest, "--from", bus.publish, "--rate", "5000", "--duration", "2",
                                     "--checkouts", "20000", "--seed", String(Int.random(in: 1...1_000_000))])
            return ((r["latency_us"] as? [String: Any])?["p99"] as? NSNumber)?.doubleValue ?? .infinity
        }
        let quiet = try liveP99()
        for (kind, replayers, scrapers) in [("replay", 4, 0), ("metrics", 0, 4)] {
            var onTwin: [Double] = []
            var onBus: [Double] = []
            // Alternating, seven each: medians, so an unlucky few seconds on this shared host decide
            // nothing (runs of the build before this one too showed two or three rounds in a row at
            // 15–80 ms, on the twin and on this daemon alike).
            for _ in 0..<7 {
                for target in [twin, bus] {
                    let storm = ClientStorm(control: target.control, metrics: target.ready["metrics"] as? String,
                                            replayClients: replayers, scrapers: scrapers)
                    let p99 = try liveP99()
                    let tally = storm.stop()
                    #expect(tally.pages + tally.scrapes > 0, "the \(kind) storm ran")
                    if target === twin { onTwin.append(p99) } else { onBus.append(p99) }
                }
            }
            let t = onTwin.sorted()[3]
            let b = onBus.sorted()[3]
            print("\(kind) storm: live p99 at 5000/s without a storm \(quiet) µs; storm on the twin \(onTwin) µs (median \(t)); storm on this daemon \(onBus) µs (median \(b)); ratio \(b / t)")
            // The storm on this daemon costs it about what the CPU it takes from the machine costs
            // (what the twin shows). Before the control thread, a replay storm made it 14–19x; in
            // this debug build, beside the rest of the suite, single runs have measured up to 4.5x,
            // so the bound is 6x: a guard against pages on the pipeline thread, not a benchmark
            // (`checkoutbus bench abuse` measures the release build).
            #expect(b <= 6 * t, "\(kind) storm: p99 \(b) µs on this daemon against \(t) µs with the storm on its twin")
        }
        try expectServing(bus, "storms")
        #expect(bus.terminate() == 0)
        #expect(twin.terminate() == 0)
    }

    @Test("a retry of a dead-lettered event id is a duplicate of that dead letter, also after kill -9; a corrected event under the id is published; the id on another checkout or failing another way is a dead letter of its own")
    func deadLetteredRetry() throws {
        let daemon = try DaemonProcess()
        let context = try ZMQContext()
        func ask(_ endpoint: String, _ event: String) throws -> [String: Any] {
            let dealer = try ZMQSocket(context: context, type: .dealer)
            try dealer.setLinger(milliseconds: 0)
            try dealer.setOption(.receiveTimeout, 10_000)
            try dealer.connect(endpoint)
            _ = try dealer.send(event)
            let frames = try #require(try dealer.receiveMultipart())
            return try #require(try JSONSerialization.jsonObject(with: Data(frames.last!)) as? [String: Any])
        }
        let bad = #"{"event_id":"dl-1","checkout_id":"dl-c","payload":{"event":"onCheckoutExploded"}}"#
        let first = try ask(daemon.ingestAcked, bad)
        #expect(first["ok"] as? Bool == false)
        #expect(first["reason"] as? String == "unknown_event")
        let seq = try #require(first["seq"] as? Int)
        let retry = try ask(daemon.ingestAcked, bad)
        #expect(retry["duplicate"] as? Bool == true)
        #expect(retry["seq"] as? Int == seq)
        #expect(retry["reason"] as? String == "unknown_event")
        #expect(retry["ok"] as? Bool == false)
        daemon.kill9()
        let restarted = try DaemonProcess(dataDirectory: daemon.dataDirectory)
        let afterRestart = try ask(restarted.ingestAcked, bad)
        #expect(afterRestart["duplicate"] as? Bool == true)
        #expect(afterRestart["seq"] as? Int == seq)
        // The same id on an event that decodes: the event that was meant, published once.
        let fixed = #"{"event_id":"dl-1","checkout_id":"dl-c","payload":{"event":"onCheckoutStarted"}}"#
        let published = try ask(restarted.ingestAcked, fixed)
        #expect(published["ok"] as? Bool == true)
        #expect(published["duplicate"] == nil)
        // The same id on another checkout (producers that number each checkout's events from 1), and
        // on the first checkout failing another way: each a dead letter of its own, none a duplicate.
        let other = try ask(restarted.ingestAcked, #"{"event_id":"dl-1","checkout_id":"dl-d","payload":{"event":"onCheckoutExploded"}}"#)
        #expect(other["ok"] as? Bool == false && other["reason"] as? String == "unknown_event" && other["duplicate"] == nil,
                "\(other)")
        let otherWayEvent = #"{"event_id":"dl-1","checkout_id":"dl-d","payload":"{not json"}"#
        let otherWay = try ask(restarted.ingestAcked, otherWayEvent)
        #expect(otherWay["reason"] as? String == "invalid_embedded_json" && otherWay["duplicate"] == nil, "\(otherWay)")
        // Each way it failed is remembered: retried, either is a duplicate of its own dead letter.
        let otherWayAgain = try ask(restarted.ingestAcked, otherWayEvent)
        #expect(otherWayAgain["duplicate"] as? Bool == true && otherWayAgain["seq"] as? Int == otherWay["seq"] as? Int,
                "\(otherWayAgain)")
        // A checkout whose id spells what once named dead letters' keys is a checkout like any other.
        let crafted = try ask(restarted.ingestAcked, #"{"event_id":"dl-1","checkout_id":"\u0001deadletter\u0001dl-d","payload":{"event":"checkoutDidComplete","orderDetails":{"id":"crafted-order"}}}"#)
        #expect(crafted["ok"] as? Bool == true && crafted["duplicate"] == nil, "\(crafted)")
        let control = try ControlClient(restarted.control)
        let deadLetters = try control.replayAll(prefixes: ["bus.deadletter"])
        #expect(deadLetters.count == 3, "one dead letter for three sends of the bad event, one each for the others")
        let letters = try deadLetters.map { try #require(try JSONSerialization.jsonObject(with: Data($0.bytes)) as? [String: Any]) }
        #expect(letters.map { $0["event_id"] as? String } == ["dl-1", "dl-1", "dl-1"])
        #expect(letters.map { $0["checkout_id"] as? String } == ["dl-c", "dl-d", "dl-d"])
        #expect(letters.map { $0["reason"] as? String } == ["unknown_event", "unknown_event", "invalid_embedded_json"])
        let counters = try control.stats()["counters"] as? [String: Any]
        #expect(counters?["duplicates"] as? Int == 2, "the retry after the restart, and the other way's retry")
        #expect(restarted.terminate() == 0)
        // After another restart, the other checkout's retry is a duplicate of its own dead letter.
        let again = try DaemonProcess(dataDirectory: daemon.dataDirectory)
        let retried = try ask(again.ingestAcked, #"{"event_id":"dl-1","checkout_id":"dl-d","payload":{"event":"onCheckoutExploded"}}"#)
        #expect(retried["duplicate"] as? Bool == true && retried["seq"] as? Int == other["seq"] as? Int, "\(retried)")
        let retriedOtherWay = try ask(again.ingestAcked, otherWayEvent)
        #expect(retriedOtherWay["duplicate"] as? Bool == true && retriedOtherWay["seq"] as? Int == otherWay["seq"] as? Int,
                "\(retriedOtherWay)")
        #expect(again.terminate() == 0)
    }
}
