#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Named places in the code where a test can make a system call fail, or the process die, at a
/// chosen moment — the seam etcd's `gofail` failpoints give its WAL tests.
///
/// Off unless the environment variable `CHECKOUTBUS_FAILPOINTS` is set when the process starts;
/// then each ``hit(_:)`` of a named point counts, and the rule for that name says what happens
/// from which hit on:
///
///     CHECKOUTBUS_FAILPOINTS="journal.fdatasync=eio@3;control.replay=kill@1"
///
/// | action | what ``hit(_:)`` does from hit `N` on (`@N`, default 1) |
/// |---|---|
/// | `eio`, `enospc`, `eintr`… | returns that `errno` (`EIO`, `ENOSPC`, …): the caller fails the call as the kernel would have |
/// | `kill` | SIGKILLs the process there and then (no handler, no flush: kill -9 at that line) |
/// | `stop` | SIGSTOPs the process (a test SIGCONTs it) |
///
/// An errno action goes on failing every later hit (a disk that has gone bad stays bad); add `x1`
/// (`eio@3x1`) to fail only hit 3. The points are listed in docs/durability.md ("Failpoints").
/// A process started with any failpoint logs it once on stderr. Never set in production.
///
/// `Sendable`: the counts sit behind a `Mutex`; with no variable set, ``hit(_:)`` is one load
/// and a branch.
public enum Failpoints {
    struct Rule: Sendable {
        enum Action: Sendable {
            case fail(Int32)
            case kill
            case stop
        }
        var action: Action
        var from: Int
        var times: Int?
        var hits = 0
    }

    /// The rules by name and their hit counts. `Sendable`: behind a `Mutex`.
    final class Table: Sendable {
        let rules: Mutex<[String: Rule]>
        init(_ rules: [String: Rule]) { self.rules = Mutex(rules) }
    }

    /// nil when the variable is unset (the usual case).
    private static let table: Table? = {
        guard let raw = getenv("CHECKOUTBUS_FAILPOINTS"), raw.pointee != 0 else { return nil }
        let text = String(cString: raw)
        let parsed = parse(text)
        let line = "failpoints: CHECKOUTBUS_FAILPOINTS=\(text) (\(parsed.count) active; a test seam, never for production)\n"
        say(line)
        return Table(parsed)
    }()

    /// Whether any failpoint is set in this process.
    public static var isActive: Bool { table != nil }

    /// Counts a hit of point `name`, and does what its rule says.
    /// - Returns: an `errno` the caller must fail its call with, or nil to go on as usual.
    @inline(__always)
    public static func hit(_ name: StaticString) -> Int32? {
        guard let table else { return nil }
        return fire(name.description, table)
    }

    private static func say(_ line: String) {
        var bytes = Array(line.utf8)
        _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
    }

    private static func fire(_ name: String, _ table: Table) -> Int32? {
        let action = table.rules.withLock { table -> Rule.Action? in
            guard var rule = table[name] else { return nil }
            rule.hits += 1
            table[name] = rule
            guard rule.hits >= rule.from else { return nil }
            if let times = rule.times, rule.hits >= rule.from + times { return nil }
            return rule.action
        }
        switch action {
        case nil: return nil
        case .fail(let code)?: return code
        case .kill?:
            say("failpoints: \(name): kill\n")
            kill(getpid(), SIGKILL)
            return nil
        case .stop?:
            kill(getpid(), SIGSTOP)
            return nil
        }
    }

    /// `name=action[@N][xK]` entries separated by `;` or `,`; unknown actions are ignored (logged).
    static func parse(_ text: String) -> [String: Rule] {
        var table: [String: Rule] = [:]
        for entry in text.split(whereSeparator: { $0 == ";" || $0 == "," }) {
            let parts = entry.split(separator: "=", maxSplits: 1).map { $0.trimmingSpaces }
            guard parts.count == 2 else { continue }
            var spec = Substring(parts[1])
            var times: Int?
            if let x = spec.lastIndex(of: "x"), let n = Int(spec[spec.index(after: x)...]) {
                times = n
                spec = spec[..<x]
            }
            var from = 1
            if let at = spec.firstIndex(of: "@") {
                from = Int(spec[spec.index(after: at)...]) ?? 1
                spec = spec[..<at]
            }
            let action: Rule.Action
            switch spec {
            case "kill": action = .kill
            case "stop": action = .stop
            case "eio": action = .fail(EIO)
            case "enospc": action = .fail(ENOSPC)
            case "edquot": action = .fail(EDQUOT)
            case "erofs": action = .fail(EROFS)
            case "eintr": action = .fail(EINTR)
            case "einval": action = .fail(EINVAL)
            default:
                say("failpoints: \(parts[0]): unknown action \(spec); ignored\n")
                continue
            }
            table[parts[0]] = Rule(action: action, from: max(1, from), times: times)
        }
        return table
    }
}

extension Substring {
    fileprivate var trimmingSpaces: String {
        String(drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }
}
