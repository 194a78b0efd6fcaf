import CheckoutBusCore
import Foundation
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// `checkoutbus stats`: the control socket's `stats`, for people (or as JSON).
///
/// Not `Sendable`; runs on the calling thread.
package struct StatsCommand {
    static let timeout = BusOptions.timeout(5)
    static let json = CommandOption("json", help: "print the daemon's stats object as is, on one line")

    package static let spec = CommandSpec(
        "checkoutbus stats", summary: "what a running daemon has done: counters, journal, subscribers' drops.",
        options: [BusOptions.control, timeout, json] + CurveClientKeys.options,
        notes: """
            The same figures, for machines, are at the daemon's --metrics endpoint (/metrics).
            Exits 1 when the daemon does not answer.
            """)
    package static var help: String { spec.help }

    package var control: String
    package var timeoutSeconds: Int
    package var json: Bool
    package var curve: CurveClientKeys?

    package init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try Self.spec.parse(arguments)
        curve = try CurveClientKeys.parse(args)
        control = args.string(BusOptions.control)
        timeoutSeconds = try args.int(Self.timeout, in: 1...3600)
        json = args.has(Self.json)
        if !args.positionals.isEmpty { throw .init("unexpected argument \(args.positionals[0])") }
    }

    package func run() -> Int32 {
        do {
            guard let reply = try StatsCommand.request(control, timeoutSeconds: timeoutSeconds, curve: curve) else {
                let why = curve == nil ? "" : CurveClientKeys.refusalHint
                FileHandleWriter.standardError("checkoutbus stats: no answer from \(control) within \(timeoutSeconds)s\(why)\n")
                return 1
            }
            if json {
                FileHandleWriter.standardOutput(String(decoding: reply, as: UTF8.self) + "\n")
                return 0
            }
            guard let s = try JSONSerialization.jsonObject(with: Data(reply)) as? [String: Any] else {
                FileHandleWriter.standardError("checkoutbus stats: the reply is not a JSON object\n")
                return 1
            }
            FileHandleWriter.standardOutput(StatsCommand.render(s))
            return 0
        } catch {
            FileHandleWriter.standardError("checkoutbus stats: \(error)\n")
            return 1
        }
    }

    /// Asks the daemon at `control` for `stats` once.
    /// - Returns: the reply's JSON bytes, or nil when none came within `timeoutSeconds`.
    package static func request(_ control: String, timeoutSeconds: Int, curve: CurveClientKeys? = nil) throws -> [UInt8]? {
        try ControlRequest.send(ControlRequestWire.stats(), to: control, timeoutSeconds: timeoutSeconds, curve: curve)
    }

    /// The stats object as aligned text.
    package static func render(_ s: [String: Any]) -> String {
        func int(_ v: Any?) -> Int { (v as? NSNumber)?.intValue ?? 0 }
        func dict(_ v: Any?) -> [String: Any] { v as? [String: Any] ?? [:] }
        var out = ""
        func line(_ label: String, _ value: String) {
            // Long labels (subscriber names) are kept whole, one space before the value.
            let pad = max(1, 22 - label.count)
            out += label + String(repeating: " ", count: pad) + value + "\n"
        }
        let counters = dict(s["counters"])
        line("seq", "last \(int(s["last_seq"])), durable \(int(s["durable_seq"])), first retained \(int(s["first_seq"]))")
        line("received", "\(int(counters["received"]))")
        let published = dict(counters["published"])
        line("published", LifecycleKind.allCases.map { String(describing: $0.name) }.map { "\($0) \(int(published[$0]))" }
            .joined(separator: ", "))
        line("suppressed", "\(int(counters["suppressed"]))")
        let dead = dict(counters["deadlettered"])
        line("dead-lettered", dead.isEmpty ? "0" : dead.keys.sorted().map { "\($0) \(int(dead[$0]))" }.joined(separator: ", "))
        line("checkouts", "tracked \(int(counters["tracked_checkouts"])), evicted \(int(counters["evicted_checkouts"])), expired \(int(counters["expired_checkouts"]))")
        let journal = dict(s["journal"])
        line("journal", "\(int(journal["segments"])) segment(s), \(int(journal["bytes"])) bytes, \(int(journal["fsyncs"])) fsyncs (max \(int(journal["fsync_max_us"])) µs), \(journal["writes"] as? String == "direct" ? "direct writes" : "writes through the page cache")")
        let stages = dict(s["stages"])
        let timed = int(stages["timed"])
        if timed > 0 {
            // Mean µs per sampled event, by stage (stats' `stages`, docs/durability.md).
            func us(_ ns: Any?, _ n: Int) -> String { String(format2: Double(int(ns)) / Double(max(1, n)) / 1000) }
            let publishTimed = int(stages["publish_timed"])
            line("pipeline µs/event", "receive \(us(stages["receive_ns"], timed)), decode \(us(stages["decode_ns"], timed)), rules \(us(stages["rules_ns"], timed)), envelope \(us(stages["envelope_ns"], timed)), journal append \(us(stages["journal_append_ns"], timed)), publish \(us(stages["publish_ns"], publishTimed)) (\(timed) events timed)")
        }
        let subscribers = dict(s["subscribers"])
        if subscribers.isEmpty {
            line("subscribers", "none reported")
        } else {
            for name in subscribers.keys.sorted() {
                let r = dict(subscribers[name])
                let state = (r["state"] as? String).map { $0 + ((r["gone_reason"] as? String).map { " (\($0))" } ?? "") + ", " } ?? ""
                line("subscriber \(name)", "\(state)last seq \(int(r["last_seq"])), lag \(int(r["lag"])), missed \(int(r["missed"])), recovered \(int(r["recovered"])), gaps \(int(r["gaps"]))")
            }
        }
        return out
    }
}
