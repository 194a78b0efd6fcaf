/// Parses `--flag value`, `--flag=value`, boolean `--flag`, repeated flags and positional arguments.
///
/// Small on purpose (no outside packages): each command declares which flags take a value and
/// which are switches; anything else is an error naming the flag. `Sendable`.
public struct CommandLineArguments: Sendable {
    public private(set) var values: [String: [String]] = [:]
    public private(set) var switches: Set<String> = []
    public private(set) var positionals: [String] = []

    /// A usage error: the message to print before the help text.
    ///
    /// `Sendable`. A struct, so codes can be added without breaking a `switch`: compare ``code``
    /// with the `static let`s of ``Code``.
    public struct UsageError: Error, CustomStringConvertible, Sendable {
        /// What is wrong with the arguments, for code to act on.
        public struct Code: Hashable, Sendable, CustomStringConvertible {
            public let name: String
            private init(_ name: String) { self.name = name }
            public var description: String { name }

            /// A flag the command does not know.
            public static let unknownFlag = Code("unknown_flag")
            /// A flag that takes a value was given none.
            public static let missingValue = Code("missing_value")
            /// A switch was given a value (`--flag=value`).
            public static let unexpectedValue = Code("unexpected_value")
            /// A flag's value is out of range or of the wrong form.
            public static let invalidValue = Code("invalid_value")
            /// Anything else: missing or extra arguments, flags that do not go together.
            public static let invalidUsage = Code("invalid_usage")
        }

        public let code: Code
        public let description: String

        public init(_ code: Code, _ description: String) {
            self.code = code
            self.description = description
        }

        /// A usage error without a more precise code (``Code/invalidUsage``).
        public init(_ description: String) { self.init(.invalidUsage, description) }
    }

    /// - Parameters:
    ///   - arguments: the arguments after the command name.
    ///   - valued: flags that take a value, without dashes.
    ///   - switches: flags that take none.
    public init(_ arguments: [String], valued: Set<String>, switches allowed: Set<String>) throws(UsageError) {
        var i = 0
        var onlyPositionals = false
        while i < arguments.count {
            let arg = arguments[i]
            i += 1
            if onlyPositionals || !arg.hasPrefix("--") || arg == "-" {
                positionals.append(arg)
                continue
            }
            if arg == "--" {
                onlyPositionals = true
                continue
            }
            var name = String(arg.dropFirst(2))
            var inline: String?
            if let eq = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            if allowed.contains(name) {
                guard inline == nil else { throw UsageError(.unexpectedValue, "--\(name) takes no value") }
                switches.insert(name)
            } else if valued.contains(name) {
                if let inline {
                    values[name, default: []].append(inline)
                } else {
                    guard i < arguments.count else { throw UsageError(.missingValue, "--\(name) needs a value") }
                    values[name, default: []].append(arguments[i])
                    i += 1
                }
            } else {
                let hint = CommandLineArguments.closest(name, among: allowed.union(valued)).map { "; did you mean --\($0)?" } ?? ""
                throw UsageError(.unknownFlag, "unknown flag --\(name)\(hint)")
            }
        }
    }

    /// The candidate `word` was most likely meant as (a typo: at most two edits, or one that
    /// starts the same way), or nil when none is close.
    public static func closest(_ word: String, among candidates: some Sequence<String>) -> String? {
        let w = Array(word.lowercased().utf8)
        var best: (String, Int)?
        for candidate in candidates {
            let c = Array(candidate.lowercased().utf8)
            var distance = editDistance(w, c)
            if w.count >= 3 && c.starts(with: w) { distance = min(distance, 1) }
            let limit = w.count <= 4 ? 1 : 2
            if distance <= limit, best.map({ distance < $0.1 || (distance == $0.1 && candidate < $0.0) }) ?? true {
                best = (candidate, distance)
            }
        }
        return best?.0
    }

    /// Levenshtein distance, with a swap of two neighbours counted as one edit.
    static func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1) }
            }
        }
        return d[a.count][b.count]
    }

    /// The last value given for `name`.
    public func value(_ name: String) -> String? { values[name]?.last }

    /// Every value given for a repeatable flag.
    public func all(_ name: String) -> [String] { values[name] ?? [] }

    public func has(_ name: String) -> Bool { switches.contains(name) }

    /// An integer flag within `range`, or `defaultValue` when absent.
    public func int(_ name: String, default defaultValue: Int, in range: ClosedRange<Int>) throws(UsageError) -> Int {
        guard let raw = value(name) else { return defaultValue }
        guard let v = Int(raw), range.contains(v) else {
            throw UsageError(.invalidValue, "--\(name) must be an integer in \(range.lowerBound)...\(range.upperBound), got \(raw)")
        }
        return v
    }
}
