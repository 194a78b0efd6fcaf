import Foundation
import Testing

@testable import CheckoutBusCore
@testable import CheckoutBusJSON
import CheckoutBusProtocol

/// The docs' tables keep up with the code: a stable code, a raw spelling or a decoded name added
/// to the decoder without its row in `docs/error-codes.md` or `docs/raw-shapes.md` fails here.
@Suite("docs keep up with the decoder")
struct DocsDriftTests {
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

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
}
