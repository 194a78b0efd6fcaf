#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusCore
import ZeroMQ

/// `--metrics HOST:PORT`: Prometheus text at `GET /metrics` and liveness at `GET /healthz`,
/// answered over a ZeroMQ STREAM socket polled by the pipeline thread.
///
/// Not a general HTTP server, on purpose: it reads one request head per connection (at most
/// 8 KiB), answers `GET` of those two paths (anything else 404, other methods 405), and closes the
/// connection (`Connection: close`), which is all a Prometheus scraper, `curl` or a load balancer's
/// health check needs. Not `Sendable`: runs on the pipeline thread, which owns what it reports.
final class MetricsService {
    static let maxRequestBytes = 8192
    static let maxConnections = 64

    let socket: ZMQSocket
    private let journal: Journal
    private let processor: EventProcessor
    private let reports: () -> [(name: String, missed: Int64, recovered: Int64, gaps: Int64)]
    private var requests: [[UInt8]: [UInt8]] = [:]
    /// Time from an event's arrival to its publication, measured by the pipeline.
    var pipelineLatency = Histogram.pipeline()
    let startedAt = BusClock.monotonicNanoseconds()

    init(socket: ZMQSocket, journal: Journal, processor: EventProcessor,
         reports: @escaping () -> [(name: String, missed: Int64, recovered: Int64, gaps: Int64)]) {
        self.socket = socket
        self.journal = journal
        self.processor = processor
        self.reports = reports
    }

    /// Reads what arrived on the STREAM socket and answers complete requests, without blocking.
    func serve() throws {
        while let frames = try socket.receiveMultipart(dontWait: true) {
            guard frames.count == 2 else { continue }
            let id = frames[0]
            let data = frames[1]
            if data.isEmpty {
                // A connection opened or closed.
                requests[id] = nil
                continue
            }
            var buffer = requests[id] ?? []
            buffer.append(contentsOf: data)
            if buffer.count > MetricsService.maxRequestBytes {
                requests[id] = nil
                try respond(id, status: "431 Request Header Fields Too Large", type: "text/plain", body: "request too large\n")
                continue
            }
            guard let end = MetricsService.headEnd(buffer) else {
                if requests.count < MetricsService.maxConnections || requests[id] != nil { requests[id] = buffer }
                continue
            }
            requests[id] = nil
            let line = buffer[..<end].split(separator: 0x0A, maxSplits: 1).first.map { Array($0) } ?? []
            let parts = line.split(separator: 0x20)
            let method = parts.first.map { String(decoding: $0, as: UTF8.self) } ?? ""
            let target = parts.count > 1 ? String(decoding: parts[1], as: UTF8.self) : ""
            let path = target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? target
            switch (method, path) {
            case ("GET", "/metrics"), ("HEAD", "/metrics"):
                try respond(id, status: "200 OK", type: "text/plain; version=0.0.4; charset=utf-8", body: metricsText(),
                            head: method == "HEAD")
            case ("GET", "/healthz"), ("HEAD", "/healthz"):
                let ok = journal.isWritable
                let body = "{\"status\":\"\(ok ? "ok" : "journal_unwritable")\",\"last_seq\":\(journal.lastSeq),\"durable_seq\":\(journal.durableSeq)}\n"
                try respond(id, status: ok ? "200 OK" : "503 Service Unavailable", type: "application/json", body: body,
                            head: method == "HEAD")
            case ("GET", _), ("HEAD", _):
                try respond(id, status: "404 Not Found", type: "text/plain", body: "try /metrics or /healthz\n")
            default:
                try respond(id, status: "405 Method Not Allowed", type: "text/plain", body: "GET only\n")
            }
        }
    }

    /// The index just past the blank line that ends a request head, if it arrived.
    static func headEnd(_ b: [UInt8]) -> Int? {
        guard b.count >= 4 else { return nil }
        for i in 3..<b.count where b[i] == 0x0A && (b[i - 1] == 0x0A || (b[i - 1] == 0x0D && b[i - 2] == 0x0A)) {
            return i + 1
        }
        return nil
    }

