import Foundation
import Testing

@testable import CheckoutBusCore
@testable import CheckoutBusJSON
import CheckoutBusProtocol

/// The docs' tables keep up with the code: a stable code, a raw spelling or a decoded name added
/// to the decoder without its row in `docs/error-codes.md` or `docs/raw-shapes.md` fails here.
@Suite("docs keep up with the decoder")
struct DocsDriftTests {
    /// Every `code span` of a doc, folded as the decoder folds names (letters and digits, lower case).
    static func foldedCodeSpans(_ doc: String, from heading: String? = nil) throws -> Set<String> {
        var text = try String(contentsOf: repositoryRoot.appendingPathComponent(doc), encoding: .utf8)
        if let heading, let range = text.range(of: heading) { text = String(text[range.upperBound...]) }
        var spans: Set<String> = []
        let parts = text.split(separator: "`", omittingEmptySubsequences: false)
        for (i, part) in parts.enumerated() where i % 2 == 1 {
            spans.insert(ErrorCodeNormalizer.fold(String(part)))
        }
        return spans
    }

    @Test("every stable code and every raw spelling the normaliser knows has its row in docs/error-codes.md's table")
    func errorCodeTable() throws {
        let table = try Self.foldedCodeSpans("docs/error-codes.md", from: "## The table")
        for code in StableErrorCode.allCases {
            #expect(table.contains(ErrorCodeNormalizer.fold(code.rawValue)), "stable code \(code.rawValue) has no row")
        }
        let missing = ErrorCodeNormalizer.table.keys.filter { !table.contains($0) }.sorted()
        #expect(missing.isEmpty, "raw spellings without a row in docs/error-codes.md: \(missing)")
    }

    @Test("the sentences that name a cause are the ones docs/error-codes.md lists, with their codes")
    func sentences() throws {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/error-codes.md"), encoding: .utf8)
        let section = try #require(text.range(of: "**Messages that name a cause.**").map { text[$0.upperBound...] })
        let end = section.range(of: "Where the raw error lives").map { section[..<$0.lowerBound] } ?? section
        var listed: [String: String] = [:]
        for line in end.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|").map { String($0).trimmingCharacters(in: CharacterSet.whitespaces) }
            guard cells.count >= 2 else { continue }
            listed[ErrorCodeNormalizer.fold(cells[0])] = cells[1].replacingOccurrences(of: "`", with: "")
        }
        let inCode = Dictionary(uniqueKeysWithValues: ErrorCodeNormalizer.sentences.map { ($0.key, $0.value.rawValue) })
        #expect(listed == inCode, "docs: \(listed)\ncode: \(inCode)")
    }

    @Test("no exact entry is overridden by a family rule")
    func exactWins() {
        for (key, code) in ErrorCodeNormalizer.table {
            #expect(ErrorCodeNormalizer.normalize(rawCode: key) == code, "\(key)")
        }
    }

    @Test("the family rules are the ones docs/error-codes.md lists")
    func familyRules() throws {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/error-codes.md"), encoding: .utf8)
        let section = try #require(text.range(of: "**Family rules.**").map { text[$0.upperBound...] })
        let end = section.range(of: "**Seeing what is unknown.**").map { section[..<$0.lowerBound] } ?? section
        var listed: [String] = []
        for line in end.split(separator: "\n") where line.hasPrefix("| suffix") || line.hasPrefix("| prefix") {
            let cells = line.split(separator: "|").map { String($0).trimmingCharacters(in: CharacterSet.whitespaces) }
            listed.append(cells[0] + " " + cells[1].replacingOccurrences(of: "`", with: "") + " " + cells[2].replacingOccurrences(of: "`", with: ""))
        }
        let inCode = ErrorCodeNormalizer.familyRules.map { "\($0.position.rawValue) \($0.text) \($0.code.rawValue)" }
        #expect(listed == inCode, "docs: \(listed)\ncode: \(inCode)")
    }

    @Test("every event name, callback, state and non-lifecycle message the decoder knows is in docs/raw-shapes.md")
    func decodedNames() throws {
        let shapes = try Self.foldedCodeSpans("docs/raw-shapes.md")
        for (table, names) in [
            ("callback", Array(RawEventDecoder.callbackNames.keys)), ("Primer", Array(RawEventDecoder.primerNames.keys)),
            ("non-lifecycle", Array(RawEventDecoder.nonLifecycleNames)),
            ("JSON-RPC method", Array(RawEventDecoder.documentedMethods)),
        ] {
            let missing = names.filter { !shapes.contains($0) }.sorted()
            #expect(missing.isEmpty, "\(table) names without a mention in docs/raw-shapes.md: \(missing)")
        }
    }

    /// What a script under `scripts/` prints, run from the repository root.
    static func scriptOutput(_ name: String) throws -> String {
        let process = Process()
        process.executableURL = repositoryRoot.appendingPathComponent("scripts/\(name)")
        process.currentDirectoryURL = repositoryRoot
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "scripts/\(name) failed")
        return String(decoding: data, as: UTF8.self)
    }

    @Test("the docs' tables are what the scripts print from the code, row for row", arguments: [
        ("name-tables", "docs/raw-shapes.md"),
        ("error-code-table", "docs/error-codes.md"),
    ])
    func tablesAsPrinted(script: String, doc: String) throws {
        let table = try Self.scriptOutput(script)
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent(doc), encoding: .utf8)
        let rows = table.split(separator: "\n").filter { $0.hasPrefix("|") }
        #expect(rows.count > 10)
        let missing = rows.filter { !text.contains($0) }
        #expect(missing.isEmpty, "rows of scripts/\(script) missing from \(doc) (paste its output): \(missing)")
    }
}
