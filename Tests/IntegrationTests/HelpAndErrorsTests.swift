import CheckoutBusDaemon
import Foundation
import Testing
import ZeroMQ

/// What a user sees first: every `--help` is whole (no unexpanded `\(…)`), and a mistyped command or
/// flag gets one line that says what is wrong, what was probably meant, and where the help is.
@Suite("help texts and one-line errors", .timeLimit(.minutes(4)))
struct HelpAndErrorsTests {
    static let commands = ["send", "tail", "route", "replay", "flood", "forwarder", "keygen", "trace", "stats", "cursor",
                           "subscribers", "top", "decode", "bench"]

    @Test("every command's and executable's --help prints whole text, nothing left unexpanded")
    func helpTexts() throws {
        var runs: [(String, [String])] = Self.commands.map { ("checkoutbus", [$0, "--help"]) }
        runs += [("checkoutbus", ["--help"]), ("checkoutbusd", ["--help"]), ("checkoutbus-fulfil", ["--help"]),
                 ("checkoutbus-analytics", ["--help"]), ("checkoutbus-jetstream", ["--help"]), ("checkoutbus-jetstream", ["verify", "--help"])]
        for (tool, arguments) in runs {
            let r = try runTool(tool, arguments)
            let what = "\(tool) \(arguments.joined(separator: " "))"
            #expect(r.status == 0, "\(what): exit \(r.status)")
            #expect(r.output.count > 200, "\(what): \(r.output)")
            #expect(!r.output.contains("\\("), "\(what) prints an unexpanded interpolation")
            #expect(r.output.contains(tool), "\(what): the help names its tool")
        }
    }

    @Test("a mistyped command or flag: one line, what was meant, where the help is; exit 2")
    func typos() throws {
        let cases: [(String, [String], String)] = [
            ("checkoutbus", ["tali"], "did you mean `checkoutbus tail`?"),
            ("checkoutbus", ["subscriber"], "did you mean `checkoutbus subscribers`?"),
            ("checkoutbus", ["tail", "--sinse", "5"], "did you mean --since?"),
            ("checkoutbus", ["flood", "--chekouts", "5"], "did you mean --checkouts?"),
            ("checkoutbusd", ["--data-dri", "/tmp/x"], "did you mean --data-dir?"),
            ("checkoutbus-fulfil", ["--fromm", "tcp://127.0.0.1:1"], "did you mean --from?"),
            ("checkoutbus-analytics", ["--interval", "0"], "--help lists the flags"),
        ]
        for (tool, arguments, says) in cases {
            let r = try runTool(tool, arguments)
            let what = "\(tool) \(arguments.joined(separator: " "))"
            #expect(r.status == 2, "\(what): exit \(r.status)")
            #expect(r.output.split(separator: "\n").count == 1, "\(what) printed more than one line: \(r.output)")
            #expect(r.output.contains(says), "\(what): \(r.output)")
            #expect(r.output.contains("--help"), "\(what): \(r.output)")
        }
        // Nothing close: no guess.
        let far = try runTool("checkoutbus", ["xyzzy"])
        #expect(far.status == 2 && !far.output.contains("did you mean") && far.output.split(separator: "\n").count == 1, "\(far.output)")
    }

