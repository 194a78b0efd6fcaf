import Foundation
import Testing

/// The SDKs' own payloads, over the wire: every line of `Tests/Corpus/sdk-payloads.jsonl` is a
/// payload copied from a Shopify or Primer SDK repository (test fixtures, specification examples,
/// bridge tests; each cites its repo, path and tag), with what the daemon must make of it. Each is
/// sent in the ingest wrapper an app's backend uses, to the real daemon's acknowledged socket, and
/// its envelope read back from the journal as published.
@Suite("the SDKs' own payloads, over the wire", .serialized, .timeLimit(.minutes(4)))
struct SDKCorpusTests {
    struct Entry {
        let line: Int
        let source: String
        let wrapped: String
        let expect: [String: Any]
    }

    static func corpus() throws -> [Entry] {
        let url = Products.repositoryRoot.appendingPathComponent("Tests/Corpus/sdk-payloads.jsonl")
        let text = try String(contentsOf: url, encoding: .utf8)
        return try text.split(separator: "\n").enumerated().map { i, line in
            let o = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let source = try #require(o["source"] as? [String: Any])
            #expect(source["repo"] is String && source["path"] is String, "line \(i + 1) cites its repo and path")
            var wrapper: [String: Any] = ["checkout_id": "corpus-\(i + 1)", "event_id": "corpus-\(i + 1)",
                                          "sdk": try #require(o["sdk"] as? String), "payload": try #require(o["payload"])]
            if let p = o["platform"] as? String, p != "web" { wrapper["platform"] = p }
            let wrapped = String(decoding: try JSONSerialization.data(withJSONObject: wrapper), as: UTF8.self)
            return Entry(line: i + 1, source: "\(source["repo"]!):\(source["path"]!)", wrapped: wrapped,
                         expect: try #require(o["expect"] as? [String: Any]))
        }
    }

    /// Every path (`checkout.cart.buyerIdentity.email`, `a.b[0].c`) whose value is `"[redacted]"`.
    static func redactedPaths(_ value: Any, _ path: String = "") -> Set<String> {
        if let s = value as? String { return s == "[redacted]" ? [path] : [] }
        if let o = value as? [String: Any] {
            return o.reduce(into: Set<String>()) { $0.formUnion(redactedPaths($1.value, path.isEmpty ? $1.key : path + "." + $1.key)) }
        }
        if let a = value as? [Any] {
            return a.enumerated().reduce(into: Set<String>()) { $0.formUnion(redactedPaths($1.element, path + "[\($1.offset)]")) }
        }
        return []
    }

    @Test("every payload of the corpus: topic, kind, stable code, raw code, message, order, total, currency, redaction")
    func corpusOverTheWire() throws {
        let entries = try Self.corpus()
        #expect(entries.count >= 130)
        let daemon = try DaemonProcess()
        let sent = try send(entries.map(\.wrapped), to: daemon.ingestAcked, arguments: ["--acked", "--timeout", "20"])
        // Dead letters among them make `send` exit 1; every event must have been answered.
        #expect(sent.stderr.contains("sent=\(entries.count) acked="), "\(sent.stderr)")
        var byEventID: [String: (topic: String, envelope: [String: Any])] = [:]
        for record in try ControlClient(daemon.control).replayAll(prefixes: []) {
            let envelope = try #require(try JSONSerialization.jsonObject(with: Data(record.bytes)) as? [String: Any])
            if let id = envelope["event_id"] as? String { byEventID[id] = (record.topic, envelope) }
        }
        var checked = 0
        for entry in entries {
            let where_ = "corpus line \(entry.line) (\(entry.source))"
            guard let (topic, envelope) = byEventID["corpus-\(entry.line)"] else {
                Issue.record(Comment(rawValue: "\(where_): nothing journaled"))
                continue
            }
            let e = entry.expect
            #expect(topic == e["topic"] as? String, "\(where_): topic")
            if e["outcome"] as? String == "deadletter" {
                #expect(envelope["reason"] as? String == e["reason"] as? String, "\(where_): dead-letter reason")
                checked += 1
                continue
            }
            #expect(envelope["kind"] as? String == e["kind"] as? String, "\(where_): kind")
            #expect(envelope["idempotency_key"] as? String == e["idempotency_key"] as? String, "\(where_): idempotency key")
            let error = envelope["error"] as? [String: Any]
            if let code = e["code"] as? String {
                #expect(error?["code"] as? String == code, "\(where_): stable code")
                #expect(error?["raw_code"] as? String == e["raw_code"] as? String, "\(where_): raw code")
                #expect(error?["message"] as? String == e["message"] as? String, "\(where_): message")
                #expect(error?["terminal"] as? Bool == e["terminal"] as? Bool, "\(where_): terminal")
                #expect(error?["continue_url"] as? String == e["continue_url"] as? String, "\(where_): continue_url")
            } else {
                #expect(error == nil, "\(where_): no error")
            }
            let summary = envelope["summary"] as? [String: Any] ?? [:]
            #expect(summary["order_id"] as? String == e["order_id"] as? String, "\(where_): order id")
            #expect((summary["total"] as? NSNumber)?.intValue == (e["total"] as? NSNumber)?.intValue, "\(where_): total")
            #expect(summary["currency"] as? String == e["currency"] as? String, "\(where_): currency")
            // Exactly what the expectation lists, nothing more, nothing less.
            #expect(Self.redactedPaths(envelope) == Set(e["redacted"] as? [String] ?? []), "\(where_): redacted paths")
            checked += 1
        }
        #expect(checked == entries.count)
        #expect(daemon.terminate() == 0)
    }

    @Test("checkoutbus decode prints what the daemon publishes, offline")
    func decodeMatchesTheDaemon() throws {
        let entries = try Self.corpus()
        let file = TestScratch.url("corpus-\(UUID().uuidString).jsonl")
        try (entries.map(\.wrapped).joined(separator: "\n") + "\n").write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let result = try runTool("checkoutbus", ["decode", "--format", "json", file.path])
        #expect(result.status == 0)
        let lines = result.output.split(separator: "\n")
        #expect(lines.count == entries.count)
        for (entry, line) in zip(entries, lines) {
            let o = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            #expect(o["outcome"] as? String == entry.expect["outcome"] as? String, "line \(entry.line)")
            #expect(o["topic"] as? String == entry.expect["topic"] as? String, "line \(entry.line)")
        }
        let pretty = try runTool("checkoutbus", ["decode", file.path])
        #expect(pretty.output.contains("line 48: #48 checkout.complete corpus-48 shopify/ios/sheet_bridge total=1000 USD order=gid://shopify/Order/test-order-123"))
    }
}
