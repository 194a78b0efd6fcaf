import Foundation
import Testing

/// A plain HTTP/1.1 GET over a TCP socket (what curl or a Prometheus scraper sends). With
/// `version` "1.0" the server closes the connection after one unchunked answer, and any HTTP/1.x
/// status line is taken (Prometheus's API); with "1.1" (the daemon, which closes by itself) the
/// answer must be HTTP/1.1.
func httpGet(_ address: String, _ path: String, method: String = "GET", version: String = "1.1") throws
    -> (status: Int, body: String)
{
    let colon = try #require(address.lastIndex(of: ":"))
    let host = String(address[..<colon])
    let port = try #require(UInt16(address[address.index(after: colon)...]))
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw HarnessError("socket failed") }
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = port.bigEndian
    inet_pton(AF_INET, host, &addr.sin_addr)
    let connected = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { throw HarnessError("cannot connect to \(address)") }
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    let request = Array("\(method) \(path) HTTP/\(version)\r\nHost: \(address)\r\nUser-Agent: test\r\n\r\n".utf8)
    _ = request.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    var response: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n <= 0 { break }
        response.append(contentsOf: buffer[0..<n])
    }
    let text = String(decoding: response, as: UTF8.self)
    guard let statusLine = text.split(separator: "\r\n").first, statusLine.hasPrefix(version == "1.1" ? "HTTP/1.1 " : "HTTP/1."),
        let status = Int(statusLine.dropFirst(9).prefix(3))
    else { throw HarnessError("not an HTTP response: \(text.prefix(200))") }
    let body = text.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
    return (status, body)
}

/// The value of one sample line (`name{labels} value`) in Prometheus text, if present.
func metric(_ text: String, _ sample: String) -> Double? {
    for line in text.split(separator: "\n") where line.hasPrefix(sample + " ") {
        return Double(line.dropFirst(sample.count + 1))
    }
    return nil
}