    private func respond(_ id: [UInt8], status: String, type: String, body: String, head: Bool = false) throws {
        let bytes = Array(body.utf8)
        let response = "HTTP/1.1 \(status)\r\nContent-Type: \(type)\r\nContent-Length: \(bytes.count)\r\nConnection: close\r\n\r\n"
        _ = try socket.send(id, more: true)
        _ = try socket.send(Array(response.utf8) + (head ? [] : bytes))
        // An empty frame closes the connection.
        _ = try socket.send(id, more: true)
        _ = try socket.send([UInt8]())
    }

    /// Every metric, in Prometheus's text format.
    func metricsText() -> String {
        var out = ""
        let c = processor.counters
        func counter(_ name: String, _ help: String, _ samples: [(String, UInt64)]) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) counter\n"
            for (labels, v) in samples { out += "\(name)\(labels) \(v)\n" }
        }
        func gauge(_ name: String, _ help: String, _ samples: [(String, Int64)]) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) gauge\n"
            for (labels, v) in samples { out += "\(name)\(labels) \(v)\n" }
        }
        let formats = ["ecp", "sheet_bridge", "callback", "primer"]
        counter("checkoutbus_events_received_total", "Raw events received, by raw family (decoded ones; see also dead letters).",
                formats.enumerated().map { ("{family=\"\($0.element)\"}", c.receivedByFormat[$0.offset]) })
        counter("checkoutbus_messages_received_total", "Messages received on the ingest sockets.", [("", c.received)])
        counter("checkoutbus_events_published_total", "Lifecycle envelopes published, by kind.",
                LifecycleKind.allCases.enumerated().map { ("{kind=\"\($0.element.name)\"}", c.publishedByKind[$0.offset]) })
        counter("checkoutbus_events_suppressed_total", "Updates suppressed as identical to the last snapshot.",
                [("", c.suppressed)])
        counter("checkoutbus_events_duplicate_total", "Producer retries recognised by event_id and not published again.",
                [("", c.duplicates)])
        counter("checkoutbus_deadletters_total", "Inputs dead-lettered, by reason.",
                DeadLetterReason.all.map(\.code).map { ("{reason=\"\($0)\"}", c.deadLettered[$0] ?? 0) })
        let subscriberReports = reports()
        counter("checkoutbus_subscriber_hwm_drops_total",
                "Envelopes a subscriber missed live (dropped at a high-water mark), as it reported them.",
                subscriberReports.map { ("{subscriber=\"\(MetricsService.escape($0.name))\"}", UInt64(max(0, $0.missed))) })
        counter("checkoutbus_subscriber_recovered_total", "Missed envelopes a subscriber fetched again from the journal.",
                subscriberReports.map { ("{subscriber=\"\(MetricsService.escape($0.name))\"}", UInt64(max(0, $0.recovered))) })
        gauge("checkoutbus_last_seq", "The last seq journaled and published.", [("", Int64(journal.lastSeq))])
        gauge("checkoutbus_durable_seq", "The last seq known to be on disk.", [("", Int64(journal.durableSeq))])
        gauge("checkoutbus_journal_bytes", "Bytes in the journal's retained segments.", [("", journal.totalBytes)])
        gauge("checkoutbus_journal_segments", "Retained journal segments.", [("", Int64(journal.segmentCount))])
        counter("checkoutbus_journal_fsyncs_total", "fdatasync calls by the group commit.", [("", journal.fsyncCount)])
        journal.fsyncHistogram.write(name: "checkoutbus_journal_fsync_seconds", help: "Duration of each fdatasync.", to: &out)
        gauge("checkoutbus_tracked_checkouts", "Checkouts in the state table.", [("", Int64(processor.state.count))])
        counter("checkoutbus_checkouts_evicted_total", "Checkouts evicted from a full state table (least recently used).",
                [("", processor.state.evicted)])
        counter("checkoutbus_checkouts_expired_total", "Checkouts forgotten after the idle TTL.", [("", processor.state.expired)])
        pipelineLatency.write(name: "checkoutbus_pipeline_latency_seconds",
                              help: "From an event's arrival to its publication (journal write included).", to: &out)
        gauge("checkoutbus_up_seconds", "Seconds since the daemon started.",
              [("", Int64((BusClock.monotonicNanoseconds() - startedAt) / 1_000_000_000))])
        return out
    }

    /// A label value with backslash, quote and newline escaped.
    static func escape(_ s: String) -> String {
        var out = ""
        for c in s.unicodeScalars {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }
}
