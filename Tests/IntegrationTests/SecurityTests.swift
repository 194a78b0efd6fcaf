import Foundation
import Testing
import ZeroMQ

/// Keys made with `checkoutbus keygen` in a temporary directory, and the daemon's allowlist directories.
struct TestKeys {
    let directory: URL
    var producers: URL { directory.appendingPathComponent("producers") }
    var subscribers: URL { directory.appendingPathComponent("subscribers") }

    init() throws {
        directory = TestScratch.url("cb-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: producers, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: subscribers, withIntermediateDirectories: true)
        for name in ["server", "producer", "subscriber", "stranger"] {
            let r = try runTool("checkoutbus", ["keygen", directory.appendingPathComponent(name).path])
            guard r.status == 0 else { throw HarnessError("keygen failed: \(r.output)") }
        }
        try FileManager.default.copyItem(at: path("producer.pub"), to: producers.appendingPathComponent("producer.pub"))
        try FileManager.default.copyItem(at: path("subscriber.pub"), to: subscribers.appendingPathComponent("subscriber.pub"))
    }

    func path(_ file: String) -> URL { directory.appendingPathComponent(file) }

    func key(_ file: String) throws -> String {
        let text = try String(contentsOf: path(file), encoding: .utf8)
        return text.split(separator: "\n").first { !$0.hasPrefix("#") }.map(String.init) ?? ""
    }

    var daemonArguments: [String] {
        ["--curve-secret-key", path("server.key").path, "--curve-producers", producers.path,
         "--curve-subscribers", subscribers.path, "--heartbeat-ms", "100"]
    }

    func clientArguments(_ name: String) -> [String] {
        ["--curve-key", path("\(name).key").path, "--curve-server", path("server.pub").path]
    }
}

/// Whether a CURVE SUB with `client`'s keys receives a heartbeat within `seconds`.
func curveSubscriberHears(_ keys: TestKeys, _ client: String, publish: String, seconds: Int32) throws -> Bool {
    let context = try ZMQContext()
    let sub = try ZMQSocket(context: context, type: .sub)
    try sub.setLinger(milliseconds: 0)
    try sub.setOption(.receiveTimeout, seconds * 1000)
    try sub.makeCurveClient(try ZMQCurveKeyPair(secretKey: try keys.key("\(client).key")), serverKey: try keys.key("server.pub"))
    try sub.connect(publish)
    try sub.subscribe("bus.heartbeat")
    return try sub.receiveMultipart() != nil
}

@Suite("CURVE authentication and plain-text safety", .serialized, .timeLimit(.minutes(4)))
struct SecurityTests {
    @Test("keygen writes a 0600 secret key and a public key, and refuses to overwrite")
    func keygen() throws {
        let keys = try TestKeys()
        let attributes = try FileManager.default.attributesOfItem(atPath: keys.path("producer.key").path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        #expect(try keys.key("producer.pub").count == 40)
        #expect(try keys.key("producer.key").count == 40)
        let again = try runTool("checkoutbus", ["keygen", keys.path("producer").path])
        #expect(again.status == 1)
        #expect(again.output.contains("--force"))
    }

    @Test("a listed key works; an unlisted key sends nothing and gets nothing; a producer key cannot subscribe")
    func allowlists() throws {
        let keys = try TestKeys()
        let daemon = try DaemonProcess(keys.daemonArguments)
        #expect((daemon.ready["curve_public_key"] as? String) == (try keys.key("server.pub")))
        let event = #"{"checkout_id":"sec-1","payload":{"event":"onCheckoutStarted"}}"# + "\n"

        // The listed producer's event is acknowledged and journaled.
        let listed = try sendBytes(Array(event.utf8), to: daemon.ingestAcked,
                                   arguments: ["--acked", "--timeout", "5"] + keys.clientArguments("producer"))
        #expect(listed.status == 0)
        // The listed subscriber reads stats and hears heartbeats.
        let stats = try runTool("checkoutbus", ["stats", "--control", daemon.control, "--json", "--timeout", "5"]
            + keys.clientArguments("subscriber"))
        #expect(stats.status == 0)
        #expect(stats.output.contains(#""last_seq":1"#))
        #expect(try curveSubscriberHears(keys, "subscriber", publish: daemon.publish, seconds: 5))

        // An unlisted key sends nothing: neither ingest socket takes its events.
        let stranger = try sendBytes(Array(event.utf8), to: daemon.ingest, arguments: ["--timeout", "2"] + keys.clientArguments("stranger"))
        #expect(stranger.status == 1)
        // The client cannot tell a refusal from a daemon that is down; it says where to look.
        #expect(stranger.stderr.contains("a key the daemon refused looks the same"), "\(stranger.stderr)")
        let strangerAcked = try sendBytes(Array(event.utf8), to: daemon.ingestAcked,
                                          arguments: ["--acked", "--timeout", "2"] + keys.clientArguments("stranger"))
        #expect(strangerAcked.status == 1)
        // …and gets nothing: no heartbeat, no stats.
        #expect(try !curveSubscriberHears(keys, "stranger", publish: daemon.publish, seconds: 2))
        let strangerStats = try runTool("checkoutbus", ["stats", "--control", daemon.control, "--timeout", "2"]
            + keys.clientArguments("stranger"))
        #expect(strangerStats.status == 1)
        #expect(strangerStats.output.contains("a key the daemon refused looks the same"), "\(strangerStats.output)")
        // A producer's key cannot subscribe or read stats; a subscriber's cannot send.
        #expect(try !curveSubscriberHears(keys, "producer", publish: daemon.publish, seconds: 2))
        #expect(try runTool("checkoutbus", ["stats", "--control", daemon.control, "--timeout", "2"]
            + keys.clientArguments("producer")).status == 1)
        let subscriberSends = try sendBytes(Array(event.utf8), to: daemon.ingestAcked,
                                            arguments: ["--acked", "--timeout", "2"] + keys.clientArguments("subscriber"))
        #expect(subscriberSends.status == 1)
        // No plain-text client gets in either.
        #expect(try runTool("checkoutbus", ["stats", "--control", daemon.control, "--timeout", "2"]).status == 1)