@Suite("metrics and health over HTTP", .serialized, .timeLimit(.minutes(4)))
struct MetricsTests {
    @Test("/metrics shows every counter, and they move under traffic; /healthz; 404 and 405")
    func metricsMove() throws {
        let daemon = try DaemonProcess()
        let address = try #require(daemon.ready["metrics"] as? String)
        let before = try httpGet(address, "/metrics")
        #expect(before.status == 200)
        for name in [
            "checkoutbus_events_received_total{family=\"ecp\"}", "checkoutbus_events_published_total{kind=\"complete\"}",
            "checkoutbus_events_suppressed_total", "checkoutbus_deadletters_total{reason=\"not_lifecycle\"}",
            "checkoutbus_journal_bytes", "checkoutbus_journal_fsyncs_total", "checkoutbus_tracked_checkouts",
            "checkoutbus_pipeline_latency_seconds_count", "checkoutbus_journal_fsync_seconds_count", "checkoutbus_last_seq",
        ] {
            #expect(metric(before.body, name) != nil, "\(name) is exported")
        }
        #expect(before.body.contains("# TYPE checkoutbus_pipeline_latency_seconds histogram"))
        #expect(metric(before.body, "checkoutbus_last_seq") == 0)

        let tour = try String(contentsOf: Products.repositoryRoot.appendingPathComponent("samples/tour.jsonl"), encoding: .utf8)
        #expect(try sendBytes(Array(tour.utf8), to: daemon.ingestAcked, arguments: ["--acked"]).status == 1)
        let control = try ControlClient(daemon.control)
        _ = try control.request(#"{"op":"report","subscriber":"slow-1","missed":7,"recovered":7,"gaps":1}"#)
        _ = try control.request(#"{"op":"report","subscriber":"current-1","last_seq":12}"#)
        let after = try httpGet(address, "/metrics").body
        #expect(metric(after, "checkoutbus_last_seq") == 12)
        #expect(metric(after, "checkoutbus_events_published_total{kind=\"complete\"}") == 3)
        #expect(metric(after, "checkoutbus_events_published_total{kind=\"fail\"}") == 4)
        #expect(metric(after, "checkoutbus_events_suppressed_total") == 1)
        #expect(metric(after, "checkoutbus_deadletters_total{reason=\"not_lifecycle\"}") == 1)
        #expect(metric(after, "checkoutbus_events_received_total{family=\"primer\"}") == 2)
        #expect(metric(after, "checkoutbus_pipeline_latency_seconds_count") == 12)
        #expect((metric(after, "checkoutbus_journal_bytes") ?? 0) > (metric(before.body, "checkoutbus_journal_bytes") ?? 0))
        #expect((metric(after, "checkoutbus_journal_fsyncs_total") ?? 0) >= 1)
        #expect(metric(after, "checkoutbus_subscriber_hwm_drops_total{subscriber=\"slow-1\"}") == 7)
        // slow-1 reported no last_seq (0): all 12 published envelopes are ahead of it.
        #expect(metric(after, "checkoutbus_subscriber_lag{subscriber=\"slow-1\"}") == 12)
        #expect(metric(after, "checkoutbus_subscriber_lag{subscriber=\"current-1\"}") == 0)
        // The tour's four failures by stable code.
        #expect(metric(after, "checkoutbus_failures_total{code=\"cart_expired\"}") == 2)
        #expect(metric(after, "checkoutbus_failures_total{code=\"network_error\"}") == 1)
        #expect(metric(after, "checkoutbus_failures_total{code=\"payment_failed\"}") == 1)
        #expect(metric(after, "checkoutbus_failures_total{code=\"unknown\"}") == 0)
        // tour-1, legacy-7, legacy-8, and-3, ios-4, primer-5
        #expect(metric(after, "checkoutbus_tracked_checkouts") == 6)
        // Six checkouts' entries (41 bytes each) and an index of 16 slots at least; well under a page.
        let stateBytes = metric(after, "checkoutbus_state_bytes") ?? 0
        #expect(stateBytes >= Double(6 * 41 + 16 * 4))
        #expect(stateBytes < 4096)

        let stats = try runTool("checkoutbus", ["stats", "--control", daemon.control])
        #expect(stats.status == 0)
        #expect(stats.output.contains("complete 3"))
        #expect(stats.output.contains("not_lifecycle 1"))
        #expect(stats.output.contains("subscriber slow-1"))
        #expect(stats.output.contains("missed 7"))
        let statsJSON = try runTool("checkoutbus", ["stats", "--control", daemon.control, "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(statsJSON.output.utf8)) as? [String: Any]
        #expect(object?["last_seq"] as? Int == 12)

        let health = try httpGet(address, "/healthz")
        #expect(health.status == 200)
        #expect(health.body.contains("\"status\":\"ok\""))
        #expect(try httpGet(address, "/nope").status == 404)
        #expect(try httpGet(address, "/metrics", method: "POST").status == 405)
        #expect(daemon.terminate() == 0)
    }

    @Test("the process figures are the daemon's own (/proc), build_info names the git revision, fsync p99 is never above the max")
    func processFigures() throws {
        let daemon = try DaemonProcess()
        defer { _ = daemon.terminate() }
        let tour = try String(contentsOf: Products.repositoryRoot.appendingPathComponent("samples/tour.jsonl"), encoding: .utf8)
        _ = try sendBytes(Array(tour.utf8), to: daemon.ingestAcked, arguments: ["--acked"])
        let text = try httpGet(try #require(daemon.ready["metrics"] as? String), "/metrics").body
        let pid = daemon.process.processIdentifier
        // Resident memory as the kernel counts it for that pid, within a few MiB of the scrape's.
        let statm = try String(contentsOfFile: "/proc/\(pid)/statm", encoding: .utf8).split(separator: " ")
        let resident = Double(try #require(Int(statm[1]))) * Double(sysconf(Int32(_SC_PAGESIZE)))
        let scraped = try #require(metric(text, "process_resident_memory_bytes"))
        #expect(abs(scraped - resident) < 16 * 1_048_576, "scraped \(scraped), /proc \(resident)")
        let fds = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
        let openFds = try #require(metric(text, "process_open_fds"))
        #expect(abs(openFds - Double(fds)) < 8, "scraped \(openFds), /proc \(fds)")
        #expect(try #require(metric(text, "process_max_fds")) >= openFds)
        #expect(try #require(metric(text, "process_cpu_seconds_total")) > 0)
        let started = try #require(metric(text, "process_start_time_seconds"))
        #expect(abs(started - Date().timeIntervalSince1970) < 120, "started \(started)")
        #expect(metric(text, "checkoutbus_journal_first_seq") == 1)
        // The revision names a commit of the tests' own repository (the one the binary was built
        // from: HEAD in a fresh build, an older commit when built before the last commit).
        let info = try #require(text.split(separator: "\n").first { $0.hasPrefix("checkoutbus_build_info{") })
        let revision = try #require(info.split(separator: "revision=\"").last?.split(separator: "\"").first.map(String.init))
        func git(_ arguments: [String]) throws -> Int32 {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            p.arguments = ["git", "-C", Products.repositoryRoot.path] + arguments
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try p.run()
            p.waitUntilExit()
            return p.terminationStatus
        }
        if try git(["rev-parse", "--git-dir"]) == 0 {
            let commit = revision.hasSuffix("-dirty") ? String(revision.dropLast(6)) : revision
            #expect(commit.count == 12 && commit.allSatisfy(\.isHexDigit), "\(info)")
            #expect(try git(["rev-parse", "--verify", "--quiet", commit + "^{commit}"]) == 0, "\(info) is no commit of this repository")
        } else {
            #expect(revision == "unknown", "\(info)")
        }
        #expect(info.hasSuffix(" 1") && info.contains(#"version=""#))
        let stats = try ControlClient(daemon.control).request(#"{"op":"stats"}"#).status
        let journal = try #require(stats["journal"] as? [String: Any])
        let p99 = try #require(journal["fsync_p99_us"] as? Int), max = try #require(journal["fsync_max_us"] as? Int)
        #expect(max > 0 && p99 <= max, "p99 \(p99) µs, max \(max) µs")
    }

    @Test("--metrics off leaves no HTTP endpoint; a bad address is refused")
    func metricsOff() throws {
        let daemon = try DaemonProcess(["--metrics", "off"])
        #expect(daemon.ready["metrics"] is NSNull)
        let bad = try runTool("checkoutbusd", ["--metrics", "tcp://127.0.0.1:80"])
        #expect(bad.status == 2)
        #expect(bad.output.contains("--metrics must be HOST:PORT"))
        let nobody = try runTool("checkoutbus", ["stats", "--control", "tcp://127.0.0.1:1", "--timeout", "1"])
        #expect(nobody.status == 1)
        #expect(nobody.output.contains("no answer"))
    }
}
