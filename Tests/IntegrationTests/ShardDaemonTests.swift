import CheckoutBusCore
import Foundation
import Testing

@Suite("one shard: --shard I/N, wrong_shard, the data directory's shard", .serialized, .timeLimit(.minutes(4)))
struct ShardDaemonTests {
    @Test("shard 1/3 publishes its own checkouts with shard 1 and dead-letters the others as wrong_shard")
    func wrongShard() throws {
        let daemon = try DaemonProcess(["--shard", "1/3"])
        #expect(daemon.ready.string("shard") == "1/3")
        let ids = (0..<60).map { "sh-\($0)" }
        let lines = ids.enumerated().map { i, id in
            #"{"event_id":"e-\#(i)","checkout_id":"\#(id)","platform":"ios","sdk":"shopify","payload":{"event":"checkoutDidStart"}}"#
        }
        let owned = ids.filter { ShardMap.owner(of: $0, count: 3) == 1 }
        #expect(owned.count > 5 && owned.count < 55)
        let ackLog = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("acks")
        let sent = try send(lines, to: daemon.ingestAcked, arguments: ["--acked", "--ack-log", ackLog.path])
        // Rejections make `send --acked` exit 1 and say the first reason.
        #expect(sent.status == 1)
        #expect(sent.stderr.contains("sent=60 acked=\(owned.count) rejected=\(60 - owned.count)"), "\(sent.stderr)")
        #expect(sent.stderr.contains("wrong_shard"), "\(sent.stderr)")

        let records = try ControlClient(daemon.control).replayAll(prefix: "")
        #expect(records.count == 60, "every event is journaled: published or dead-lettered")
        for (_, topic, envelope) in records {
            #expect(envelope.int("shard") == 1)
            if topic == "bus.deadletter" {
                #expect(envelope.string("reason") == "wrong_shard")
                let raw = try #require(envelope.string("raw"))
                let id = try #require(ids.first { raw.contains("\"\($0)\"") })
                #expect(ShardMap.owner(of: id, count: 3) != 1)
                let owner = ShardMap.owner(of: id, count: 3)
                #expect(envelope.string("detail") == "checkout \(id) belongs to shard \(owner)/3, not 1/3")
            } else {
                #expect(topic == "checkout.start")
                #expect(owned.contains(envelope.string("checkout_id") ?? ""))
            }
        }
        #expect(records.filter { $0.1 == "checkout.start" }.count == owned.count)
        #expect(daemon.terminate() == 0)
    }

    @Test("a data directory keeps the shard it began with: another --shard is refused, the same one restarts")
    func dataDirectoryShard() throws {
        let first = try DaemonProcess(["--shard", "2/3"])
        #expect(first.terminate() == 0)
        let shardFile = first.dataDirectory.appendingPathComponent("shard")
        #expect(try String(contentsOf: shardFile, encoding: .utf8) == "2/3\n")

        let refused = try runTool("checkoutbusd", [
            "--shard", "0/3", "--data-dir", first.dataDirectory.path, "--ingest", "tcp://127.0.0.1:*",
            "--ingest-acked", "tcp://127.0.0.1:*", "--publish", "tcp://127.0.0.1:*", "--control", "tcp://127.0.0.1:*",
            "--metrics", "off",
        ])
        #expect(refused.status != 0)
        #expect(refused.output.contains("belongs to shard 2/3, not 0/3"), "\(refused.output)")

        let again = try DaemonProcess(["--shard", "2/3"], dataDirectory: first.dataDirectory)
        #expect(again.ready.string("shard") == "2/3")
        #expect(again.terminate() == 0)
    }

