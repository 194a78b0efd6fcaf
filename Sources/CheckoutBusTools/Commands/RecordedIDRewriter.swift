import Foundation

/// Turns one recorded line into any number of distinct copies for `replay --rewrite-ids`: every
/// checkout, order, payment and event id in the line gets the copy's suffix (`~r<copy>`) wherever
/// it occurs — the wrapper's `checkout_id`, the snapshot's `id`, an order id in a Checkout Sheet
/// bridge's `body` string, an envelope's `idempotency_key` — so each copy is a lifecycle of its own,
/// consistent with itself, and the daemon neither merges copies nor de-duplicates their events.
///
/// The ids are found once per line (Foundation's JSON parser: a capture is read once per pass,
/// the copies are spliced from the template); an id is replaced only where it stands whole (not
/// inside a longer id). `Sendable`: a value.
package struct RecordedIDRewriter: Sendable {
    /// A line cut at its ids: `pieces.count == ids.count + 1`.
    package struct Template: Sendable {
        package var pieces: [[UInt8]]
        package var ids: [[UInt8]]
        package var hasIDs: Bool { !ids.isEmpty }
    }

    /// Keys whose string value is an id, at any depth.
    static let idKeys: Set<String> = [
        "checkout_id", "checkoutId", "event_id", "eventId", "order_id", "orderId", "idempotency_key",
        "paymentId", "payment_id", "diagnosticsId",
    ]
    /// Objects under these keys have an `id` that is a checkout's, an order's or a payment's.
    static let idOwners: Set<String> = ["checkout", "order", "orderDetails", "payment", "paymentResult"]

    /// The line cut at every whole occurrence of the ids it carries.
    package static func template(_ line: [UInt8]) -> Template {
        guard let root = try? JSONSerialization.jsonObject(with: Data(line), options: [.fragmentsAllowed]) else {
            return Template(pieces: [line], ids: [])
        }
        var ids = Set<String>()
        collect(root, owner: nil, into: &ids)
        let sorted = ids.filter { !$0.isEmpty }.map { Array($0.utf8) }.sorted { $0.count > $1.count }
        guard !sorted.isEmpty else { return Template(pieces: [line], ids: []) }
        var pieces: [[UInt8]] = []
        var found: [[UInt8]] = []
        var literal: [UInt8] = []
        var i = 0
        scan: while i < line.count {
            if i == 0 || !isIDByte(line[i - 1]) {
                for id in sorted where i + id.count <= line.count && line[i] == id[0] {
                    let end = i + id.count
                    guard end == line.count || !isIDByte(line[end]) else { continue }
                    guard line[i..<end].elementsEqual(id) else { continue }
                    pieces.append(literal)
                    literal = []
                    found.append(id)
                    i = end
                    continue scan
                }
            }
            literal.append(line[i])
            i += 1
        }
        pieces.append(literal)
        return Template(pieces: pieces, ids: found)
    }

    /// Copy `copy` of a template's line.
    package static func render(_ t: Template, copy: Int, into out: inout [UInt8]) {
        out.removeAll(keepingCapacity: true)
        let suffix = Array("~r\(copy)".utf8)
        for (k, piece) in t.pieces.enumerated() {
            out.append(contentsOf: piece)
            if k < t.ids.count {
                out.append(contentsOf: t.ids[k])
                out.append(contentsOf: suffix)
            }
        }
    }

    /// Letters, digits and `-_.:/` continue an id: an occurrence next to one is part of a longer id.
    private static func isIDByte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: ":"), UInt8(ascii: "/"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    private static func collect(_ value: Any, owner: String?, into ids: inout Set<String>) {
        if let object = value as? [String: Any] {
            for (key, v) in object {
                if let s = v as? String {
                    if idKeys.contains(key) || (key == "id" && owner.map(idOwners.contains) == true) {
                        ids.insert(s)
                    } else if let first = s.utf8.first, first == UInt8(ascii: "{") || first == UInt8(ascii: "[") {
                        // A JSON document in a string (the Checkout Sheet bridge's `body`).
                        if let inner = try? JSONSerialization.jsonObject(with: Data(s.utf8)) { collect(inner, owner: nil, into: &ids) }
                    }
                } else {
                    collect(v, owner: key, into: &ids)
                }
            }
        } else if let array = value as? [Any] {
            for v in array { collect(v, owner: owner, into: &ids) }
        }
    }
}
