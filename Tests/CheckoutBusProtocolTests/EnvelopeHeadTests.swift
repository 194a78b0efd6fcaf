import Foundation
import Testing

import CheckoutBusJSON
import CheckoutBusProtocol

/// The envelope's head, declared once in `EnvelopeHead`: what its writer writes, its fast reader
/// reads, and the control socket's checkout filter finds — checked against every golden envelope
/// (`Tests/Golden/envelopes.jsonl`, which `GoldenEnvelopeTests` checks the writer against byte for byte).
@Suite("envelope head: one declaration, golden envelopes")
struct EnvelopeHeadTests {
    /// Every golden envelope's text.
    static let envelopes: [String] = {
        GoldenFile.text("envelopes.jsonl").split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["envelope"] as? String
        }
    }()

    @Test("every golden envelope's seq, kind_seq and shard read from its head are what a full parse finds")
    func leadingPositions() throws {
        let envelopes = Self.envelopes
        #expect(envelopes.count > 300, "the golden file was read")
        for text in envelopes {
            let full = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
            let read = Array(text.utf8).withUnsafeBytes { LeadingPositions.read($0) }
            let p = try #require(read, "\(text.prefix(80))")
            #expect(p.seq == full["seq"] as? Int64 ?? Int64(full["seq"] as? Int ?? -1))
            #expect(p.kindSeq == Int64(full["kind_seq"] as? Int ?? -1))
            #expect(p.shard == full["shard"] as? Int)
        }
    }

    @Test("the first checkout_id key in every golden envelope is its top-level member")
    func checkoutIDKeyFirst() throws {
        let key = String(decoding: EnvelopeHead.checkoutIDKey, as: UTF8.self)
        #expect(key == #""checkout_id":"#)
        var withID = 0
        for text in Self.envelopes {
            let full = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
            guard let id = full["checkout_id"] as? String, let at = text.range(of: key) else { continue }
            withID += 1
            // The value after the first key is the top-level id, as JSON writes it.
            let value = try #require(try JSONSerialization.jsonObject(with: Data(text[at.upperBound...].utf8.prefix(while: { $0 != UInt8(ascii: ",") })),
                                                                     options: .fragmentsAllowed) as? String, "\(text.prefix(120))")
            #expect(value == id)
        }
        #expect(withID > 150, "the golden envelopes with a checkout id were checked")
    }

    @Test("written heads read back, whatever the numbers")
    func roundTrip() throws {
        for (seq, kindSeq, shard) in [(UInt64(1), UInt64(1), 0), (1_234_567_890_123, 9, 3), (UInt64(Int64.max / 100), 0, 1023)] {
            var w = JSONWriter(capacity: 64)
            EnvelopeHead.write(seq: seq, kindSeq: kindSeq, shard: shard, to: &w)
            w.append(",\"kind\":\"start\"}")
            let p = try #require(w.withUnsafeBytes { LeadingPositions.read($0) })
            #expect(p == LeadingPositions(seq: Int64(seq), kindSeq: Int64(kindSeq), shard: shard))
        }
        var h = JSONWriter(capacity: 64)
        EnvelopeHead.writeHeartbeat(seq: 42, shard: 2, shards: 4, to: &h)
        h.append("}")
        let heartbeat = try #require(try JSONSerialization.jsonObject(with: Data(h.bytes)) as? [String: Any])
        #expect(heartbeat["kind"] as? String == "heartbeat")
        #expect(heartbeat["seq"] as? Int == 42)
        #expect(heartbeat["shard"] as? Int == 2)
        #expect(heartbeat["shards"] as? Int == 4)
        // A heartbeat is not an event's head: the fast reader leaves it to a full parse.
        #expect(h.withUnsafeBytes { LeadingPositions.read($0) } == nil)
    }
}