    @Test("a journal from before sharding counts as 0/1", arguments: [["--shard", "1/2"], []])
    func unshardedJournal(arguments: [String]) throws {
        let daemon = try DaemonProcess()
        let line = #"{"checkout_id":"old-1","payload":{"event":"onCheckoutStarted"}}"# + "\n"
        #expect(try sendBytes(Array(line.utf8), to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        #expect(daemon.terminate() == 0)
        // A journal with records and no shard file: what a daemon from before sharding left.
        try FileManager.default.removeItem(at: daemon.dataDirectory.appendingPathComponent("shard"))
        if arguments.isEmpty {
            let again = try DaemonProcess(dataDirectory: daemon.dataDirectory)
            #expect(again.ready.string("shard") == "0/1")
            #expect(again.terminate() == 0)
        } else {
            let refused = try runTool("checkoutbusd", arguments + [
                "--data-dir", daemon.dataDirectory.path, "--ingest", "tcp://127.0.0.1:*", "--ingest-acked",
                "tcp://127.0.0.1:*", "--publish", "tcp://127.0.0.1:*", "--control", "tcp://127.0.0.1:*", "--metrics", "off",
            ])
            #expect(refused.status != 0)
            #expect(refused.output.contains("belongs to shard 0/1, not 1/2"), "\(refused.output)")
        }
    }

    @Test("--shard must be I/N with I < N", arguments: ["3/3", "1", "x/2", "0/0"])
    func badShardFlag(value: String) throws {
        let r = try runTool("checkoutbusd", ["--shard", value, "--metrics", "off"])
        #expect(r.status == 2 || r.status == 64 || r.status != 0)
        #expect(r.output.contains("--shard must be I/N"), "\(r.output)")
    }

    @Test("the shipped deploy/shards/shard-I.conf are valid, name their own shard and share no endpoint")
    func shippedShardConfigs() throws {
        var endpoints: [String] = []
        for i in 0..<3 {
            let config = Products.repositoryRoot.appendingPathComponent("deploy/shards/shard-\(i).conf")
            let text = try String(contentsOf: config, encoding: .utf8)
            for line in text.split(separator: "\n") where !line.hasPrefix("#") && line.contains("127.0.0.1:") {
                endpoints.append(String(line.split(separator: "=")[1].trimmingCharacters(in: .whitespaces)))
            }
            // Endpoints are overridden on the command line (ephemeral ports); the shard applies.
            let daemon = try DaemonProcess(["--config", config.path])
            #expect(daemon.ready.string("shard") == "\(i)/3")
            #expect(daemon.terminate() == 0)
        }
        #expect(endpoints.count == 15)
        #expect(Set(endpoints.map { $0.split(separator: ":").last! }).count == 15, "\(endpoints)")
        let unsharded = try String(contentsOf: Products.repositoryRoot.appendingPathComponent("deploy/checkoutbusd.conf"),
                                   encoding: .utf8)
        for e in endpoints { #expect(!unsharded.contains(e)) }
    }

    @Test("deploy/checkoutbus-route.service lists the shipped shards' endpoints in shard order")
    func shippedRouteUnit() throws {
        let unit = try String(contentsOf: Products.repositoryRoot.appendingPathComponent("deploy/checkoutbus-route.service"),
                              encoding: .utf8)
        func list(_ flag: String) -> [String] {
            let words = unit.replacingOccurrences(of: "\\\n", with: " ").split(whereSeparator: { $0 == " " || $0 == "\n" })
            guard let i = words.firstIndex(of: Substring(flag)), i + 1 < words.count else { return [] }
            return words[i + 1].split(separator: ",").map(String.init)
        }
        var ingest: [String] = []
        var acked: [String] = []
        for i in 0..<3 {
            let text = try String(contentsOf: Products.repositoryRoot.appendingPathComponent("deploy/shards/shard-\(i).conf"),
                                  encoding: .utf8)
            for line in text.split(separator: "\n") {
                let kv = line.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                if kv.count == 2 && kv[0] == "ingest" { ingest.append(kv[1]) }
                if kv.count == 2 && kv[0] == "ingest-acked" { acked.append(kv[1]) }
            }
        }
        #expect(ingest.count == 3 && acked.count == 3)
        #expect(list("--shards") == ingest)
        #expect(list("--shards-acked") == acked)
    }
}
