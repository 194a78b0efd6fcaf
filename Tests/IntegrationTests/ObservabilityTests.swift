import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The shipped alerting rules, scrape configuration and Grafana dashboard (deploy/observability/):
/// promtool accepts and unit-tests them, they name only metrics the daemon exports, and a real
/// Prometheus scraping a real daemon raises CheckoutBusJournalNotWritable when its journal cannot
/// be written. Prometheus and promtool come from Debian's `prometheus` package
/// (scripts/install-deps); without them these tests fail.
@Suite("alerts and dashboards", .serialized, .timeLimit(.minutes(5)))
struct ObservabilityTests {
    static let directory = Products.repositoryRoot.appendingPathComponent("deploy/observability")
    static var rules: URL { directory.appendingPathComponent("checkoutbus-rules.yml") }
    static var config: URL { directory.appendingPathComponent("prometheus.yml") }
    static var dashboard: URL { directory.appendingPathComponent("grafana-dashboard.json") }

    /// The alerts issue 22 asks for; the rules file may have more.
    static let requiredAlerts = [
        "CheckoutBusJournalNotWritable", "CheckoutBusNoEvents", "CheckoutBusSubscriberLagGrowing",
        "CheckoutBusSubscriberDrops", "CheckoutBusDeadLetterRate", "CheckoutBusFailureRateJump", "CheckoutBusFsyncSlow",
    ]

    @Test("promtool check rules and test rules pass; every alert has for, severity, summary and a runbook section")
    func rulesAreValidAndTested() throws {
        let check = try runPrometheusTool("promtool", ["check", "rules", Self.rules.path])
        #expect(check.status == 0, "\(check.output)")
        #expect(check.output.contains("SUCCESS"))
        let unit = try runPrometheusTool("promtool", ["test", "rules", "checkoutbus-rules.test.yml"], in: Self.directory)
        #expect(unit.status == 0, "\(unit.output)")
        #expect(unit.output.contains("SUCCESS"))

        let text = try String(contentsOf: Self.rules, encoding: .utf8)
        let runbook = try String(contentsOf: Products.repositoryRoot.appendingPathComponent("docs/runbook.md"), encoding: .utf8)
        let unitTests = try String(contentsOf: Self.directory.appendingPathComponent("checkoutbus-rules.test.yml"), encoding: .utf8)
        let blocks = text.components(separatedBy: "- alert: ").dropFirst()
        let names = blocks.map { String($0.prefix { !$0.isNewline }) }
        #expect(Set(Self.requiredAlerts).isSubset(of: names), "alerts: \(names)")
        for (name, block) in zip(names, blocks) {
            #expect(block.contains("\n        for: "), "\(name) has a for:")
            #expect(block.contains("severity: "), "\(name) has a severity")
            #expect(block.contains("summary: "), "\(name) has a summary")
            #expect(block.contains("runbook_url: \"docs/runbook.md#\(name.lowercased())\""), "\(name) links its runbook section")
            #expect(runbook.contains("\n### \(name)\n"), "docs/runbook.md has a section for \(name)")
            // Both directions: a test that expects it firing, and one that expects silence.
            #expect(unitTests.contains("alertname: \(name)\n    exp_alerts:\n    - exp_labels:"), "\(name) is tested firing")
            #expect(unitTests.contains("alertname: \(name)\n    exp_alerts: []"), "\(name) is tested quiet")
        }
    }

    @Test("promtool check config passes on the shipped prometheus.yml")
    func configIsValid() throws {
        let check = try runPrometheusTool("promtool", ["check", "config", Self.config.path])
        #expect(check.status == 0, "\(check.output)")
        #expect(check.output.contains("is valid prometheus config file syntax"))
    }

