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
        var fields: [String: Any]
        var state: String { fields["state"] as? String ?? "live" }
    }

    package func run() -> Int32 {
        if let forget { return runForget(forget) }
        var rows: [Row] = []
        for control in controls {
            do {
                guard let reply = try ControlRequest.send(ControlRequestWire.stats(), to: control, timeoutSeconds: timeoutSeconds, curve: curve),
                    let s = try JSONSerialization.jsonObject(with: Data(reply)) as? [String: Any]
                else {
                    FileHandleWriter.standardError("checkoutbus subscribers: no answer from \(control) within \(timeoutSeconds)s"
                                                   + (curve == nil ? "" : CurveClientKeys.refusalHint) + "\n")
                    return 1
                }
                for (name, v) in (s["subscribers"] as? [String: Any] ?? [:]) {
                    rows.append(Row(control: control, name: name, fields: v as? [String: Any] ?? [:]))
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
            let objects: [[String: Any]] = shown.map { r in
                var o = r.fields
                o["name"] = r.name
                o["control"] = r.control
                o["reported_at"] = nil
                return o
            }
            let data = (try? JSONSerialization.data(withJSONObject: ["subscribers": objects], options: [.sortedKeys])) ?? Data()
            FileHandleWriter.standardOutput(String(decoding: data, as: UTF8.self) + "\n")
        case .pretty:
            FileHandleWriter.standardOutput(SubscribersCommand.render(shown, hidden: rows.count - shown.count, byDaemon: controls.count > 1))
        }
        return 0
    }

    /// The rows as aligned text.
    package static func render(_ rows: [Row], hidden: Int, byDaemon: Bool) -> String {
        func int(_ v: Any?) -> Int64 { (v as? NSNumber)?.int64Value ?? 0 }
        var table: [[String]] = [["NAME"] + (byDaemon ? ["DAEMON"] : []) + ["STATE", "SEEN", "SEQ", "LAG", "MISSED", "RECOVERED", "REJECTED"]]
        for r in rows {
            let f = r.fields
            var state = r.state
            if let reason = f["gone_reason"] as? String { state += " (\(reason))" }
            let seen = String(format2: Double(int(f["age_ms"])) / 1000) + "s ago"
            table.append([r.name] + (byDaemon ? [r.control] : []) + [state, seen, String(int(f["last_seq"])),
                          r.state == "live" ? String(int(f["lag"])) : "-", String(int(f["missed"])), String(int(f["recovered"])),
                          String(int(f["rejected"]))])
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
        for control in controls {
            do {
                guard let reply = try ControlRequest.send(ControlRequestWire.forget(subscriber: name), to: control,
                                                                 timeoutSeconds: timeoutSeconds, curve: curve),
                    let o = try JSONSerialization.jsonObject(with: Data(reply)) as? [String: Any]
                else {
                    FileHandleWriter.standardError("checkoutbus subscribers: no answer from \(control) within \(timeoutSeconds)s\n")
                    return 1
                }
                guard o["ok"] as? Bool == true else {
                    FileHandleWriter.standardError("checkoutbus subscribers: \(control) refused: \(o["detail"] as? String ?? "\(o)")\n")
                    return 1
                }
                if o["known"] as? Bool == true {
                    known = true
                    let state = o["state"] as? String ?? "gone"
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
