import Foundation
import ZeroMQ
import CheckoutBusClient
import CheckoutBusRuntime
import CheckoutBusProtocol
import CheckoutBusJSON

/// `checkoutbus ping`: is every endpoint of a daemon (or of each shard) there, and how fast — the
/// control socket's `stats` round trip, the ZMTP handshake on each ingest socket, a heartbeat on
/// the publish socket, `/healthz` on the metrics port (docs/commands.md, "ping").
///
/// Not `Sendable`; runs on the calling thread.
package struct PingCommand {
    static let control = BusOptions.controlShards.described(
        "the daemons' --control endpoints, comma-separated; each daemon says where its other endpoints are bound")
    static let healthz = CommandOption(
        "healthz", "HOST:PORT",
        help: "only /healthz at a daemon's --metrics address: needs no keys (a container's or a unit's health check)")
    static let timeout = BusOptions.timeout(3, "how long each endpoint may take")
    static let json = CommandOption("json", help: "one JSON object per endpoint and line")

    package static let spec = CommandSpec(
        "checkoutbus ping", summary: "is every endpoint of a daemon, or of each shard, answering, and how fast.",
        options: [control, healthz, timeout, json] + CurveClientKeys.options,
        notes: """
            Per daemon: control (the stats round trip, the shard, the build, CURVE or not), ingest and
            ingest-acked (the ZMTP handshake: a daemon listening there, with these CURVE keys when it
            asks for them), publish (the time to a heartbeat), metrics (/healthz). An endpoint bound to
            every interface (0.0.0.0, *) is reached on the control endpoint's host. --healthz and
            --control are two kinds of ping: give one. Exits 0 when every endpoint answered, 1 otherwise.
            """)
    package static var help: String { spec.help }

    package var controls: [String]
    package var timeoutSeconds: Int
    package var json: Bool
    package var curve: CurveClientKeys?
    /// `--healthz`: only this metrics address.
    package var healthz: String?

    package init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try Self.spec.parse(arguments)
        curve = try CurveClientKeys.parse(args)
        controls = try BusOptions.endpoints(args, Self.control)
        if let v = args.value(Self.healthz) {
            if args.given(Self.control) { throw .init("--healthz and --control are two kinds of ping: give one") }
            guard v.split(separator: ":").count == 2, let port = Int(v.split(separator: ":")[1]), (1...65535).contains(port) else {
                throw .init("--healthz takes HOST:PORT (the daemon's --metrics, 127.0.0.1:7780), got \(v)")
            }
            healthz = v
        }
        timeoutSeconds = try args.int(Self.timeout, in: 1...600)
        json = args.has(Self.json)
        if !args.positionals.isEmpty { throw .init("unexpected argument \(args.positionals[0])") }
    }

    /// One endpoint's answer.
    package struct Probe {
        var role: String
        var endpoint: String
        var ok: Bool
        var milliseconds: Double?
        var detail: String
    }

    package func run() -> Int32 {
        if let healthz {
            let probe = health(healthz)
            FileHandleWriter.standardOutput(render(probe) + "\n")
            return probe.ok ? 0 : 1
        }
        var all: [Probe] = []
        for control in controls {
            let probes = ping(control)
            all += probes
            for p in probes { FileHandleWriter.standardOutput(render(p) + "\n") }
        }
        return all.allSatisfy(\.ok) ? 0 : 1
    }

    private func render(_ p: Probe) -> String {
        if json {
            var o: [String: Any] = ["role": p.role, "endpoint": p.endpoint, "ok": p.ok, "detail": p.detail]
            if let ms = p.milliseconds { o["ms"] = (ms * 1000).rounded() / 1000 }
            let data = (try? JSONSerialization.data(withJSONObject: o, options: [.sortedKeys])) ?? Data()
            return String(decoding: data, as: UTF8.self)
        }
        let time = p.milliseconds.map { String(format: "%.1f ms", $0) } ?? "-"
        // Padded to line up, never cut: the endpoint is what the reader needs whole.
        return p.role.padded(13) + " " + p.endpoint.padded(28) + " " + (p.ok ? "ok  " : "FAIL") + " " + time.padded(10) + " " + p.detail
    }

    /// Every endpoint of the daemon at `control`.
    package func ping(_ control: String) -> [Probe] {
        let started = BusClock.monotonicNanoseconds()
        let reply = try? ControlRequest.send(ControlRequestWire.stats(), to: control, timeoutSeconds: timeoutSeconds, curve: curve,
                                            retryBusy: false)
        let ms = Double(BusClock.monotonicNanoseconds() - started) / 1e6
        guard let reply else {
            let why = curve == nil ? " (a daemon with CURVE answers only clients with its keys: --curve-key, --curve-server)"
                : CurveClientKeys.refusalHint
            return [Probe(role: "control", endpoint: control, ok: false, milliseconds: nil,
                          detail: "no answer within \(timeoutSeconds) s: no daemon there, or not reachable\(why)")]
        }
        let document = JSONDocument()
        let parsed = ControlReplyWire.parse(reply, into: document)
        guard let s = parsed ? StatsReply.read(document) : nil else {
            // An answer, but not stats: a daemon that refused (busy, or not ready yet) is there.
            let head = parsed ? ControlReplyWire.read(document) : nil
            let detail = head.flatMap { $0.detail ?? $0.error } ?? String(decoding: reply.prefix(200), as: UTF8.self)
            return [Probe(role: "control", endpoint: control, ok: false, milliseconds: ms, detail: "answered without stats: \(detail)")]
        }
        let daemon = s.daemon
        var detail = "shard \(s.shard)/\(s.shards), last seq \(s.lastSeq)"
        if !daemon.version.isEmpty { detail += ", checkoutbusd \(daemon.version) (\(daemon.revision.isEmpty ? "?" : daemon.revision))" }
        if let curveOn = daemon.curve { detail += curveOn ? ", CURVE on" : ", CURVE off" }
        if let journal = daemon.journalID { detail += ", journal \(journal)" }
        var probes = [Probe(role: "control", endpoint: control, ok: true, milliseconds: ms, detail: detail)]
        guard let endpoints = daemon.endpoints else {
            probes[0].detail += " (an older daemon: it does not say where its other endpoints are)"
            return probes
        }
        let host = PingCommand.host(of: control)
        func reachable(_ endpoint: String) -> String { PingCommand.reachable(endpoint, controlHost: host) }
        probes.append(handshake("ingest", reachable(endpoints.ingest), type: .push))
        probes.append(handshake("ingest-acked", reachable(endpoints.ingestAcked), type: .dealer))
        probes.append(heartbeat(reachable(endpoints.publish), journal: daemon.journalID))
        if let m = endpoints.metrics {
            let address = PingCommand.reachable("tcp://" + m, controlHost: host).dropFirst("tcp://".count)
            probes.append(health(String(address)))
        }
        return probes
    }

    /// The host part of a tcp endpoint (nil for ipc).
    static func host(of endpoint: String) -> String? {
        guard endpoint.hasPrefix("tcp://") else { return nil }
        let rest = endpoint.dropFirst(6)
        guard let colon = rest.lastIndex(of: ":") else { return nil }
        return String(rest[..<colon])
    }

    /// `endpoint` with an every-interface host (`0.0.0.0`, `*`, `[::]`) replaced by the control's.
    static func reachable(_ endpoint: String, controlHost: String?) -> String {
        guard let host = host(of: endpoint), ["0.0.0.0", "*", "[::]", "::"].contains(host), let controlHost else { return endpoint }
        return "tcp://" + controlHost + endpoint.dropFirst(6 + host.count)
    }

    /// The ZMTP handshake on a socket of `type` connected to `endpoint`.
    private func handshake(_ role: String, _ endpoint: String, type: ZMQSocketType) -> Probe {
        let r = PingCommand.handshake(endpoint, type: type, curve: curve, timeoutSeconds: timeoutSeconds)
        return Probe(role: role, endpoint: endpoint, ok: r.ok, milliseconds: r.milliseconds, detail: r.detail)
    }

    /// The time to a heartbeat on the publish endpoint, and whether it names the control endpoint's
    /// journal (`journal`: nil when the daemon has none): another is another daemon, whose journal a
    /// subscriber of these endpoints would take for this one's.
    private func heartbeat(_ endpoint: String, journal: String?) -> Probe {
        do {
            let context = try ZMQContext()
            let sub = try ZMQSocket(context: context, type: .sub)
            try sub.setLinger(milliseconds: 0)
            try curve?.apply(to: sub)
            try sub.setOption(.receiveTimeout, Int32(timeoutSeconds * 1000))
            let started = BusClock.monotonicNanoseconds()
            try sub.connect(endpoint)
            try sub.subscribe("bus.heartbeat")
            guard let frames = try sub.receiveMultipart(), frames.count >= 2 else {
                return Probe(role: "publish", endpoint: endpoint, ok: false, milliseconds: nil,
                             detail: "no heartbeat within \(timeoutSeconds) s (the daemon sends one a second)")
            }
            let ms = Double(BusClock.monotonicNanoseconds() - started) / 1e6
            let document = JSONDocument()
            let fields = ControlReplyWire.parse(frames[1], into: document) ? HeartbeatWire.read(document) : nil
            if let journal, let theirs = fields?.journal, theirs != journal {
                return Probe(role: "publish", endpoint: endpoint, ok: false, milliseconds: ms,
                             detail: "a heartbeat of journal \(theirs), not the control endpoint's \(journal): another "
                                 + "daemon answers there (docs/durability.md, \"One journal behind both endpoints\")")
            }
            return Probe(role: "publish", endpoint: endpoint, ok: true, milliseconds: ms,
                         detail: "heartbeat" + (fields.map { " at seq \($0.seq)" } ?? ""))
        } catch {
            return Probe(role: "publish", endpoint: endpoint, ok: false, milliseconds: nil, detail: "\(error)")
        }
    }

    /// `/healthz` on the metrics address.
    private func health(_ address: String) -> Probe {
        let started = BusClock.monotonicNanoseconds()
        do {
            let r = try HTTPProbe.get(address, "/healthz", timeoutSeconds: timeoutSeconds)
            let ms = Double(BusClock.monotonicNanoseconds() - started) / 1e6
            return Probe(role: "metrics", endpoint: address, ok: r.status == 200, milliseconds: ms,
                         detail: "/healthz \(r.status)" + (r.status == 200 ? "" : ": \(r.body.prefix(120))"))
        } catch {
            return Probe(role: "metrics", endpoint: address, ok: false, milliseconds: nil, detail: "\(error)")
        }
    }

    /// The ZMTP handshake on a socket of `type` connected to `endpoint`, watched by a monitor: a
    /// ZeroMQ peer listening there, which takes these CURVE keys when it asks for them. `flood`
    /// asks it of each ingest endpoint before it sends.
    package static func handshake(_ endpoint: String, type: ZMQSocketType, curve: CurveClientKeys?, timeoutSeconds: Int)
        -> (ok: Bool, milliseconds: Double?, detail: String)
    {
        do {
            let context = try ZMQContext()
            let socket = try ZMQSocket(context: context, type: type)
            try socket.setLinger(milliseconds: 0)
            try curve?.apply(to: socket)
            let monitorEndpoint = "inproc://handshake-probe"
            try socket.monitor(monitorEndpoint, events: ZMQMonitorEvent.clientEvents)
            let reader = try ZMQSocket(context: context, type: .pair)
            try reader.setOption(.receiveHighWaterMark, Int32(0))
            try reader.setOption(.receiveTimeout, Int32(100))
            try reader.connect(monitorEndpoint)
            defer { try? socket.stopMonitor() }
            let started = BusClock.monotonicNanoseconds()
            try socket.connect(endpoint)
            let deadline = started + UInt64(timeoutSeconds) * 1_000_000_000
            var retried = false
            while BusClock.monotonicNanoseconds() < deadline {
                guard let frames = try reader.receiveMultipart(), let first = frames.first, let e = ZMQMonitorEvent(frame: first) else { continue }
                let ms = Double(BusClock.monotonicNanoseconds() - started) / 1e6
                switch e.event {
                case ZMQMonitorEvent.handshakeSucceeded:
                    return (true, ms, "handshake done")
                case ZMQMonitorEvent.handshakeFailedAuth:
                    return (false, ms, "the daemon refused these CURVE keys")
                case ZMQMonitorEvent.handshakeFailedProtocol, ZMQMonitorEvent.handshakeFailedNoDetail:
                    return (false, ms, "handshake failed: not a ZeroMQ peer, or CURVE on one side only")
                case ZMQMonitorEvent.connectRetried: retried = true
                default: break
                }
            }
            return (false, nil, retried ? "connection refused: nothing listens there" : "no handshake within \(timeoutSeconds) s")
        } catch {
            return (false, nil, "\(error)")
        }
    }
}