    @Test("the dashboard parses, and the dashboard and the rules name only metrics a real daemon exports")
    func expressionsNameExportedMetrics() throws {
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: Self.dashboard)) as? [String: Any]
        let dashboard = try #require(object)
        let panels = try #require(dashboard["panels"] as? [[String: Any]])
        var expressions = panels.flatMap { ($0["targets"] as? [[String: Any]] ?? []).compactMap { $0["expr"] as? String } }
        #expect(expressions.count >= panels.count, "every panel has a query")
        let titles = Set(panels.compactMap { $0["title"] as? String })
        for title in ["Events in/s", "Published by kind", "Suppression ratio", "Failures by code", "Dead letters by reason",
                      "Journal size", "Journal fsync p99", "Subscriber lag", "Subscriber drops and recoveries",
                      "Tracked checkouts"] {
            #expect(titles.contains(title), "a panel \(title)")
        }
        let templating = (dashboard["templating"] as? [String: Any])?["list"] as? [[String: Any]] ?? []
        expressions += templating.compactMap { $0["definition"] as? String }
        let rules = try String(contentsOf: Self.rules, encoding: .utf8)

        // A daemon with some of everything, so that labelled families have samples.
        let daemon = try DaemonProcess()
        let address = try #require(daemon.ready["metrics"] as? String)
        let tour = try String(contentsOf: Products.repositoryRoot.appendingPathComponent("samples/tour.jsonl"), encoding: .utf8)
        #expect(try sendBytes(Array(tour.utf8), to: daemon.ingestAcked, arguments: ["--acked"]).status == 1)
        let control = try ControlClient(daemon.control)
        _ = try control.request(#"{"op":"report","subscriber":"observer","last_seq":5,"missed":2,"recovered":1}"#)
        let page = try httpGet(address, "/metrics")
        #expect(page.status == 200)
        let exported = Set(page.body.split(separator: "\n").filter { !$0.hasPrefix("#") }.map {
            String($0.prefix { $0 != "{" && $0 != " " })
        })
        #expect(exported.contains("checkoutbus_subscriber_lag"))
        #expect(exported.contains("checkoutbus_failures_total"))

        let named = metricNames(in: expressions.joined(separator: "\n"))
        #expect(named.count >= 15, "dashboard metrics: \(named.sorted())")
        #expect(named.subtracting(exported).isEmpty, "dashboard names metrics the daemon does not export")
        let inRules = metricNames(in: rules)
        #expect(inRules.count >= 8, "rule metrics: \(inRules.sorted())")
        #expect(inRules.subtracting(exported).isEmpty, "rules name metrics the daemon does not export")
        #expect(daemon.terminate() == 0)
    }

    @Test("a real Prometheus scrapes a real daemon and raises CheckoutBusJournalNotWritable when its journal cannot be written")
    func journalAlertGoesPending() throws {
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit"), "prlimit (util-linux) is missing")
        // Room for the segment header and a few hundred small records (as FullDiskTests).
        let daemon = try DaemonProcess(launcher: ["/usr/bin/prlimit", "--fsize=150000:unlimited"])
        let metricsAddress = try #require(daemon.ready["metrics"] as? String)
        let tmp = daemon.dataDirectory.deletingLastPathComponent()
        let server = try PrometheusServer(config: try testConfig(target: metricsAddress), in: tmp)

        // Prometheus scrapes the daemon: the target is up and the journal is writable.
        var scraped = false
        let scrapeDeadline = Date().addingTimeInterval(60)
        while !scraped && Date() < scrapeDeadline {
            scraped = try server.query("checkoutbus_journal_writable") == [1]
            if !scraped { usleep(200_000) }
        }
        #expect(scraped, "Prometheus reads checkoutbus_journal_writable 1 from the daemon; log: \(server.logTail)")
        #expect(try server.alertState("CheckoutBusJournalNotWritable") == nil, "no journal alert while it is writable")

        let input = tmp.appendingPathComponent("events.jsonl")
        try (distinctEvents(2000, run: "alert").joined(separator: "\n") + "\n").write(to: input, atomically: true, encoding: .utf8)
        let sender = Process()
        sender.executableURL = Products.url("checkoutbus")
        sender.arguments = ["send", "--acked", "--to", daemon.ingestAcked, "--timeout", "60", "--window", "20", input.path]
        sender.standardError = FileHandle.nullDevice
        try sender.start()
        defer {
            if sender.isRunning { kill(sender.processIdentifier, SIGKILL) }
            reap(sender)
        }
        #expect(waitUntil(30) { daemon.stderrText.contains("journal write failed") })

        var state: String?
        let alertDeadline = Date().addingTimeInterval(60)
        while Date() < alertDeadline {
            state = try server.alertState("CheckoutBusJournalNotWritable")
            if state == "pending" || state == "firing" { break }
            usleep(200_000)
        }
        #expect(state == "pending" || state == "firing", "alert state \(state ?? "none"); log: \(server.logTail)")
        #expect(try server.query("checkoutbus_journal_writable") == [0])

        // Space comes back (only the soft limit was lowered, so no privilege is needed): the
        // daemon resumes and the alert goes away.
        #expect(try daemon.liftFileSizeLimit() == 0)
        #expect(waitForExit(sender, timeout: 60) == 0, "every event acknowledged")
        var cleared = false
        let clearDeadline = Date().addingTimeInterval(60)
        while !cleared && Date() < clearDeadline {
            cleared = try server.alertState("CheckoutBusJournalNotWritable") == nil
            if !cleared { usleep(200_000) }
        }
        #expect(cleared, "the alert resolves once the journal is writable; log: \(server.logTail)")
        #expect(daemon.terminate() == 0)
    }

    /// The shipped prometheus.yml with 1 s scrape and evaluation intervals, the rules by absolute
    /// path, and only the single-daemon job, pointed at `target`. Fails if the shipped file no
    /// longer has the parts this derives from.
    func testConfig(target: String) throws -> String {
        var text = try String(contentsOf: Self.config, encoding: .utf8)
        let replacements = [
            ("scrape_interval: 15s", "scrape_interval: 1s"), ("evaluation_interval: 15s", "evaluation_interval: 1s"),
            ("  - checkoutbus-rules.yml", "  - \(Self.rules.path)"), ("\"127.0.0.1:7780\"", "\"\(target)\""),
        ]
        for (old, new) in replacements {
            guard text.contains(old) else { throw HarnessError("prometheus.yml no longer contains \(old)") }
            text = text.replacingOccurrences(of: old, with: new)
        }
        guard let shards = text.range(of: "  # Shards") else { throw HarnessError("prometheus.yml has no shards job") }
        return String(text[..<shards.lowerBound])
    }
}

