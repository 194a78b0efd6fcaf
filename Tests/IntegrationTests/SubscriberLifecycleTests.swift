import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Subscribers live and gone (docs/observability.md, "Subscribers, live and gone"), over the wire:
/// real `tail` processes report to a real daemon; `checkoutbus subscribers` and `/metrics` are read
/// as an operator reads them.
@Suite("subscribers, live and gone", .serialized, .timeLimit(.minutes(5)))
struct SubscriberLifecycleTests {
    /// `checkoutbus subscribers --all --format json` of `daemon`, by name.
    static func listed(_ daemon: DaemonProcess, all: Bool = true) throws -> [String: [String: Any]] {
        let r = try runTool("checkoutbus", ["subscribers", "--control", daemon.control, "--format", "json"] + (all ? ["--all"] : []))
        guard r.status == 0, let line = r.output.split(separator: "\n").first(where: { $0.hasPrefix("{") }),
            let o = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
            let list = o["subscribers"] as? [[String: Any]]
        else { throw HarnessError("subscribers: \(r.status) \(r.output)") }
        return Dictionary(list.map { ($0["name"] as? String ?? "", $0) }, uniquingKeysWith: { a, _ in a })
    }

    static func metrics(_ daemon: DaemonProcess) throws -> String {
        try httpGet(try #require(daemon.ready["metrics"] as? String), "/metrics").body
    }

    @Test("a tail that exits is gone (stopped) at once, leaves no series in /metrics, is hidden by default and expires")
    func tailExits() throws {
        let daemon = try DaemonProcess(["--heartbeat-ms", "100", "--subscriber-gone-after", "1", "--subscriber-expire-after", "3"])
        defer { _ = daemon.terminate() }
        let tail = try TailProcess(from: daemon.publish, count: 1, arguments: ["--control", daemon.control, "--name", "tail-a"])
        #expect(waitUntil(10) { (try? Self.listed(daemon)["tail-a"]?["state"] as? String) == "live" })
        #expect(try Self.metrics(daemon).contains(#"checkoutbus_subscriber_lag{subscriber="tail-a"}"#))
        #expect(try send([ErrorMapTests.fail("lc-1", "network_error")], to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        #expect(try tail.envelopes().count == 1)
        // Its final report went with it: gone, stopped, not durable (its position was in memory).
        let gone = try #require(try Self.listed(daemon)["tail-a"])
        #expect(gone["state"] as? String == "gone")
        #expect(gone["gone_reason"] as? String == "stopped")
        #expect(gone["durable"] as? Bool == false)
        #expect(try Self.listed(daemon, all: false)["tail-a"] == nil)
        #expect(try !Self.metrics(daemon).contains(#"subscriber="tail-a""#))
        let pretty = try runTool("checkoutbus", ["subscribers", "--control", daemon.control])
        #expect(pretty.output.contains("1 gone (--all lists them)"), "\(pretty.output)")
        // Forgotten --subscriber-expire-after (3 s) after it went.
        #expect(waitUntil(15) { (try? Self.listed(daemon)["tail-a"]) == nil })
    }

    @Test("a durable subscriber killed -9 goes silent: up 0 and no lag in /metrics; forget drops it; an unknown name exits 1")
    func durableKilled() throws {
        let daemon = try DaemonProcess(["--heartbeat-ms", "100", "--subscriber-gone-after", "1", "--subscriber-expire-after", "600"])
        defer { _ = daemon.terminate() }
        let record = TestScratch.url("lifecycle-\(UUID().uuidString).jsonl")
        let tail = try TailProcess(from: daemon.publish, count: 1000, timeout: 120,
                                   arguments: ["--control", daemon.control, "--name", "recorder", "--record", record.path])
        #expect(waitUntil(10) { (try? Self.listed(daemon)["recorder"]?["state"] as? String) == "live" })
        #expect(try Self.listed(daemon)["recorder"]?["durable"] as? Bool == true)
        kill(tail.process.processIdentifier, SIGKILL)
        #expect(waitUntil(10) { (try? Self.listed(daemon)["recorder"]?["gone_reason"] as? String) == "silent" })
        let text = try Self.metrics(daemon)
        #expect(text.contains(#"checkoutbus_subscriber_up{subscriber="recorder"} 0"#), "\(text)")
        #expect(text.contains(#"checkoutbus_subscriber_last_report_age_seconds{subscriber="recorder"}"#))
        #expect(!text.contains(#"checkoutbus_subscriber_lag{subscriber="recorder"}"#))
        #expect(text.contains(#"checkoutbus_subscribers{state="gone"} 1"#))

        let forgot = try runTool("checkoutbus", ["subscribers", "forget", "recorder", "--control", daemon.control])
        #expect(forgot.status == 0 && forgot.output.contains("forgot recorder"), "\(forgot.output)")
        #expect(try Self.listed(daemon)["recorder"] == nil)
        #expect(try !Self.metrics(daemon).contains(#"subscriber="recorder""#))
        let again = try runTool("checkoutbus", ["subscribers", "forget", "recorder", "--control", daemon.control])
        #expect(again.status == 1 && again.output.contains("no daemon knows a subscriber named recorder"), "\(again.output)")
    }

    @Test("an idle filtered subscriber is at lag 0: its position is what it has seen through heartbeats, not its last envelope")
    func idleFilteredAtLagZero() throws {
        let daemon = try DaemonProcess(["--heartbeat-ms", "100"])
        defer { _ = daemon.terminate() }
        let tail = try TailProcess(from: daemon.publish, topics: ["checkout.complete"], count: 1000, timeout: 120,
                                   arguments: ["--control", daemon.control, "--name", "completes"])
        defer { kill(tail.process.processIdentifier, SIGKILL) }
        #expect(try send((1...20).map { ErrorMapTests.fail("lz-\($0)", "network_error") }, to: daemon.ingestAcked,
                         arguments: ["--acked"]).status == 0)
        var seen: [String: Any] = [:]
        let caughtUp = waitUntil(10) {
            seen = (try? Self.listed(daemon)["completes"]) ?? [:]
            return (seen["through_seq"] as? Int ?? 0) >= 20
        }
        #expect(caughtUp, "\(seen)")
        #expect(seen["lag"] as? Int == 0, "\(seen)")
        #expect((seen["last_seq"] as? Int ?? 0) < 20, "it handled none of the 20 failures: \(seen)")
        #expect(try Self.metrics(daemon).contains(#"checkoutbus_subscriber_lag{subscriber="completes"} 0"#))
    }

    /// A reply of ~100 KiB, the largest `subscribers` asks for: it was read after the buffer it was
    /// parsed from had gone (a crash, status 139, once a daemon had heard of a thousand durable subscribers).
    @Test("subscribers --all lists 1,024 reported subscribers: a large reply read whole")
    func aThousandSubscribers() throws {
        let daemon = try DaemonProcess()
        defer { _ = daemon.terminate() }
        let control = try ControlClient(daemon.control)
        for i in 0..<1024 {
            _ = try control.request(#"{"op":"report","subscriber":"w\#(i)","last_seq":0,"durable":true}"#)
        }
        for _ in 0..<3 {
            let listed = try Self.listed(daemon)
            #expect(listed.count == 1024)
            #expect(listed["w0"] != nil && listed["w1023"] != nil)
        }
        let pretty = try runTool("checkoutbus", ["subscribers", "--all", "--control", daemon.control])
        #expect(pretty.status == 0, "\(pretty.output)")
        #expect(pretty.output.contains("w1023"))
    }
}
