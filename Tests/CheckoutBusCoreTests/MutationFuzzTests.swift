import CheckoutBusCore
import CheckoutBusJSON
import CheckoutBusProtocol
import Foundation
import Testing

/// A seeded random-mutation run over real raw events: every mutant is processed, none may trap,
/// and every outcome is either a well-formed envelope or a dead letter with a known reason.
@Suite("mutation fuzz")
struct MutationFuzzTests {
    static func sample(_ name: String) -> [String] { repositoryLines("samples/" + name) }

    static let seeds = sample("tour.jsonl")
    /// Bridge and relay packaging: JSON in strings, nested wrappers, holders, placeholder ids.
    static let bridgeSeeds = sample("bridges.jsonl")

    @Test("20,000 mutants of the tour sample: no trap, every output valid JSON")
    func mutants() throws {
        #expect(Self.seeds.count == 13)
        try Self.run(Self.seeds, seed: 0xC0FFEE)
    }

    @Test("20,000 mutants of bridge and relay packaging: no trap, every output valid JSON")
    func bridgeMutants() throws {
        #expect(Self.bridgeSeeds.count == 48)
        try Self.run(Self.bridgeSeeds, seed: 0xB1D6E5)
    }

    static func run(_ seeds: [String], seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        let processor = EventProcessor()
        let interesting: [UInt8] = Array("{}[]\",:\\0123456789.-eEtrufalsn \u{7F}".utf8) + [0x00, 0x80, 0xC3, 0xFF, 0xED, 0xF4]
        var deadLetters = 0
        var published = 0
        for i in 0..<20_000 {
            var bytes = Array(seeds[i % seeds.count].utf8)
            for _ in 0..<(1 + Int(rng.next() % 4)) {
                let at = Int(rng.next() % UInt64(bytes.count))
                switch rng.next() % 4 {
                case 0: bytes[at] = interesting[Int(rng.next() % UInt64(interesting.count))]
                case 1: bytes.remove(at: at)
                case 2: bytes.insert(interesting[Int(rng.next() % UInt64(interesting.count))], at: at)
                default: bytes.removeLast(min(bytes.count - 1, Int(rng.next() % 64)))
                }
                if bytes.isEmpty { bytes = [0x7B] }
            }
            let result = bytes.withUnsafeBytes { processor.process($0, receivedAt: Timestamp(milliseconds: 0), now: 1) }
            switch result.outcome {
            case .suppressed, .duplicate, .duplicateDeadLetter: continue
            case .deadLettered(let reason):
                deadLetters += 1
                #expect(DeadLetterReason.all.contains(reason))
            case .published: published += 1
            }
            let envelope = result.publication.map { Array($0.envelope) } ?? []
            let parsed = try? JSONSerialization.jsonObject(with: Data(envelope))
            #expect(parsed is [String: Any], "mutant \(i) produced an invalid envelope: \(String(decoding: envelope, as: UTF8.self)) from \(String(decoding: bytes, as: UTF8.self))")
        }
        #expect(deadLetters > 1000)
        #expect(published > 1000)
    }
}

@Suite("numbers beyond a double")
struct NumberRangeTests {
    @Test("1e999 and a 400-digit integer are refused; 1e308 is kept", arguments: [
        ("{\"a\":1e999}", false), ("{\"a\":-2E500}", false), ("{\"a\":" + String(repeating: "9", count: 400) + "}", false),
        ("{\"a\":1e308}", true), ("{\"a\":1.5e-400}", true),
    ])
    func range(_ text: String, _ accepted: Bool) {
        let doc = JSONDocument()
        let bytes = Array(text.utf8)
        var reason: JSONParseError.Reason?
        bytes.withUnsafeBytes { buf in
            do throws(JSONParseError) { try doc.parse(buf) } catch { reason = error.reason }
        }
        #expect((reason == nil) == accepted)
        if !accepted { #expect(reason == .numberOutOfRange) }
    }
}
