import CheckoutBusDaemon
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The second round of hostile clients (docs/security.md, "Limits"): each one over the wire
/// against the real daemon, which must then still serve and exit 0.
@Suite("every client bounded, round two", .serialized, .timeLimit(.minutes(5)))
struct BoundedClientsTests {
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
}
