import Foundation
import Testing

import CheckoutBusCore
import CheckoutBusJSON
import CheckoutBusProtocol

/// The repository's root (samples, corpus, golden files, docs), from this file's path.
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// The lines of a file under the repository's root; none when it cannot be read (the suites that
/// read samples expect a count, so a missing file fails there).
func repositoryLines(_ path: String) -> [String] {
    ((try? String(contentsOf: repositoryRoot.appendingPathComponent(path), encoding: .utf8)) ?? "")
        .split(separator: "\n").map(String.init)
}

/// Every line of the samples and the SDK corpus: the real payloads the suites run their checks over.
let sampleAndCorpusLines: [String] = ["samples/tour.jsonl", "samples/bridges.jsonl", "Tests/Corpus/sdk-payloads.jsonl"]
    .flatMap(repositoryLines)

// Helpers shared by the CheckoutBusCore suites. Envelopes are read back with Foundation's
// JSONDecoder, independently of the module under test, so a malformed envelope fails the test.

/// A JSON value decoded from an envelope. Booleans, integers, doubles, strings and null stay distinct.
enum J: Equatable, Sendable, Decodable, CustomStringConvertible,
    ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral
{
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([J])
    case object([String: J])

    init(stringLiteral value: String) { self = .string(value) }
    init(integerLiteral value: Int64) { self = .int(value) }
    init(booleanLiteral value: Bool) { self = .bool(value) }

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let b = try? c.decode(Bool.self) {
            self = .bool(b)
        } else if let i = try? c.decode(Int64.self) {
            self = .int(i)
        } else if let d = try? c.decode(Double.self) {
            self = .double(d)
        } else if let s = try? c.decode(String.self) {
            self = .string(s)
        } else if let a = try? c.decode([J].self) {
            self = .array(a)
        } else {
            self = .object(try c.decode([String: J].self))
        }
    }

    /// Decodes JSON text; `nil` if Foundation does not accept it as JSON.
    static func parse(_ bytes: [UInt8]) -> J? {
        try? JSONDecoder().decode(J.self, from: Data(bytes))
    }

    /// A member or element by dotted path (`"summary.total"`, `"line_items.0.title"`).
    subscript(_ path: String) -> J? {
        var cur: J? = self
        for part in path.split(separator: ".") {
            switch cur {
            case .object(let o): cur = o[String(part)]
            case .array(let a):
                guard let i = Int(part), a.indices.contains(i) else { return nil }
                cur = a[i]
            default: return nil
            }
        }
        return cur
    }

    /// A member by its exact name (for keys containing dots).
    subscript(key key: String) -> J? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    var intValue: Int64? {
        if case .int(let i) = self { return i }
        return nil
    }

    var keys: Set<String> {
        if case .object(let o) = self { return Set(o.keys) }
        return []
    }

    var description: String {
        switch self {
        case .null: "null"
        case .bool(let b): "\(b)"
        case .int(let i): "\(i)"
        case .double(let d): "\(d)"
        case .string(let s): "\"\(s)\""
        case .array(let a): "[" + a.map(\.description).joined(separator: ",") + "]"
        case .object(let o): "{" + o.keys.sorted().map { "\"\($0)\":\(o[$0]!)" }.joined(separator: ",") + "}"
        }
    }
}

/// What one call of `EventProcessor.process` produced.
struct Output {
    var outcome: EventProcessor.Outcome
    /// The topic frame (empty when suppressed).
    var topic: String
    /// The envelope frame as text (empty when suppressed).
    var text: String
    /// The envelope, decoded (`.null` when suppressed).
    var envelope: J

    subscript(_ path: String) -> J? { envelope[path] }
}

/// A fixed receive time for envelopes: 2025-12-02T11:39:01.123Z.
let fixedReceivedAt: Int64 = 1_764_675_541_123

extension EventProcessor {
    /// Processes `text` and reads back what was produced.
    @discardableResult
    func feed(_ text: String, receivedAt: Int64 = fixedReceivedAt, now: UInt32 = 1_000,
              sourceLocation: SourceLocation = #_sourceLocation) -> Output {
        feed(bytes: Array(text.utf8), receivedAt: receivedAt, now: now, sourceLocation: sourceLocation)
    }

    /// Processes raw bytes and reads back what was produced.
    @discardableResult
    func feed(bytes: [UInt8], receivedAt: Int64 = fixedReceivedAt, now: UInt32 = 1_000,
              sourceLocation: SourceLocation = #_sourceLocation) -> Output {
        let result = bytes.withUnsafeBytes {
            process($0, receivedAt: Timestamp(milliseconds: receivedAt), now: now)
        }
        return readOutput(result, sourceLocation: sourceLocation)
    }
}

