import Foundation
import CheckoutBusClient
import CheckoutBusJSON
import CheckoutBusRuntime
import CheckoutBusProtocol

/// `checkoutbus subscribers`: the subscribers a daemon knows from their reports, live and gone
/// (docs/observability.md, "Subscribers, live and gone"); `subscribers forget NAME` drops one.
///
/// Not `Sendable`; runs on the calling thread.
package struct SubscribersCommand {
    static let all = CommandOption(
        "all", help: "gone subscribers too (stopped, or silent past the daemon's --subscriber-gone-after); by default only live ones")
    static let format = BusOptions.format(
        "pretty: one row each: name, state, seconds since its last report, last seq handled, lag, drops (missed), "
            + "recovered, parked (rejected); json: {\"subscribers\":[{\"name\":…, \"control\":…, \"state\":…, \"gone_reason\":…, "
            + "\"age_ms\":…, \"last_seq\":…, \"through_seq\":…, \"lag\":…, \"missed\":…, \"recovered\":…, \"gaps\":…, "
            + "\"rejected\":…, \"durable\":…}]}")
    static let control = BusOptions.controlShards.described(
        "the daemons' --control endpoints, comma-separated; with several (shards), one row per daemon")
    static let timeout = BusOptions.timeout(5, "give up when a daemon does not answer")

    package static let spec = CommandSpec(
        "checkoutbus subscribers", summary: "who follows the bus: each subscriber's state, last report, position, lag.",
        operands: "[forget NAME]",
        operandHelp: [.init("forget NAME", "drop NAME from stats and /metrics now (a gone worker you removed); "
                            + "a live one comes back with its next report")],
        options: [all, format, control, timeout] + CurveClientKeys.options,
        notes: "Exits 1 when a daemon does not answer, or `forget` names a subscriber no daemon knows.")
    package static var help: String { spec.help }

    package enum Format: String, Sendable {
        case pretty, json
    }

    package var controls: [String]
    package var timeoutSeconds: Int
    package var all: Bool
    package var format: Format
    /// `forget NAME`.
    package var forget: String?
    package var curve: CurveClientKeys?

    package init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try Self.spec.parse(arguments)
        curve = try CurveClientKeys.parse(args)
        controls = try BusOptions.endpoints(args, Self.control)
        timeoutSeconds = try args.int(Self.timeout, in: 1...3600)
        all = args.has(Self.all)
        format = try args.choice(Self.format, ["pretty": .pretty, "json": .json])
        switch args.positionals.count {
        case 0: break
        case 2 where args.positionals[0] == "forget":
            forget = args.positionals[1]
            if forget!.isEmpty || forget!.utf8.count > 200 { throw .init("forget needs a NAME of 1 to 200 bytes") }
        case 1 where args.positionals[0] == "forget": throw .init("forget needs a NAME")
        default: throw .init("unexpected argument \(args.positionals[0]); did you mean `subscribers forget NAME`?")
        }
    }

    /// One subscriber as one daemon knows it.
    package struct Row {
        var control: String
        var name: String
        var subscriber: ControlReplyWire.Subscriber
        var state: String { subscriber.state }
    }

    package func run() -> Int32 {
        if let forget { return runForget(forget) }
        var rows: [Row] = []
        let document = JSONDocument()
        for control in controls {
            do {
                guard let reply = try ControlRequest.send(ControlRequestWire.stats(), to: control, timeoutSeconds: timeoutSeconds, curve: curve),
                    ControlReplyWire.parse(reply, into: document)
                else {
                    FileHandleWriter.standardError("checkoutbus subscribers: no answer from \(control) within \(timeoutSeconds)s"
                                                   + (curve == nil ? "" : CurveClientKeys.refusalHint) + "\n")
                    return 1
                }
                let head = ControlReplyWire.read(document)
                guard head.ok else {
                    FileHandleWriter.standardError("checkoutbus subscribers: \(control) refused: \(head.detail ?? head.error ?? "no reason")\n")
                    return 1
                }
                for (name, subscriber) in ControlReplyWire.subscribers(document) {
                    rows.append(Row(control: control, name: name, subscriber: subscriber))
                }
            } catch {
                FileHandleWriter.standardError("checkoutbus subscribers: \(control): \(error)\n")
                return 1
            }
        }
        rows.sort { ($0.name, $0.control) < ($1.name, $1.control) }
        let shown = all ? rows : rows.filter { $0.state == "live" }
        switch format {
        case .json:
            FileHandleWriter.standardOutput(SubscribersCommand.json(shown) + "\n")
        case .pretty:
            FileHandleWriter.standardOutput(SubscribersCommand.render(shown, hidden: rows.count - shown.count, byDaemon: controls.count > 1))
        }
        return 0
    }

    /// `{"subscribers":[{…},…]}`: each row as `stats` has it (without `reported_at`), with its `name`
    /// and the `control` endpoint of the daemon that knows it; members in name order.
    package static func json(_ rows: [Row]) -> String {
        var w = JSONWriter(capacity: 256 * (rows.count + 1))
        w.append("{\"subscribers\":[")
        for (i, r) in rows.enumerated() {
            let s = r.subscriber
            if i > 0 { w.append(",") }
            w.append("{\"age_ms\":")
            w.append(int: s.ageMilliseconds)
            w.append(",\"control\":")
            w.appendString(r.control)
            w.append(",\"durable\":")
            w.append(bool: s.durable)
            w.append(",\"gaps\":")
            w.append(int: s.gaps)
            w.append(",\"gone_reason\":")
            if let reason = s.goneReason { w.appendString(reason) } else { w.append("null") }
            w.append(",\"lag\":")
            if let lag = s.lag { w.append(int: lag) } else { w.append("null") }
            w.append(",\"last_seq\":")
            w.append(int: s.lastSeq)
            w.append(",\"missed\":")
            w.append(int: s.missed)
            w.append(",\"name\":")
            w.appendString(r.name)
            w.append(",\"recovered\":")
            w.append(int: s.recovered)
            w.append(",\"rejected\":")
            w.append(int: s.rejected)
            w.append(",\"state\":")
            w.appendString(s.state)
            w.append(",\"through_seq\":")
            w.append(int: s.throughSeq)
            w.append("}")
        }
        w.append("]}")
        return String(decoding: w.bytes, as: UTF8.self)
    }

    /// The rows as aligned text.
    package static func render(_ rows: [Row], hidden: Int, byDaemon: Bool) -> String {
        var table: [[String]] = [["NAME"] + (byDaemon ? ["DAEMON"] : []) + ["STATE", "SEEN", "SEQ", "LAG", "MISSED", "RECOVERED", "REJECTED"]]
        for r in rows {
            let s = r.subscriber
            var state = r.state
            if let reason = s.goneReason { state += " (\(reason))" }
            let seen = String(format2: Double(s.ageMilliseconds) / 1000) + "s ago"
            table.append([r.name] + (byDaemon ? [r.control] : []) + [state, seen, String(s.lastSeq),
                          r.state == "live" ? s.lag.map { String($0) } ?? "?" : "-", String(s.missed), String(s.recovered), String(s.rejected)])
        }
        var widths = [Int](repeating: 0, count: table[0].count)
        for row in table { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
        var out = rows.isEmpty ? "" : table.map { row in
            row.enumerated().map { i, cell in i == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[i] - cell.count + 2) }
                .joined()
        }.joined(separator: "\n") + "\n"
        if rows.isEmpty { out += "no live subscribers\n" }
        if hidden > 0 { out += "\(hidden) gone (--all lists them)\n" }
        return out
    }

    private func runForget(_ name: String) -> Int32 {
        var known = false
        let document = JSONDocument()
        for control in controls {
            do {
                guard let reply = try ControlRequest.send(ControlRequestWire.forget(subscriber: name), to: control,
                                                                 timeoutSeconds: timeoutSeconds, curve: curve),
                    ControlReplyWire.parse(reply, into: document)
                else {
                    FileHandleWriter.standardError("checkoutbus subscribers: no answer from \(control) within \(timeoutSeconds)s\n")
                    return 1
                }
                guard let forgotten = ControlReplyWire.readForget(document) else {
                    let detail = ControlReplyWire.read(document).detail ?? String(decoding: reply, as: UTF8.self)
                    FileHandleWriter.standardError("checkoutbus subscribers: \(control) refused: \(detail)\n")
                    return 1
                }
                if forgotten.known {
                    known = true
                    let state = forgotten.state ?? "gone"
                    FileHandleWriter.standardOutput("forgot \(name) at \(control) (it was \(state))\n")
                    if state == "live" {
                        FileHandleWriter.standardError("checkoutbus subscribers: \(name) was live: it is listed again at its next report\n")
                    }
                }
            } catch {
                FileHandleWriter.standardError("checkoutbus subscribers: \(control): \(error)\n")
                return 1
            }
        }
        if !known {
            FileHandleWriter.standardError("checkoutbus subscribers: no daemon knows a subscriber named \(name)\n")
            return 1
        }
        return 0
    }
}