/// Every `checkoutbus_…` metric name in PromQL text.
func metricNames(in text: String) -> Set<String> {
    var names = Set<String>()
    var rest = Substring(text)
    while let start = rest.range(of: "checkoutbus_") {
        let name = rest[start.lowerBound...].prefix { $0.isLetter || $0.isNumber || $0 == "_" }
        names.insert(String(name))
        rest = rest[name.endIndex...]
    }
    return names
}

/// Runs a tool of Debian's `prometheus` package from /usr/bin; missing, it throws (the test fails).
func runPrometheusTool(_ name: String, _ arguments: [String], in directory: URL? = nil) throws -> (status: Int32, output: String) {
    try runSystemTool("/usr/bin/\(name)", arguments, in: directory, package: "prometheus")
}

/// Runs a tool a Debian package installs (at `path`) to its end: its status and stdout and stderr
/// together; missing, it throws (the test fails), naming the package.
func runSystemTool(_ path: String, _ arguments: [String], in directory: URL? = nil, package: String) throws -> (status: Int32, output: String) {
    guard FileManager.default.isExecutableFile(atPath: path) else {
        throw HarnessError("\(path) is missing: install Debian's \(package) package (scripts/install-deps)")
    }
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = arguments
    if let directory { p.currentDirectoryURL = directory }
    let out = Pipe()
    p.standardOutput = out
    p.standardError = out
    try p.start()
    let text = PipeLineReader(out.fileHandleForReading).readAll(timeout: 60).joined(separator: "\n")
    return (waitForExit(p, timeout: 30), text)
}