        // A worker with a subscriber's key subscribes and records the order.
        let database = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("orders.sqlite")
        let worker = try FulfilProcess(daemon: daemon, database: database, extra: keys.clientArguments("subscriber"))
        worker.process.terminate()
        #expect(waitForExit(worker.process, timeout: 20) == 0)

        // Still exactly the one listed event.
        let after = try runTool("checkoutbus", ["stats", "--control", daemon.control, "--json"] + keys.clientArguments("subscriber"))
        #expect(after.output.contains(#""last_seq":1"#))
        #expect(daemon.stderrText.contains("curve: refused"))

        // SIGHUP reloads the directories: the stranger, once listed, may send.
        try FileManager.default.copyItem(at: keys.path("stranger.pub"), to: keys.producers.appendingPathComponent("stranger.pub"))
        kill(daemon.process.processIdentifier, SIGHUP)
        #expect(waitUntil(10) { daemon.stderrText.contains("curve allowlists reloaded") })
        let nowListed = try sendBytes(Array(event.utf8), to: daemon.ingestAcked,
                                      arguments: ["--acked", "--timeout", "5"] + keys.clientArguments("stranger"))
        #expect(nowListed.status == 0)
        #expect(daemon.terminate() == 0)
    }

    @Test("plain text on a non-loopback address is refused unless --allow-insecure-remote")
    func insecureRemote() throws {
        let refused = try runTool("checkoutbusd", ["--publish", "tcp://0.0.0.0:*", "--ingest", "tcp://127.0.0.1:*",
                                                   "--ingest-acked", "tcp://127.0.0.1:*", "--control", "tcp://127.0.0.1:*",
                                                   "--metrics", "127.0.0.1:*"])
        #expect(refused.status == 2)
        #expect(refused.output.contains("is not a loopback address"))
        #expect(refused.output.contains("--allow-insecure-remote"))
        let metricsRemote = try runTool("checkoutbusd", ["--metrics", "0.0.0.0:*"])
        #expect(metricsRemote.status == 2)
        let allowed = try DaemonProcess(["--publish", "tcp://0.0.0.0:*", "--allow-insecure-remote"])
        #expect((allowed.ready["publish"] as? String)?.hasPrefix("tcp://0.0.0.0:") == true)
        #expect(allowed.terminate() == 0)
        let incomplete = try runTool("checkoutbusd", ["--curve-secret-key", "/tmp/x.key"])
        #expect(incomplete.status == 2)
        #expect(incomplete.output.contains("CURVE needs all three"))
        // With CURVE on, the metrics' HTTP off loopback is not fixed by CURVE: the message says so.
        let keys = try TestKeys()
        let curveMetrics = try runTool("checkoutbusd", [
            "--curve-secret-key", keys.path("server.key").path, "--curve-producers", keys.producers.path,
            "--curve-subscribers", keys.subscribers.path, "--metrics", "0.0.0.0:*",
        ])
        #expect(curveMetrics.status == 2)
        #expect(curveMetrics.output.contains("bind it to loopback, or pass --allow-insecure-remote"), "\(curveMetrics.output)")
        #expect(!curveMetrics.output.contains("enable CURVE"), "\(curveMetrics.output)")
    }

    @Test("loopback by name or IPv6 binds: localhost is 127.0.0.1, [::1] gets libzmq's IPv6 option, clients connect to it")
    func loopbackSpellings() throws {
        let ipv6 = ((try? String(contentsOfFile: "/proc/net/if_inet6", encoding: .utf8)) ?? "")
            .contains("00000000000000000000000000000001")
        let acked = ipv6 ? "tcp://[::1]:*" : "tcp://localhost:*"
        let daemon = try DaemonProcess(["--ingest", "tcp://localhost:*", "--ingest-acked", acked, "--metrics", "localhost:*"])
        #expect(daemon.ingest.hasPrefix("tcp://127.0.0.1:"))
        #expect((daemon.ready["metrics"] as? String)?.hasPrefix("127.0.0.1:") == true)
        #expect(daemon.ingestAcked.hasPrefix(ipv6 ? "tcp://[::1]:" : "tcp://127.0.0.1:"), "\(daemon.ingestAcked)")
        let sent = try sendBytes(Array(#"{"checkout_id":"v6-1","event":"checkoutDidStart","checkout":{"id":"v6-1"}}"#.utf8) + [0x0A],
                                 to: daemon.ingestAcked, arguments: ["--acked"])
        #expect(sent.status == 0, "\(sent.stderr)")
        #expect(daemon.terminate() == 0)
    }
}