    @Test("a port in use names its flag, and a start that fails leaves no data directory it made (one that was there stays)")
    func portInUse() throws {
        let running = try DaemonProcess()
        defer { _ = running.terminate() }
        let fresh = TestScratch.url("port-in-use-\(UUID().uuidString)")
        let r = try runTool("checkoutbusd", ["--data-dir", fresh.path, "--ingest", running.ingest, "--publish", "tcp://127.0.0.1:*",
                                             "--ingest-acked", "tcp://127.0.0.1:*", "--control", "tcp://127.0.0.1:*", "--metrics", "off"])
        #expect(r.status == 1)
        #expect(r.output.contains("--ingest \(running.ingest): address already in use"), "\(r.output)")
        #expect(!FileManager.default.fileExists(atPath: fresh.path), "the failed start left \(fresh.path) behind")
        // A directory that was there before the start is the operator's: it stays.
        let existing = TestScratch.url("port-in-use-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: existing, withIntermediateDirectories: true)
        let again = try runTool("checkoutbusd", ["--data-dir", existing.path, "--control", running.control, "--ingest", "tcp://127.0.0.1:*",
                                                 "--publish", "tcp://127.0.0.1:*", "--ingest-acked", "tcp://127.0.0.1:*", "--metrics", "off"])
        #expect(again.status == 1 && again.output.contains("--control \(running.control): address already in use"), "\(again.output)")
        #expect(FileManager.default.fileExists(atPath: existing.path))
    }

    @Test("decode --strict exits 3 when a line is dead-lettered, 0 when every line decodes")
    func decodeStrict() throws {
        let file = TestScratch.url("strict-\(UUID().uuidString).jsonl")
        try (#"{"checkout_id":"s-1","payload":{"event":"canceled"}}"# + "\n").write(to: file, atomically: true, encoding: .utf8)
        #expect(try runTool("checkoutbus", ["decode", "--strict", file.path]).status == 0)
        try (#"{"checkout_id":"s-1","payload":{"event":"canceled"}}"# + "\nnot json\n").write(to: file, atomically: true, encoding: .utf8)
        let r = try runTool("checkoutbus", ["decode", "--strict", file.path])
        #expect(r.status == 3 && r.output.contains("decode: 1 of 2 lines dead-lettered"), "\(r.output)")
        #expect(try runTool("checkoutbus", ["decode", file.path]).status == 0)
    }

    @Test("a restart says it is rebuilding state from the journal before it is ready, with the seqs it reads")
    func rebuildIsLogged() throws {
        let first = try DaemonProcess()
        #expect(try send((1...5).map { ErrorMapTests.fail("rb-\($0)", "network_error") }, to: first.ingestAcked, arguments: ["--acked"]).status == 0)
        #expect(first.terminate() == 0)
        let again = try DaemonProcess(dataDirectory: first.dataDirectory)
        defer { _ = again.terminate() }
        let log = again.stderrText
        #expect(log.contains("rebuilding state from the journal") && log.contains("from_seq=1") && log.contains("to_seq=5"), "\(log)")
        #expect(log.contains("state rebuilt from the journal"), "\(log)")
    }

    @Test("checkoutbusd --check-config: ok with what it sets, or the file's line that is wrong; binds and creates nothing")
    func checkConfig() throws {
        let shipped = try runTool("checkoutbusd", ["--check-config", Products.repositoryRoot.appendingPathComponent("deploy/checkoutbusd.conf").path])
        #expect(shipped.status == 0 && shipped.output.contains(": ok: ingest tcp://127.0.0.1:7700") && shipped.output.contains("CURVE off"),
                "\(shipped.output)")
        let dir = TestScratch.url("check-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let file = dir.appendingPathComponent("d.conf"), map = dir.appendingPathComponent("map")
        let data = dir.appendingPathComponent("data")
        try "stripe-x = payment_failed\n".write(to: map, atomically: true, encoding: .utf8)
        try "data-dir = \(data.path)\nerror-map = \(map.path)\n".write(to: file, atomically: true, encoding: .utf8)
        let good = try runTool("checkoutbusd", ["--check-config", file.path])
        #expect(good.status == 0 && good.output.contains("error map 1 entry"), "\(good.output)")
        #expect(!FileManager.default.fileExists(atPath: data.path), "--check-config created the data directory")
        try "data-dir = \(data.path)\nfsync-ms = lots\n".write(to: file, atomically: true, encoding: .utf8)
        let value = try runTool("checkoutbusd", ["--check-config", file.path])
        #expect(value.status == 1 && value.output.contains("d.conf:2: --fsync-ms must be an integer"), "\(value.output)")
        try "ingset = tcp://127.0.0.1:7700\n".write(to: file, atomically: true, encoding: .utf8)
        let key = try runTool("checkoutbusd", ["--check-config", file.path])
        #expect(key.status == 1 && key.output.contains("d.conf:1: unknown key ingset; did you mean ingest?"), "\(key.output)")
        try "error-map = \(map.path)\n".write(to: file, atomically: true, encoding: .utf8)
        try "stripe-x = not_a_code\n".write(to: map, atomically: true, encoding: .utf8)
        let badMap = try runTool("checkoutbusd", ["--check-config", file.path])
        #expect(badMap.status == 1 && badMap.output.contains("map:1:"), "\(badMap.output)")
        // A flag after the file overrides it, as at a start.
        try "ingest = tcp://127.0.0.1:7700\n".write(to: file, atomically: true, encoding: .utf8)
        let overridden = try runTool("checkoutbusd", ["--check-config", file.path, "--ingest", "tcp://127.0.0.1:9900"])
        #expect(overridden.status == 0 && overridden.output.contains("ingest tcp://127.0.0.1:9900"), "\(overridden.output)")
    }

    @Test("checkoutbus ping: every endpoint of each shard answers with its time; a port nobody listens on fails, exit 1")
    func ping() throws {
        let shards = try (0..<2).map { try DaemonProcess(["--shard", "\($0)/2"]) }
        defer { for d in shards { _ = d.terminate() } }
        let r = try runTool("checkoutbus", ["ping", "--control", shards.map(\.control).joined(separator: ","), "--json"])
        #expect(r.status == 0, "\(r.output)")
        let probes = r.output.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(probes.count == 10, "\(r.output)")
        for d in shards {
            let mine = probes.filter { [d.control, d.ingest, d.ingestAcked, d.publish, d.ready["metrics"] as? String].contains($0["endpoint"] as? String) }
            #expect(Set(mine.compactMap { $0["role"] as? String }) == ["control", "ingest", "ingest-acked", "publish", "metrics"], "\(mine)")
            #expect(mine.allSatisfy { $0["ok"] as? Bool == true && $0["ms"] != nil }, "\(mine)")
        }
        #expect(probes.contains { ($0["detail"] as? String)?.contains("shard 1/2") == true })
        // Each control endpoint names its journal, as its data directory holds it.
        for d in shards {
            let id = try String(contentsOf: d.dataDirectory.appendingPathComponent("journal-id"), encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(id.count == 32)
            #expect(probes.contains { $0["endpoint"] as? String == d.control
                        && ($0["detail"] as? String)?.contains("journal \(id)") == true }, "\(probes)")
        }
        let nobody = "tcp://127.0.0.1:\(try freeLoopbackPort())"
        let fail = try runTool("checkoutbus", ["ping", "--control", nobody, "--timeout", "1"])
        #expect(fail.status == 1 && fail.output.contains("FAIL") && fail.output.contains("no answer within 1 s"), "\(fail.output)")
        // --healthz: only the metrics port, no keys needed (a container's health check).
        let metrics = try #require(shards[0].ready["metrics"] as? String)
        let healthy = try runTool("checkoutbus", ["ping", "--healthz", metrics])
        #expect(healthy.status == 0 && healthy.output.contains("/healthz 200") && !healthy.output.contains("control"), "\(healthy.output)")
        let silent = try runTool("checkoutbus", ["ping", "--healthz", "127.0.0.1:\(try freeLoopbackPort())", "--timeout", "1"])
        #expect(silent.status == 1 && silent.output.contains("FAIL"), "\(silent.output)")
        let both = try runTool("checkoutbus", ["ping", "--healthz", metrics, "--control", shards[0].control])
        #expect(both.status == 2 && both.output.contains("give one"), "\(both.output)")
    }

    /// A ROUTER on an ephemeral port standing in for a daemon's control socket, and its endpoint.
    static func fakeControl(_ context: ZMQContext) throws -> (ZMQSocket, String) {
        let router = try ZMQSocket(context: context, type: .router)
        try router.setLinger(milliseconds: 0)
        try router.setOption(.receiveTimeout, 20_000)
        try router.bind("tcp://127.0.0.1:*")
        return (router, try router.lastEndpoint)
    }

    @Test("ping against a control port that answers, but not with stats: FAIL with the answer's detail, exit 1",
          arguments: [(#"{"ok":false,"error":"busy","detail":"restoring state from the journal"}"#,
                       "answered without stats: restoring state from the journal"),
                      ("not json at all", "answered without stats: not json at all")])
    func pingAnsweredWithoutStats(reply: String, said: String) throws {
        let context = try ZMQContext()
        let (router, endpoint) = try Self.fakeControl(context)
        let ping = Process()
        ping.executableURL = Products.url("checkoutbus")
        ping.arguments = ["ping", "--control", endpoint, "--timeout", "10"]
        let out = Pipe()
        ping.standardOutput = out
        ping.standardError = out
        try ping.start()
        // The tool's stats request, answered with something else.
        let request = try #require(try router.receiveMultipart())
        #expect(String(decoding: request.last ?? [], as: UTF8.self).contains("stats"))
        _ = try router.sendMultipart([request[0], Array(reply.utf8)])
        let text = PipeLineReader(out.fileHandleForReading).readAll(timeout: 30).joined(separator: "\n")
        #expect(waitForExit(ping, timeout: 30) == 1, "\(text)")
        #expect(text.contains("FAIL") && text.contains(said), "\(text)")
    }

    @Test("stats answered busy asks again after a pause that doubles, and prints the answer that follows; still busy at --timeout, exit 1")
    func statsAsksAgainAfterBusy() throws {
        let context = try ZMQContext()
        let (router, endpoint) = try Self.fakeControl(context)
        func start(_ timeout: String) throws -> (Process, PipeLineReader) {
            let tool = Process()
            tool.executableURL = Products.url("checkoutbus")
            tool.arguments = ["stats", "--control", endpoint, "--json", "--timeout", timeout]
            let out = Pipe()
            tool.standardOutput = out
            tool.standardError = out
            try tool.start()
            return (tool, PipeLineReader(out.fileHandleForReading))
        }
        let busy = Array(#"{"ok":false,"error":"busy","detail":"replies queued","req":null}"#.utf8)
        let (tool, output) = try start("10")
        var arrivals: [UInt64] = []
        for answer in [busy, busy, Array(#"{"ok":true,"op":"stats","last_seq":7}"#.utf8)] {
            let request = try #require(try router.receiveMultipart())
            arrivals.append(DispatchTime.now().uptimeNanoseconds)
            #expect(String(decoding: request.last ?? [], as: UTF8.self).contains("stats"))
            _ = try router.sendMultipart([request[0], answer])
        }
        let text = output.readAll(timeout: 30).joined(separator: "\n")
        #expect(waitForExit(tool, timeout: 30) == 0, "\(text)")
        #expect(text.contains(#""last_seq":7"#), "\(text)")
        // 20 ms, then 40 ms.
        #expect(arrivals[1] - arrivals[0] >= 20_000_000 && arrivals[2] - arrivals[1] >= 40_000_000, "\(arrivals)")
        // Busy until its timeout: said, exit 1.
        let (stuck, stuckOutput) = try start("1")
        try router.setOption(.receiveTimeout, 3_000)
        var asked = 0
        while let request = try router.receiveMultipart() {
            asked += 1
            _ = try router.sendMultipart([request[0], busy])
        }
        let said = stuckOutput.readAll(timeout: 30).joined(separator: "\n")
        #expect(waitForExit(stuck, timeout: 30) == 1, "\(said)")
        #expect(said.contains("answered busy") && asked >= 2, "asked \(asked) times: \(said)")
    }

    @Test("a failed start never removes a data directory a running daemon holds, nor one its own mkdir did not make")
    func removalRespectsTheLock() throws {
        let running = try DaemonProcess()
        let path = running.dataDirectory.path
        #expect(!DataDirectory.make(path), "an existing directory is not made again")
        #expect(DataDirectory.removeIfUnused(path) == .inUse)
        #expect(FileManager.default.fileExists(atPath: path + "/journal"))
        #expect(running.terminate() == 0)
        #expect(DataDirectory.removeIfUnused(path) == .removed)
        #expect(!FileManager.default.fileExists(atPath: path))
        let fresh = TestScratch.url("made-\(UUID().uuidString)/data").path
        #expect(DataDirectory.make(fresh) && !DataDirectory.make(fresh), "one mkdir makes it; the next finds it there")
    }
}