/// A loopback TCP port nobody listened on a moment ago (bound to port 0 and released): for
/// programs that need an explicit port. Whoever uses it retries on a clash.
func unusedLoopbackPort() throws -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw HarnessError("socket failed") }
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = 0
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound else { throw HarnessError("cannot bind a loopback port") }
    return UInt16(bigEndian: addr.sin_port)
}

/// A `prometheus` server on a loopback port with its storage in a temporary directory, killed when
/// the test ends; asked over its HTTP API.
final class PrometheusServer {
    let process: Process
    let address: String
    let logURL: URL

    /// Starts Prometheus with `config` (written into `directory`) and waits until it is ready.
    init(config: String, in directory: URL) throws {
        let path = "/usr/bin/prometheus"
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw HarnessError("\(path) is missing: install Debian's prometheus package (scripts/install-deps)")
        }
        let configURL = directory.appendingPathComponent("prometheus.yml")
        try config.write(to: configURL, atomically: true, encoding: .utf8)
        logURL = directory.appendingPathComponent("prometheus.log")
        // The port is chosen before Prometheus binds it: another process may take it in between,
        // in which case Prometheus exits at once and another port is tried.
        for _ in 0..<5 {
            let candidate = "127.0.0.1:\(try unusedLoopbackPort())"
            let p = Process()
            p.executableURL = URL(fileURLWithPath: path)
            p.arguments = ["--config.file=\(configURL.path)", "--storage.tsdb.path=\(directory.appendingPathComponent("tsdb").path)",
                           "--web.listen-address=\(candidate)", "--log.level=info"]
            _ = FileManager.default.createFile(atPath: logURL.path, contents: nil)
            p.standardOutput = FileHandle.nullDevice
            p.standardError = try FileHandle(forWritingTo: logURL)
            try p.start()
            let ready = waitUntil(60) { !p.isRunning || (try? prometheusGet(candidate, "/-/ready").status) == 200 }
            if ready && p.isRunning {
                address = candidate
                process = p
                return
            }
            if p.isRunning { kill(p.processIdentifier, SIGKILL) }
            reap(p)
            let log = (try? String(contentsOf: logURL, encoding: .utf8)) ?? ""
            guard log.contains("address already in use") else {
                throw HarnessError("prometheus did not become ready; log:\n\(log.suffix(3000))")
            }
        }
        throw HarnessError("prometheus found no free port in 5 tries")
    }

    var logTail: String { String(((try? String(contentsOf: logURL, encoding: .utf8)) ?? "").suffix(3000)) }

    /// The values of an instant query's result (empty: no series).
    func query(_ promQL: String) throws -> [Double] {
        let encoded = promQL.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? promQL
        let data = try api("/api/v1/query?query=\(encoded)")
        let result = (data["result"] as? [[String: Any]]) ?? []
        return result.compactMap { (($0["value"] as? [Any])?.last as? String).flatMap(Double.init) }
    }

    /// The state (`pending`, `firing`) of the alert named `name`, or nil when it is not active.
    func alertState(_ name: String) throws -> String? {
        let alerts = (try api("/api/v1/alerts")["alerts"] as? [[String: Any]]) ?? []
        return alerts.first { ($0["labels"] as? [String: Any])?["alertname"] as? String == name }?["state"] as? String
    }

    private func api(_ path: String) throws -> [String: Any] {
        let response = try prometheusGet(address, path)
        guard response.status == 200,
            let object = try JSONSerialization.jsonObject(with: Data(response.body.utf8)) as? [String: Any],
            object["status"] as? String == "success", let data = object["data"] as? [String: Any]
        else { throw HarnessError("\(path): \(response.status) \(response.body.prefix(500))") }
        return data
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            reap(process)
        }
    }
}

/// An HTTP/1.0 GET, for Prometheus's API (``httpGet(_:_:method:version:)``).
func prometheusGet(_ address: String, _ path: String) throws -> (status: Int, body: String) {
    try httpGet(address, path, version: "1.0")
}
