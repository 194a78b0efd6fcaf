#if canImport(Glibc)
import Glibc
#endif

/// One flag of a command, declared once: its name, the value it takes, its help, its default and
/// the environment variable read when it is absent.
///
/// A command lists its options in a ``CommandSpec``; the parser accepts exactly those, `--help` is
/// written from them, and a default is read from the declaration (``CommandLineArguments/value(_:)``,
/// ``CommandLineArguments/int(_:in:)``), so help, parser and behaviour cannot disagree. Options
/// shared by several commands (`--control`, `--timeout`, the CURVE keys) are declared once where
/// they belong and listed by each command. A value, `Sendable`.
public struct CommandOption: Sendable, Hashable {
    /// The flag without dashes.
    public let name: String
    /// What the value is called in `--help` (`ENDPOINT`, `N`); nil for a switch, which takes none.
    public let argument: String?
    /// What it does, for `--help`; the default and the environment variable are appended.
    public let help: String
    /// The value used when neither the flag nor ``environment`` gives one; nil: none.
    public let defaultValue: String?
    /// Said in `--help` instead of ``defaultValue`` when the default follows from something else.
    public let defaultNote: String?
    /// An environment variable read when the flag is absent.
    public let environment: String?
    /// Whether `--help`'s usage line marks it repeatable (`…`).
    public let repeatable: Bool

    public init(_ name: String, _ argument: String? = nil, help: String, default defaultValue: String? = nil,
                defaultNote: String? = nil, environment: String? = nil, repeatable: Bool = false) {
        self.name = name
        self.argument = argument
        self.help = help
        self.defaultValue = defaultValue
        self.defaultNote = defaultNote
        self.environment = environment
        self.repeatable = repeatable
    }

    public var isSwitch: Bool { argument == nil }

    /// `--name ARGUMENT`, as `--help` shows it.
    public var label: String { "--" + name + (argument.map { " " + $0 } ?? "") }

    /// The same option with another help text (a command that uses a shared flag its own way).
    public func described(_ help: String) -> CommandOption {
        .init(name, argument, help: help, default: defaultValue, defaultNote: defaultNote, environment: environment,
              repeatable: repeatable)
    }

    /// The same option with another default.
    public func defaulting(to value: String?, note: String? = nil) -> CommandOption {
        .init(name, argument, help: help, default: value, defaultNote: note, environment: environment, repeatable: repeatable)
    }

    /// This option's lines in `--help`: the flag, its help, its default and its environment variable.
    public var helpEntry: String {
        var text = help
        if let note = defaultNote ?? defaultValue.map({ $0.isEmpty ? "\"\"" : $0 }) { text += " (default \(note))" }
        if let environment { text += "; also $\(environment)" }
        return HelpText.entry(label, text)
    }
}

/// A command's flags and the words around them: the parser and `--help` both come from it.
/// A value, `Sendable`.
public struct CommandSpec: Sendable {
    /// Options listed under a heading of their own in `--help` (nil: the first, untitled group).
    public struct Group: Sendable {
        public let title: String?
        public let options: [CommandOption]

        public init(_ title: String? = nil, _ options: [CommandOption]) {
            self.title = title
            self.options = options
        }
    }

    /// `checkoutbus stats`: what `USAGE:` and errors name.
    public let command: String
    /// One line after the command's name in `--help`.
    public let summary: String
    /// The operands, as the usage line shows them after the command (`CHECKOUT_ID`, `[FILE …]`).
    public let operands: String
    /// Each operand's line in `--help`: the operand and what it is.
    public let operandHelp: [HelpText.Item]
    public let groups: [Group]
    /// Paragraphs after the flags: what the command prints, exit statuses.
    public let notes: String

    public init(_ command: String, summary: String, operands: String = "", operandHelp: [HelpText.Item] = [],
                groups: [Group], notes: String = "") {
        self.command = command
        self.summary = summary
        self.operands = operands
        self.operandHelp = operandHelp
        self.groups = groups
        self.notes = notes
        var seen = Set<String>()
        for option in options {
            precondition(seen.insert(option.name).inserted, "\(command): --\(option.name) is declared twice")
        }
    }

    public init(_ command: String, summary: String, operands: String = "", operandHelp: [HelpText.Item] = [],
                options: [CommandOption], notes: String = "") {
        self.init(command, summary: summary, operands: operands, operandHelp: operandHelp,
                  groups: [Group(nil, options)], notes: notes)
    }

    /// Every option, in the order of `--help`.
    public var options: [CommandOption] { groups.flatMap(\.options) }

    /// The option named `name`, if the command has one.
    public func option(_ name: String) -> CommandOption? { options.first { $0.name == name } }

    /// Parses `arguments` (after the command's name): exactly the declared flags are accepted.
    public func parse(_ arguments: [String]) throws(CommandLineArguments.UsageError) -> CommandLineArguments {
        try CommandLineArguments(arguments, options: options)
    }

