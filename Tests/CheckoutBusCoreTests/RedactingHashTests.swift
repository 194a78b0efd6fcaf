import Foundation
import Testing

@testable import CheckoutBusCore
@testable import CheckoutBusJSON
import CheckoutBusProtocol

/// The hash walk that notes redactions (``CanonicalHash/hashNotingRedactions(_:_:into:)``, the
/// hot path: keys read once, a table prefilter, fast paths for keys and values far enough into the
/// text) against the slow, separate functions: the plain walker's ``CanonicalHash/hash(_:_:)``, a
/// reference walk that asks ``BuyerDataRedactor/isRedacted(_:parent:)`` of every member, and the
/// token-by-token redacting writer. Over every container of every sample and corpus line, and of
/// randomized documents, placed at the start of the text and further in.
@Suite("Redacting hash walk against the slow functions")
struct RedactingHashTests {
    /// The redactions the reference walk finds in value `t` of `doc`: every member whose decoded
    /// name ``BuyerDataRedactor/isRedacted(_:parent:)`` redacts under the enclosing member's
    /// decoded name, as (start, end) offsets of its value, in document order; nothing inside one.
    static func referenceRedactions(_ doc: JSONDocument, _ t: Int, parent: [UInt8]? = nil, into out: inout [Int]) {
        switch doc.kind(t) {
        case .object:
            doc.forEachMember(t) { k, v in
                let key = doc.unescapedBytes(k)
                let redacted = key.withUnsafeBytes { key in
                    guard let parent else { return BuyerDataRedactor.isRedacted(key, parent: nil) }
                    return parent.withUnsafeBytes { BuyerDataRedactor.isRedacted(key, parent: $0) }
                }
                if redacted {
                    out += [Int(doc.tokens[v].start), Int(doc.tokens[v].end)]
                } else {
                    referenceRedactions(doc, v, parent: key, into: &out)
                }
            }
        case .array:
            doc.forEachElement(t) { referenceRedactions(doc, $0, parent: parent, into: &out) }
        default:
            break
        }
    }

