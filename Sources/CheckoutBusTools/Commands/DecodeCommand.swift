import CheckoutBusCore
import Foundation
import CheckoutBusDaemon
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// `checkoutbus decode`: the daemon's own decoder and lifecycle rules run offline on raw events,
/// printing what each would become — without a daemon, a socket or a journal.
///
/// Not `Sendable`; runs on the calling thread.
package struct DecodeCommand {
    static let format = BusOptions.format(
        "pretty: one line per event: its topic, checkout, source, stable error code and raw code, summary (total, "
            + "currency, order), flags, and the snapshot paths redacted; or the dead-letter reason and detail. json: one "
            + "object per event: {\"line\":N, \"outcome\":…, \"topic\":…, \"envelope\":{…}, \"redacted\":[paths]}; the "
            + "envelope exactly as the daemon would publish it")
    /// The daemon's own flags, with its help and default.
    static let buyerData = DaemonConfiguration.option("buyer-data")
    static let errorMap = DaemonConfiguration.option("error-map").described(
        "raw code → stable code lines (optionally terminal or recoverable), as the daemon's --error-map: they add to "
            + "and override the built-in table (docs/error-codes.md); none: the built-in table alone")
    static let strict = CommandOption(
        "strict", help: "exit 3 when any line is dead-lettered (a gate for CI: every sample decodes), with "
            + "`decode: N of M lines dead-lettered` on stderr")

    package static let spec = CommandSpec(
        "checkoutbus decode", summary: "what raw events would become: the daemon's decoder and rules, offline.",
        operands: "[FILE|-]",
        operandHelp: [.init("FILE", "raw events, one JSON per line, as a producer sends them (default -: standard input); "
                            + "blank lines and lines starting with # are skipped")],
        groups: [.init(nil, [format, strict]),
                 .init("As the daemon's flags (a bad --error-map line: exit 2, naming it):", [buyerData, errorMap])],
        notes: """
            The events go through one processor in order, as through one daemon: an update identical
            to the checkout's last snapshot is `suppressed`, a repeated event_id a `duplicate`, a
            second complete carries "repeat":true. Exits 0 when every line was read (dead letters
            included, unless --strict), 1 when the input cannot be read, 2 on a bad flag or error map,
            3 with --strict when a line was dead-lettered.
            """)
    package static var help: String { spec.help }

    package enum Format: String, Sendable {
        case pretty, json
    }

    /// `--error-map`: installed before the first line.
    package var errorMapPath: String?
    package var file: String
    package var format: Format
    /// `--strict`: dead letters make the exit status 3.
    package var strict: Bool
    /// The daemon's own options (``DaemonConfiguration/processor``), `--buyer-data` applied.
    package var options: EventProcessor.Options

    package init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try Self.spec.parse(arguments)
        strict = args.has(Self.strict)
        format = try args.choice(Self.format, ["pretty": .pretty, "json": .json])
        // The daemon's flags mean what they mean to the daemon: its own setting applies them.
        var daemon = DaemonConfiguration()
        for option in [Self.buyerData, Self.errorMap] {
            if args.given(option), let v = args.value(option) { try daemon.apply(option.name, v) }
        }
        options = daemon.processor
        errorMapPath = daemon.errorMapPath
        if args.positionals.count > 1 { throw .init("unexpected argument \(args.positionals[1])") }
        file = args.positionals.first ?? "-"
    }

    package func run() -> Int32 {
        if let errorMapPath {
            do {
                ErrorMap.install(try DaemonConfiguration.loadErrorMap(errorMapPath))
            } catch {
                FileHandleWriter.standardError("checkoutbus decode: \(error)\n")
                return 2
            }
        }
        // Read line by line through LineReader (a non-blocking standard input is waited on; a
        // directory or a read error is a clear error, exit 1), where Foundation's read trapped.
        var lines: [[UInt8]] = []
        do throws(ToolError) {
            let fd = file == "-" ? Int32(0) : open(file, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw ToolError("cannot read \(file): \(String(cString: strerror(errno)))") }
            defer { if fd != 0 { close(fd) } }
            let reader = LineReader(fd: fd, name: file == "-" ? nil : file)
            while let line = try reader.nextLine() { lines.append(line) }
        } catch {
            FileHandleWriter.standardError("checkoutbus decode: \(error)\n")
            return 1
        }
        let processor = EventProcessor(options: options)
        let doc = JSONDocument(maxDepth: EnvelopeLimits.maxDepth)
        var (read, deadLettered) = (0, 0)
        for (n, var line) in lines.enumerated() {
            if line.last == 0x0D { line.removeLast() }
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) || line.first == 0x23 { continue }
            let result = line.withUnsafeBytes {
                processor.process($0, receivedAt: Timestamp(milliseconds: BusClock.wallMilliseconds()), now: BusClock.monotonicSeconds())
            }
            read += 1
            switch result.outcome {
            case .deadLettered, .duplicateDeadLetter: deadLettered += 1
            default: break
            }
            FileHandleWriter.standardOutput(describe(result, line: n + 1, doc: doc) + "\n")
        }
        if strict && deadLettered > 0 {
            FileHandleWriter.standardError("decode: \(deadLettered) of \(read) lines dead-lettered\n")
            return 3
        }
        return 0
    }

    /// One event's line of output.
    package func describe(_ result: ProcessingResult, line: Int, doc: JSONDocument) -> String {
        let outcome = result.outcome
        let name: String
        switch outcome {
        case .published: name = "published"
        case .deadLettered: name = "deadletter"
        case .suppressed: name = "suppressed"
        case .duplicate, .duplicateDeadLetter: name = "duplicate"
        }
        let topic = result.publication.map { Array($0.topic) } ?? []
        let envelope = result.publication.map { Array($0.envelope) } ?? []
        let redacted = envelope.isEmpty ? [] : DecodeCommand.redactedPaths(envelope)
        switch format {
        case .json:
            var w = JSONWriter(capacity: 256 + envelope.count)
            w.append("{\"line\":")
            w.append(int: line)
            w.append(",\"outcome\":")
            w.appendString(name)
            switch outcome {
            case .duplicate(let seq):
                w.append(",\"duplicate_of_seq\":")
                if seq > 0 { w.append(int: Int64(seq)) } else { w.append("null") }
            case .duplicateDeadLetter(let seq, let reason):
                w.append(",\"duplicate_of_seq\":")
                w.append(int: Int64(seq))
                w.append(",\"reason\":")
                w.appendString(reason.code)
            default: break
            }
            if !envelope.isEmpty {
                w.append(",\"topic\":")
                topic.withUnsafeBytes { w.appendString(utf8: $0) }
                w.append(",\"envelope\":")
                envelope.withUnsafeBytes { w.appendRaw($0) }
                w.append(",\"redacted\":[")
                for (i, p) in redacted.enumerated() {
                    if i > 0 { w.append(",") }
                    w.appendString(p)
                }
                w.append("]")
            }
            w.append("}")
            return String(decoding: w.bytes, as: UTF8.self)
        case .pretty:
            switch outcome {
            case .suppressed: return "line \(line): suppressed (the same snapshot as this checkout's last)"
            case .duplicate(let seq): return "line \(line): duplicate of the event published as #\(seq) (its event_id was seen)"
            case .duplicateDeadLetter(let seq, let reason):
                return "line \(line): duplicate of dead letter #\(seq) (\(reason.code))"
            default:
                var text = "line \(line): " + TailCommand.pretty(topic: topic, envelope: envelope, doc: doc)
                if !redacted.isEmpty { text += " redacted=" + redacted.joined(separator: ",") }
                return text
            }
        }
    }

    /// The paths (`checkout.buyer.email`, `checkout.line_items[0].…`) whose values the envelope
    /// holds as `"[redacted]"`.
    package static func redactedPaths(_ envelope: [UInt8]) -> [String] {
        guard let object = try? JSONSerialization.jsonObject(with: Data(envelope)) else { return [] }
        var paths: [String] = []
        func walk(_ value: Any, _ path: String) {
            if let s = value as? String, s == "[redacted]" {
                paths.append(path)
            } else if let o = value as? [String: Any] {
                for k in o.keys.sorted() { walk(o[k]!, path.isEmpty ? k : path + "." + k) }
            } else if let a = value as? [Any] {
                for (i, v) in a.enumerated() { walk(v, path + "[\(i)]") }
            }
        }
        walk(object, "")
        return paths
    }
}
