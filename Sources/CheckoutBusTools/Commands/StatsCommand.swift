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
            Asks again after a busy answer until --timeout runs out; exits 1 when the daemon does not
            answer, or is still busy.
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
            // A refusal (`busy` while the pipeline is held up, say) is said as such, exit 1.
            let head = JSONDocument()
            if ControlReplyWire.parse(reply, into: head), case let fields = ControlReplyWire.read(head), !fields.ok {
                if json { FileHandleWriter.standardOutput(String(decoding: reply, as: UTF8.self) + "\n") }
                FileHandleWriter.standardError("checkoutbus stats: the daemon answered \(fields.error ?? "not ok"): "
                    + "\(fields.detail ?? "(no detail)")\n")
                return 1
            }
            if json {
                FileHandleWriter.standardOutput(String(decoding: reply, as: UTF8.self) + "\n")
                return 0
            }
            guard let s = StatsReply.read(reply) else {
                FileHandleWriter.standardError("checkoutbus stats: the reply is not a stats answer: \(String(decoding: reply.prefix(200), as: UTF8.self))\n")
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

    /// The stats reply as aligned text.
    package static func render(_ s: StatsReply) -> String {
        var out = ""
        func line(_ label: String, _ value: String) {
            // Long labels (subscriber names) are kept whole, one space before the value.
            let pad = max(1, 22 - label.count)
            out += label + String(repeating: " ", count: pad) + value + "\n"
        }
        let c = s.counters
        line("seq", "last \(s.lastSeq), durable \(s.durableSeq), first retained \(s.firstSeq)")
        line("received", "\(c.received)")
        line("published", zip(LifecycleKind.allCases, c.publishedByKind).map { "\(String(describing: $0.name)) \($1)" }
            .joined(separator: ", "))
        line("suppressed", "\(c.suppressed)")
        let dead = c.deadLettered
        line("dead-lettered", dead.isEmpty ? "0" : dead.keys.sorted().map { "\($0) \(dead[$0] ?? 0)" }.joined(separator: ", "))
        line("checkouts", "tracked \(c.trackedCheckouts), evicted \(c.evictedCheckouts), expired \(c.expiredCheckouts)")
        let j = s.journal
        line("journal", "\(j.segments) segment(s), \(j.bytes) bytes, \(j.fsyncs) fsyncs (max \(j.fsyncMaxMicros) µs), "
             + (j.writesDirect ? "direct writes" : "writes through the page cache"))
        let t = s.stages
        if t.timed > 0 {
            // Mean µs per sampled event, by stage (stats' `stages`, docs/durability.md).
            func us(_ ns: Int64, _ n: Int64) -> String { String(format2: Double(ns) / Double(max(1, n)) / 1000) }
            line("pipeline µs/event", "receive \(us(t.receive, t.timed)), decode \(us(t.decode, t.timed)), "
                 + "rules \(us(t.rules, t.timed)), envelope \(us(t.envelope, t.timed)), "
                 + "journal append \(us(t.journalAppend, t.timed)), publish \(us(t.publish, t.publishTimed)) (\(t.timed) events timed)")
        }
        if s.subscribers.isEmpty {
            line("subscribers", "none reported")
        } else {
            for entry in s.subscribers.sorted(by: { $0.name < $1.name }) {
                let r = entry.row
                let state = r.state + (r.goneReason.map { " (\($0))" } ?? "") + ", "
                line("subscriber \(entry.name)", "\(state)last seq \(r.lastSeq), lag \(r.lag.map { String($0) } ?? "?"), missed \(r.missed), "
                     + "recovered \(r.recovered), gaps \(r.gaps)")
            }
        }
        return out
    }
}