    /// `--help`, written from the declarations.
    public var help: String {
        var out = HelpText.wrap("\(command) — \(summary)") + "\n"
        let usage = "USAGE: \(command)" + (operands.isEmpty ? "" : " " + operands)
        var items: [[String]] = groups.map { $0.options.map { "[" + $0.label + ($0.repeatable ? " …" : "") + "]" } }
        items = items.filter { !$0.isEmpty }
        out += HelpText.usage(usage, hang: "USAGE: \(command) ".count, items) + "\n"
        if !operandHelp.isEmpty {
            out += "\n" + operandHelp.map { HelpText.entry($0.term, $0.text) }.joined()
        }
        for group in groups where !group.options.isEmpty {
            out += "\n" + (group.title.map(HelpText.wrap) ?? "")
            out += group.options.map(\.helpEntry).joined()
        }
        if !notes.isEmpty { out += "\n" + notes + (notes.hasSuffix("\n") ? "" : "\n") }
        return out
    }
}

/// How `--help` texts are laid out: 100 columns, flags in a column of their own.
public enum HelpText {
    /// A term (an operand, a flag) and what it is.
    public struct Item: Sendable {
        public let term: String
        public let text: String

        public init(_ term: String, _ text: String) {
            self.term = term
            self.text = text
        }
    }

    public static let width = 100
    /// The column where an entry's text starts.
    public static let indent = 29

    /// A term and its text, wrapped to ``width`` columns with the text in a column of its own; a
    /// term too long for its column has its text on the next line.
    public static func entry(_ term: String, _ text: String) -> String {
        var lines: [String] = []
        var line = "  " + term
        if line.count >= indent - 1 {
            lines.append(line)
            line = ""
        }
        line += String(repeating: " ", count: indent - line.count)
        var empty = true
        for word in text.split(separator: " ") {
            if !empty && line.count + 1 + word.count > width {
                lines.append(line)
                line = String(repeating: " ", count: indent)
                empty = true
            }
            line += (empty ? "" : " ") + word
            empty = false
        }
        lines.append(line)
        return lines.joined(separator: "\n") + "\n"
    }

    /// Text as lines of at most ``width`` columns, broken between words; ends with a newline.
    public static func wrap(_ text: String) -> String {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty && line.count + 1 + word.count > width {
                lines.append(line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + word
        }
        lines.append(line)
        return lines.joined(separator: "\n") + "\n"
    }

    /// `USAGE: command operands` and then each group's items, wrapped under the first item; each
    /// group starts a line of its own.
    static func usage(_ head: String, hang indent: Int, _ groups: [[String]]) -> String {
        let hang = String(repeating: " ", count: min(indent, 40))
        var lines: [String] = []
        var line = head
        for (g, group) in groups.enumerated() {
            if g > 0 {
                lines.append(line)
                line = hang
            }
            var empty = g > 0
            for item in group {
                if !empty && line.count + 1 + item.count > width {
                    lines.append(line)
                    line = hang
                    empty = true
                }
                line += (empty ? "" : " ") + item
                empty = false
            }
        }
        lines.append(line)
        return lines.joined(separator: "\n")
    }
}

extension CommandLineArguments {
    /// Parses `arguments` accepting exactly `options`.
    public init(_ arguments: [String], options: [CommandOption]) throws(UsageError) {
        try self.init(arguments, valued: Set(options.filter { !$0.isSwitch }.map(\.name)),
                      switches: Set(options.filter(\.isSwitch).map(\.name)))
    }

    /// The option's last value given, else its environment variable's, else its default.
    public func value(_ option: CommandOption) -> String? {
        if let v = value(option.name) { return v }
        if let environment = option.environment, let v = getenv(environment) { return String(cString: v) }
        return option.defaultValue
    }

    /// The value of an option declared with a default (or an environment variable that may be
    /// unset: then its default).
    public func string(_ option: CommandOption) -> String {
        guard let v = value(option) else { preconditionFailure("--\(option.name) has no default; read it with value") }
        return v
    }

    /// The option's value (or its default) as one of `choices`, in the order `--help` names them.
    public func choice<T>(_ option: CommandOption, _ choices: KeyValuePairs<String, T>) throws(UsageError) -> T {
        let raw = string(option)
        guard let match = choices.first(where: { $0.key == raw }) else {
            let names = choices.map(\.key)
            let list = names.count <= 2 ? names.joined(separator: " or ")
                : names.dropLast().joined(separator: ", ") + " or " + names.last!
            throw UsageError(.invalidValue, "--\(option.name) must be \(list), got \(raw)")
        }
        return match.value
    }

    /// Whether the flag was given on the command line (not its environment variable or default).
    public func given(_ option: CommandOption) -> Bool { value(option.name) != nil || has(option.name) }

    /// Whether the switch was given.
    public func has(_ option: CommandOption) -> Bool { has(option.name) }

    /// Every value given for a repeatable option (its default, when it has one and none was given).
    public func all(_ option: CommandOption) -> [String] {
        let given = all(option.name)
        if given.isEmpty, let d = option.defaultValue { return [d] }
        return given
    }

    /// The option's value as an integer within `range`; nil when it has no value and no default.
    public func optionalInt(_ option: CommandOption, in range: ClosedRange<Int>) throws(UsageError) -> Int? {
        guard let raw = value(option) else { return nil }
        guard let v = Int(raw), range.contains(v) else {
            throw UsageError(.invalidValue, "--\(option.name) must be an integer in \(range.lowerBound)...\(range.upperBound), got \(raw)")
        }
        return v
    }

    /// The option's value as an integer within `range`, for an option declared with a default.
    public func int(_ option: CommandOption, in range: ClosedRange<Int>) throws(UsageError) -> Int {
        guard let v = try optionalInt(option, in: range) else {
            preconditionFailure("--\(option.name) has no default; read it with optionalInt")
        }
        return v
    }
}