/// Reads back the frames `result` points to (none when nothing was published).
func readOutput(_ result: ProcessingResult, sourceLocation: SourceLocation = #_sourceLocation) -> Output {
    guard let p = result.publication else {
        return Output(outcome: result.outcome, topic: "", text: "", envelope: .null)
    }
    return readFrames(result.outcome, topic: p.topic, envelope: p.envelope, sourceLocation: sourceLocation)
}

/// Reads back a topic and an envelope frame.
func readFrames(_ outcome: EventProcessor.Outcome, topic: UnsafeRawBufferPointer, envelope: UnsafeRawBufferPointer,
                sourceLocation: SourceLocation = #_sourceLocation) -> Output {
    let topicText = String(decoding: topic, as: UTF8.self)
    let text = String(decoding: envelope, as: UTF8.self)
    guard let json = J.parse(Array(envelope)) else {
        Issue.record("envelope is not valid JSON: \(text)", sourceLocation: sourceLocation)
        return Output(outcome: outcome, topic: topicText, text: text, envelope: .null)
    }
    return Output(outcome: outcome, topic: topicText, text: text, envelope: json)
}

/// Escapes `text` as the contents of a JSON string literal (quotes included).
func jsonStringLiteral(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        default:
            if scalar.value < 0x20 {
                out += String(format: "\\u%04x", scalar.value)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
    }
    return out + "\""
}

/// The ingest wrapper of DESIGN §3 around `payload`, as an object or as a JSON string.
func wrap(_ payload: String, checkoutID: String = "w-1", platform: String? = "ios", sdk: String? = "shopify",
          eventID: String? = "evt-1", occurredAt: String? = "2026-12-02T11:39:01.000Z",
          payloadAsString: Bool = false) -> String {
    var parts = ["\"checkout_id\":\(jsonStringLiteral(checkoutID))"]
    if let platform { parts.append("\"platform\":\(jsonStringLiteral(platform))") }
    if let sdk { parts.append("\"sdk\":\(jsonStringLiteral(sdk))") }
    if let eventID { parts.append("\"event_id\":\(jsonStringLiteral(eventID))") }
    if let occurredAt { parts.append("\"occurred_at\":\(jsonStringLiteral(occurredAt))") }
    parts.append("\"payload\":" + (payloadAsString ? jsonStringLiteral(payload) : payload))
    return "{" + parts.joined(separator: ",") + "}"
}

/// Parses `text` into a fresh document that owns its bytes; records an issue if it does not parse.
func document(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> JSONDocument? {
    let doc = JSONDocument()
    do {
        try doc.parseOwned(Array(text.utf8))
        return doc
    } catch {
        Issue.record("fixture does not parse: \(error.reason.name) at \(error.offset): \(text)",
                     sourceLocation: sourceLocation)
        return nil
    }
}

/// Checkout snapshots shared by several suites (Checkout Kit v4 / ECP shape: snake_case, minor units).
enum Fixture {
    /// A v4 snapshot; `id: nil` leaves the id out (for wrapped events).
    static func snapshot(id: String? = "ck-1", quantity: Int = 2, status: String = "incomplete",
                         orderID: String? = nil) -> String {
        var members: [String] = []
        if let id { members.append("\"id\":\(jsonStringLiteral(id))") }
        members.append("\"status\":\(jsonStringLiteral(status))")
        members.append("\"currency\":\"USD\"")
        members.append(
            "\"line_items\":[{\"id\":\"li_1\",\"item\":{\"id\":\"gid://shopify/ProductVariant/1\",\"title\":\"Canvas Tote\",\"price\":2500},\"quantity\":\(quantity)},{\"id\":\"li_2\",\"item\":{\"id\":\"gid://shopify/ProductVariant/2\",\"title\":\"Enamel Pin\",\"price\":400},\"quantity\":1}]"
        )
        let subtotal = 2500 * quantity + 400
        members.append(
            "\"totals\":[{\"type\":\"subtotal\",\"amount\":\(subtotal)},{\"type\":\"tax\",\"amount\":100},{\"type\":\"total\",\"amount\":\(subtotal + 100)}]"
        )
        members.append("\"messages\":[]")
        if let orderID {
            members.append("\"order\":{\"id\":\(jsonStringLiteral(orderID)),\"permalink_url\":\"https://shop.example/orders/1\"}")
        }
        return "{" + members.joined(separator: ",") + "}"
    }

    static func ecp(_ method: String, checkout: String) -> String {
        "{\"jsonrpc\":\"2.0\",\"method\":\(jsonStringLiteral(method)),\"params\":{\"checkout\":\(checkout)}}"
    }
}
