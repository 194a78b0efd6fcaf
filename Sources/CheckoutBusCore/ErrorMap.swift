import Synchronization
import CheckoutBusProtocol

/// Raw codes an operator maps without a release (`--error-map FILE`, docs/error-codes.md,
/// "Mappings operators own"): exact raw codes and prefix or suffix patterns, each to a stable
/// code, optionally for one family only. Consulted before the built-in table, so it adds and
/// overrides. `Sendable`: a value.
///
/// The file: one `RAW = CODE` a line, `#` comments and blank lines ignored. `RAW` is a raw code
/// (folded as the table folds it: any case, separators ignored), `prefix:TEXT` or `suffix:TEXT`;
/// a leading `FAMILY:` (`ecp`, `sheet_bridge`, `callback`, `primer`) limits the line to that raw
/// family. `CODE` is a stable code (docs/error-codes.md), optionally followed by `terminal` or
/// `recoverable`: the failure's terminal-ness, in the families that carry one (every family but
/// `ecp`, whose `ec.error` always ends the checkout).
package struct ErrorMap: Sendable, Equatable {
    /// A line: an exact raw code's code, or a pattern (the same prefix or suffix match as the
    /// built-in family rules), for one family or all.
    struct Entry: Sendable, Equatable {
        var family: RawFormat?
        var code: StableErrorCode
        /// The terminal-ness the line gives, or nil to keep the SDK's.
        var terminal: Bool?
        /// Nil for an exact line.
        var pattern: ErrorCodeNormalizer.FamilyRule?
    }

    var exact: [String: [Entry]] = [:]
    var patterns: [Entry] = []

    package init() {}

    /// Entries in the map.
    package var count: Int { exact.values.reduce(0) { $0 + $1.count } + patterns.count }

    /// A line the file cannot be read by. `Sendable`.
    package struct ParseError: Error, CustomStringConvertible, Sendable {
        package let line: Int
        package let reason: String
        package var description: String { "line \(line): \(reason)" }
    }

    /// Reads a map file's text.
    /// - Throws: ``ParseError`` naming the first bad line.
    package init(parsing text: String) throws(ParseError) {
        for (i, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
            let trimmed = line.trimmingWhitespace()
            if trimmed.isEmpty { continue }
            let sides = trimmed.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard sides.count == 2 else { throw ParseError(line: i + 1, reason: "expected RAW = CODE") }
            var left = String(sides[0]).trimmingWhitespace()
            let words = sides[1].split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" }).map(String.init)
            let right = words.first ?? ""
            guard let code = StableErrorCode(rawValue: right) else {
                throw ParseError(line: i + 1, reason: "\(right.isEmpty ? "no code" : "`\(right)` is not a stable code") (one of \(StableErrorCode.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            var family: RawFormat?
            if let colon = left.firstIndex(of: ":"),
                let f = ErrorMap.families.first(where: { "\($0.name)" == String(left[..<colon]) })
            {
                family = f
                left = String(left[left.index(after: colon)...]).trimmingWhitespace()
            }
            var terminal: Bool?
            if words.count > 1 {
                switch words[1] {
                case "terminal": terminal = true
                case "recoverable": terminal = false
                default: throw ParseError(line: i + 1, reason: "`\(words[1])` after the code: expected terminal or recoverable")
                }
                guard words.count == 2 else { throw ParseError(line: i + 1, reason: "`\(words[2])`: one word at most after the code") }
                if family == .ecp {
                    throw ParseError(line: i + 1, reason: "ecp failures are always terminal (an ec.error ends the checkout): no terminal-ness to map")
                }
            }
            var position: ErrorCodeNormalizer.FamilyRule.Position?
            for p in [ErrorCodeNormalizer.FamilyRule.Position.prefix, .suffix] where left.hasPrefix("\(p.rawValue):") {
                position = p
                left = String(left.dropFirst(p.rawValue.count + 1)).trimmingWhitespace()
            }
            let folded = ErrorCodeNormalizer.fold(left)
            guard !folded.isEmpty else { throw ParseError(line: i + 1, reason: "no raw code before `=`") }
            if let position {
                patterns.append(Entry(family: family, code: code, terminal: terminal,
                                      pattern: ErrorCodeNormalizer.FamilyRule(position: position, text: folded, code: code)))
            } else {
                exact[folded, default: []].append(Entry(family: family, code: code, terminal: terminal, pattern: nil))
            }
        }
    }

    /// What a line of the map gives a failure: its stable code, and its terminal-ness when the line
    /// names one (never for `ecp`).
    package struct Mapping: Sendable, Equatable {
        package var code: StableErrorCode
        package var terminal: Bool?
    }

    /// The mapping this map gives a folded raw code of `family`, if any: an exact line first (one for
    /// this family before one for all), then the first pattern that matches.
    func mapping(forFolded key: String, family: RawFormat?) -> Mapping? {
        let entry: Entry?
        if let entries = exact[key],
            let e = entries.first(where: { $0.family != nil && $0.family == family }) ?? entries.first(where: { $0.family == nil })
        {
            entry = e
        } else {
            entry = patterns.first { ($0.family == nil || $0.family == family) && $0.pattern!.matches(key) }
        }
        return entry.map { Mapping(code: $0.code, terminal: family == .ecp ? nil : $0.terminal) }
    }

    static let families: [RawFormat] = RawFormat.allCases

    /// The map in force for every processor of the process (set at start and on SIGHUP).
    static let current = Mutex(ErrorMap())

    /// What the installed map gives `rawCode` of `family`, if it names it.
    static func mapping(forRaw rawCode: String, family: RawFormat) -> Mapping? {
        current.withLock { map in
            map.exact.isEmpty && map.patterns.isEmpty ? nil : map.mapping(forFolded: ErrorCodeNormalizer.fold(rawCode), family: family)
        }
    }

    /// Makes `map` the one every decoder consults from its next failure on.
    package static func install(_ map: ErrorMap) { current.withLock { $0 = map } }
}

extension String {
    func trimmingWhitespace() -> String {
        var s = Substring(self)
        while let c = s.first, c == " " || c == "\t" || c == "\r" { s = s.dropFirst() }
        while let c = s.last, c == " " || c == "\t" || c == "\r" { s = s.dropLast() }
        return String(s)
    }
}