    /// Checks every container of `doc` (compact); returns how many it checked and how many
    /// redactions they held.
    @discardableResult
    static func checkContainers(_ doc: JSONDocument, _ label: @autoclosure () -> String) -> (Int, Int) {
        #expect(doc.isCompact)
        var checked = 0
        var redacted = 0
        var notes = [7, 8, 9]  // left over from an earlier event: replaced, not added to
        for t in 0..<doc.tokenCount where doc.kind(t) == .object || doc.kind(t) == .array {
            let hash = CanonicalHash.hashNotingRedactions(doc, t, into: &notes)
            var reference: [Int] = []
            referenceRedactions(doc, t, into: &reference)
            var fused = JSONWriter(capacity: 64)
            var tokens = JSONWriter(capacity: 64)
            BuyerDataRedactor.write(doc, t, redactions: notes, to: &fused)
            BuyerDataRedactor.writeTokens(doc, t, to: &tokens)
            let ok = hash == CanonicalHash.hash(doc, t) && notes == reference && fused.bytes == tokens.bytes
            #expect(hash == CanonicalHash.hash(doc, t), "\(label()) token \(t)")
            #expect(notes == reference, "\(label()) token \(t)")
            #expect(String(decoding: fused.bytes, as: UTF8.self) == String(decoding: tokens.bytes, as: UTF8.self),
                    "\(label()) token \(t)")
            if !ok { break }
            checked += 1
            redacted += notes.count / 2
        }
        return (checked, redacted)
    }

    static func parse(_ bytes: [UInt8]) -> JSONDocument? {
        let doc = JSONDocument()
        return (try? doc.parseOwned(bytes)) != nil ? doc : nil
    }

    /// `line` compact, alone (its containers start near the start of the text, where the walk
    /// takes its careful paths) and behind a member long enough that none does.
    static func placements(_ compact: [UInt8]) -> [[UInt8]] {
        [compact, Array(#"{"padding_member":"0123456789","v":"#.utf8) + compact + Array("}".utf8)]
    }

    static let lines = sampleAndCorpusLines

    @Test("every container of every sample and corpus line")
    func samples() throws {
        #expect(Self.lines.count > 150)
        var checked = 0
        var redacted = 0
        for (i, line) in Self.lines.enumerated() {
            guard let compact = RedactionPathTests.compact(line) else { continue }
            for placed in Self.placements(compact) {
                let doc = try #require(Self.parse(placed))
                let (c, r) = Self.checkContainers(doc, "line \(i)")
                checked += c
                redacted += r
            }
        }
        #expect(checked > 2000)
        #expect(redacted > 50)
    }

    // MARK: Randomized documents

    /// A random JSON value, written compactly; `spelling` picks among equal spellings (key order,
    /// escapes, number forms), so two spellings of one value are JSON-equal.
    indirect enum Value {
        case object([(key: [UInt8], value: Value)])
        case array([Value])
        case string([UInt8])
        case number(Int64, fraction: Bool)
        case literal(String)
    }

    /// Names the redactor knows, in several spellings, parents it looks at, common snapshot keys,
    /// and oddities: empty, one byte, separators at either end, long, non-ASCII, quotes.
    static let keyPool: [String] = {
        var keys = BuyerDataRedactor.listedNames + BuyerDataRedactor.listedEndings + BuyerDataRedactor.contextualNames
        keys += ["Email", "EMAIL", "e_mail", "_email", "email_", "-Phone-", "first_name", "lastName", "billing_address",
                 "customerEmail", "ipAddress", "card_Number", "cart_token", "Cart", "paymentMethods", "payment_methods",
                 "deliveries", "destinations", "recipient", "customer", "contact", "shopper", "delivery_address",
                 "id", "status", "currency", "messages", "line_items", "item", "title", "price", "quantity", "totals",
                 "type", "amount", "links", "url", "emailVerified", "email_marketing_consent", "names", "tokens",
                 "", "a", "_", "-", "__", "é", "ém", "clé", "a\"b", "x\\y", "tab\there", "name",
                 "aVeryLongPrefixThatGoesOnAndOnCustomerEmail", "a_rather_long_key_that_is_not_redacted",
                 "sixteen_bytes_ab", "seventeen_bytes_a", "nine_byte", "eightbyt"]
        return keys
    }()

    static func randomKey(_ rng: inout SplitMix64) -> [UInt8] {
        if rng.next() % 4 != 0 { return Array(keyPool[Int(rng.next() % UInt64(keyPool.count))].utf8) }
        // Random bytes from an alphabet with capitals, separators, digits and a two-byte letter.
        let alphabet = Array("abcdeilmnoprstyzAEILMNP_-0129".utf8)
        var key: [UInt8] = []
        for _ in 0..<Int(rng.next() % 41) {
            if rng.next() % 20 == 0 {
                key += Array("é".utf8)
            } else {
                key.append(alphabet[Int(rng.next() % UInt64(alphabet.count))])
            }
        }
        return key
    }

    static func randomValue(_ rng: inout SplitMix64, depth: Int) -> Value {
        // The root is a container (a snapshot is).
        let r = depth == 0 ? rng.next() % 30 : rng.next() % 100
        if depth < 6 && r < 20 {
            let n = Int(rng.next() % 6)
            return .object((0..<n).map { _ in (randomKey(&rng), randomValue(&rng, depth: depth + 1)) })
        }
        if depth < 6 && r < 30 {
            return .array((0..<Int(rng.next() % 5)).map { _ in randomValue(&rng, depth: depth + 1) })
        }
        if r < 65 {
            if rng.next() % 3 == 0 { return .string(randomKey(&rng)) }
            let length = Int(rng.next() % 40)
            return .string((0..<length).map { _ in UInt8(ascii: "a") + UInt8(rng.next() % 26) })
        }
        if r < 90 {
            let digits = Int64(rng.next() % 19)
            var magnitude: Int64 = 1
            for _ in 0..<digits { magnitude = magnitude &* 10 }
            let v = Int64(bitPattern: rng.next()) % max(magnitude, 1)
            return .number(v, fraction: rng.next() % 10 == 0)
        }
        return .literal(["true", "false", "null"][Int(rng.next() % 3)])
    }

    /// `bytes` as a JSON string, some bytes escaped when `spelling` says so (`"` and `\` always).
    static func writeString(_ bytes: [UInt8], _ rng: inout SplitMix64, escape: Bool, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for b in bytes {
            if b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") {
                out += [UInt8(ascii: "\\"), b]
            } else if b == 0x09 {
                out += Array("\\t".utf8)
            } else if escape && b < 0x80 && rng.next() % 3 == 0 {
                out += Array(String(format: "\\u%04X", b).utf8)
            } else {
                out.append(b)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// One spelling of `value`: members in a random order when `shuffle`, and random escapes
    /// and number forms when `vary`.
    static func write(_ value: Value, _ rng: inout SplitMix64, shuffle: Bool, vary: Bool, to out: inout [UInt8]) {
        switch value {
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            let order = shuffle ? members.indices.shuffled(using: &rng) : Array(members.indices)
            for (i, m) in order.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                writeString(members[m].key, &rng, escape: vary, to: &out)
                out.append(UInt8(ascii: ":"))
                write(members[m].value, &rng, shuffle: shuffle, vary: vary, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (i, e) in elements.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                write(e, &rng, shuffle: shuffle, vary: vary, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .string(let bytes):
            writeString(bytes, &rng, escape: vary, to: &out)
        case .number(let v, let fraction):
            var text = String(v)
            if fraction { text += ".5" }
            // Beyond 2⁵³ a fraction spelling may round to another double (CanonicalHashTests).
            if vary && !fraction && v.magnitude < 1_000_000_000_000_000 && rng.next() % 2 == 0 {
                text += [".0", "e0", "E+0", ".000"][Int(rng.next() % 4)]
            }
            out += Array(text.utf8)
        case .literal(let text):
            out += Array(text.utf8)
        }
    }

    @Test("randomized documents: every container, near the start of the text and further in", arguments: 0..<8)
    func randomized(batch: UInt64) throws {
        var rng = SplitMix64(seed: 0x5EED_0000 + batch)
        var checked = 0
        var redacted = 0
        for i in 0..<150 {
            let value = Self.randomValue(&rng, depth: 0)
            var text: [UInt8] = []
            Self.write(value, &rng, shuffle: false, vary: rng.next() % 2 == 0, to: &text)
            for placed in Self.placements(text) {
                let doc = try #require(Self.parse(placed), "\(String(decoding: placed, as: UTF8.self))")
                let (c, r) = Self.checkContainers(doc, "batch \(batch) document \(i)")
                checked += c
                redacted += r
            }
        }
        #expect(checked > 300)
        #expect(redacted > 20)
    }

    @Test("randomized documents: JSON-equal spellings hash alike through the redacting walk", arguments: 0..<4)
    func randomizedEquality(batch: UInt64) throws {
        var rng = SplitMix64(seed: 0xE0A1_0000 + batch)
        for i in 0..<150 {
            let value = Self.randomValue(&rng, depth: 0)
            var hashes: Set<UInt64> = []
            for spelling in 0..<3 {
                var text: [UInt8] = []
                Self.write(value, &rng, shuffle: spelling > 0, vary: spelling > 0, to: &text)
                for (placement, placed) in Self.placements(text).enumerated() {
                    let doc = try #require(Self.parse(placed))
                    let t = placement == 0 ? doc.root : 4  // the padded placement's "v"
                    var notes: [Int] = []
                    hashes.insert(CanonicalHash.hashNotingRedactions(doc, t, into: &notes))
                }
            }
            #expect(hashes.count == 1, "batch \(batch) document \(i)")
        }
    }

    @Test("keys of every length 0…40, plain, escaped, with separators, near the start and further in")
    func keyLengths() throws {
        for length in 0...40 {
            for variant in 0..<4 {
                var key = (0..<length).map { UInt8(ascii: "a") + UInt8($0 % 26) }
                if variant == 1 && length > 0 { key[length - 1] = UInt8(ascii: "_") }
                if variant == 2 && length >= 5 { key.replaceSubrange((length - 5)..., with: Array("Email".utf8)) }
                if variant == 3 && length > 1 { key[0] = UInt8(ascii: "-") }
                for escape in [false, true] {
                    var rng = SplitMix64(seed: UInt64(length * 8 + variant))
                    var text: [UInt8] = Array("{".utf8)
                    Self.writeString(key, &rng, escape: escape, to: &text)
                    text += Array(#":{"k":[1,"v"]},"token":"t"}"#.utf8)
                    for placed in Self.placements(text) {
                        let doc = try #require(Self.parse(placed))
                        Self.checkContainers(doc, "key \(String(decoding: key, as: UTF8.self)) escaped \(escape)")
                    }
                }
            }
        }
    }

    @Test("objects starting at every offset 0…12 with keys of every length 0…17: where the careful and unchecked member loops meet")
    func objectOffsets() throws {
        for offset in 0...12 {
            for length in 0...17 {
                let key = (0..<length).map { UInt8(ascii: "a") + UInt8($0 % 26) }
                let object = Array(#"{""#.utf8) + key + Array(#"":"v","e":1,"Email":[2],"x":{"k":"w"}}"#.utf8)
                let text = [UInt8](repeating: UInt8(ascii: "["), count: offset) + object
                    + [UInt8](repeating: UInt8(ascii: "]"), count: offset)
                let doc = try #require(Self.parse(text))
                let (checked, redacted) = Self.checkContainers(doc, "object at \(offset), key of \(length)")
                #expect(checked == offset + 3 && redacted == offset + 1)  // "Email" counted by each enclosing container
            }
        }
    }

    @Test("deep nesting, with a redacted member at every depth")
    func deepNesting() throws {
        for depth in [1, 2, 10, 40, 60] {
            var text = ""
            for i in 0..<depth { text += i % 2 == 0 ? #"{"Email":"x","n\#(i)":"# : "[" }
            text += #""leaf""#
            for i in (0..<depth).reversed() { text += i % 2 == 0 ? "}" : "]" }
            for placed in Self.placements(Array(text.utf8)) {
                let doc = try #require(Self.parse(placed))
                let (_, redacted) = Self.checkContainers(doc, "depth \(depth)")
                #expect(redacted > 0)
            }
        }
    }
}
