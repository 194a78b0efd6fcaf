import Foundation
import Testing

@Suite("configuration file and SIGHUP", .serialized, .timeLimit(.minutes(4)))
struct ConfigurationTests {
    static func writeConfig(_ text: String) throws -> URL {
        let url = TestScratch.url("cb-config-\(UUID().uuidString).conf")
        try text.write(to: url, atomically: true, encoding: .utf8)
        return url
    }

    @Test("--config applies its keys, the command line wins, SIGHUP reloads the log level")
    func configAndReload() throws {
        let config = try Self.writeConfig("""
            # CheckoutBus daemon settings
            max-checkouts = 2
            log-level = warning
            publish-hwm = "5000"
            heartbeat-ms = 60000   # the command line sets it too; the command line wins
            """)
        let daemon = try DaemonProcess(["--config", config.path, "--heartbeat-ms", "100"])
        // log-level = warning: the info line "started" is not written.
        #expect(!daemon.stderrText.contains("msg=started"))

        // max-checkouts = 2: a third checkout evicts the least recently used one.
        let lines = (1...3).map { #"{"checkout_id":"cfg-\#($0)","payload":{"event":"onCheckoutStarted"}}"# }
        #expect(try send(lines, to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        let stats = try ControlClient(daemon.control).request(#"{"op":"stats"}"#).status
        let counters = try #require(stats["counters"] as? [String: Any])
        #expect(counters["evicted_checkouts"] as? Int == 1)
        #expect(counters["tracked_checkouts"] as? Int == 2)

        // --heartbeat-ms 100 on the command line beats the file's 60000: heartbeats keep coming.
        let tail = try TailProcess(from: daemon.publish, topics: ["bus.heartbeat"], count: 3, timeout: 10)
        #expect(try tail.envelopes().count == 3)

        // SIGHUP re-reads the file: log-level = debug takes effect without a restart.
        try "log-level = debug\n".write(to: config, atomically: true, encoding: .utf8)
        kill(daemon.process.processIdentifier, SIGHUP)
        let reloaded = waitUntil(10) { daemon.stderrText.contains("configuration reloaded") }
        #expect(reloaded)
        #expect(daemon.stderrText.contains("log_level=warning→debug"))
        #expect(!daemon.stderrText.contains("msg=subscribe"))
        let second = try TailProcess(from: daemon.publish, topics: ["checkout.start"], count: 1, timeout: 10)
        #expect(waitUntil(10) { daemon.stderrText.contains("msg=subscribe") }, "debug lines are written after the reload")
        second.process.terminate()
        #expect(daemon.process.isRunning)
        #expect(daemon.terminate() == 0)
    }

    @Test("the shipped deploy/checkoutbusd.conf is a valid configuration")
    func shippedConfig() throws {
        let config = Products.repositoryRoot.appendingPathComponent("deploy/checkoutbusd.conf")
        let data = TestScratch.url("cb-conf-\(UUID().uuidString)")
        // Its endpoints and data directory are overridden on the command line; everything else applies.
        let daemon = try DaemonProcess(["--config", config.path, "--data-dir", data.path])
        #expect(daemon.ready["ready"] as? Bool == true)
        #expect(daemon.terminate() == 0)
    }

    @Test("an unknown key in the configuration file is refused with its line")
    func unknownKey() throws {
        let config = try Self.writeConfig("ingest = tcp://127.0.0.1:*\nfsync = 3\n")
        let result = try runTool("checkoutbusd", ["--config", config.path])
        #expect(result.status == 2)
        #expect(result.output.contains(":2: unknown key fsync"))
        let missing = try runTool("checkoutbusd", ["--config", "/nonexistent/checkoutbus.conf"])
        #expect(missing.status == 2)
        #expect(missing.output.contains("cannot read the configuration file"))
    }
}
