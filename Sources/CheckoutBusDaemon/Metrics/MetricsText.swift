#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// The Prometheus text of `/metrics`, written from a ``DaemonSnapshot`` and the counters of the
/// threads that serve clients (on the metrics thread, never the pipeline's). `Sendable`: no state.
package enum MetricsText {
    /// Every metric, in Prometheus's text format.
    package static func render(_ snap: DaemonSnapshot, subscribers: [SubscriberReportBook.Entry],
                       figures f: ServiceCounters.Figures, snapshotAge: UInt64, upNanoseconds: UInt64) -> String {
        var out = ""
        let c = snap.counters
        func counter(_ name: String, _ help: String, _ samples: [(String, UInt64)]) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) counter\n"
            for (labels, v) in samples { out += "\(name)\(labels) \(v)\n" }
        }
        func gauge(_ name: String, _ help: String, _ samples: [(String, Int64)]) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) gauge\n"
            for (labels, v) in samples { out += "\(name)\(labels) \(v)\n" }
        }
        let formats = RawFormat.labels
        counter("checkoutbus_events_received_total", "Raw events received, by raw family (decoded ones; see also dead letters).",
                formats.enumerated().map { ("{family=\"\($0.element)\"}", c.receivedByFormat[$0.offset]) })
        counter("checkoutbus_messages_received_total", "Messages received on the ingest sockets.", [("", c.received)])
        counter("checkoutbus_events_published_total", "Lifecycle envelopes published, by kind.",
                LifecycleKind.allCases.enumerated().map { ("{kind=\"\($0.element.name)\"}", c.publishedByKind[$0.offset]) })
        counter("checkoutbus_failures_total",
                "Failure envelopes published, by stable error code (checkout.fail.<code>), repeats of a checkout's last terminal failure not counted.",
                StableErrorCode.allCases.enumerated().map { ("{code=\"\($0.element.rawValue)\"}", c.failedByCode[$0.offset]) })
        counter("checkoutbus_failures_unknown_total",
                "Failures published as unknown, by raw code (the first 64 raw codes since start; empty: none sent).",
                c.unknownRawCodes.sorted { $0.key < $1.key }.map { ("{raw_code=\"\(escape($0.key))\"}", $0.value) })
        counter("checkoutbus_failures_unknown_other_total",
                "Failures published as unknown whose raw code was not among the first 64 counted apart.",
                [("", c.unknownRawCodesOther)])
        counter("checkoutbus_failures_repeated_total",
                "Terminal failure envelopes published with repeat: true: a checkout's last failure (code, raw code, message) reported again.",
                [("", c.repeatedFailures)])
        counter("checkoutbus_events_suppressed_total", "Updates suppressed as identical to the last snapshot.",
                [("", c.suppressed)])
        counter("checkoutbus_events_duplicate_total", "Producer retries recognised by event_id and not published again.",
                [("", c.duplicates)])
        counter("checkoutbus_deadletters_total", "Inputs dead-lettered, by reason.",
                DeadLetterReason.all.map(\.code).map { ("{reason=\"\($0)\"}", c.deadLettered[$0] ?? 0) })
        // A gone tail leaves no series; a gone durable subscriber (a worker) stays, up 0, until it
        // expires or is forgotten (docs/observability.md, "Subscribers, live and gone").
        let shown = subscribers.filter(\.exported)
        func label(_ e: SubscriberReportBook.Entry) -> String { "{subscriber=\"\(escape(e.name))\"}" }
        gauge("checkoutbus_subscribers", "Subscribers the daemon knows from their reports, live or gone (not yet expired).",
              [("{state=\"live\"}", Int64(subscribers.count { $0.state == .live })),
               ("{state=\"gone\"}", Int64(subscribers.count { $0.state == .gone }))])
        gauge("checkoutbus_subscriber_up",
              "1 while a subscriber reports, 0 once it is gone (stopped, or silent past --subscriber-gone-after); gone ones only if they keep a cursor.",
              shown.map { (label($0), $0.state == .live ? 1 : 0) })
        out += "# HELP checkoutbus_subscriber_last_report_age_seconds Seconds since the subscriber's last report.\n"
        out += "# TYPE checkoutbus_subscriber_last_report_age_seconds gauge\n"
        for e in shown {
            out += "checkoutbus_subscriber_last_report_age_seconds\(label(e)) \(Double(e.ageMilliseconds) / 1000)\n"
        }
        counter("checkoutbus_subscriber_hwm_drops_total",
                "Envelopes a subscriber missed live (dropped at a high-water mark), as it reported them.",
                shown.map { (label($0), UInt64(max(0, $0.report.missed))) })
        counter("checkoutbus_subscriber_recovered_total", "Missed envelopes a subscriber fetched again from the journal.",
                shown.map { (label($0), UInt64(max(0, $0.report.recovered))) })
        gauge("checkoutbus_subscriber_rejected",
              "Envelopes a subscriber holds parked because it could not apply them (the fulfilment worker's rejected table), as it last reported.",
              shown.map { (label($0), max(0, $0.report.rejected)) })
        gauge("checkoutbus_subscriber_lag",
              "Envelopes published after the position a live subscriber last reported (the seq through which it has everything it follows; 0 if ahead). Live subscribers only.",
              subscribers.filter { $0.state == .live }.map { (label($0), max(0, Int64(snap.lastSeq) - $0.report.position)) })
        gauge("checkoutbus_subscriber_position",
              "The seq through which a live subscriber has everything it follows, as it last reported (compare with checkoutbus_journal_first_seq).",
              subscribers.filter { $0.state == .live }.map { (label($0), $0.report.position) })
        gauge("checkoutbus_last_seq", "The last seq journaled and published.", [("", Int64(snap.lastSeq))])
        gauge("checkoutbus_journal_first_seq", "The oldest seq the journal retains (replays of older seqs answer not_retained).",
              [("", Int64(snap.firstSeq))])
        gauge("checkoutbus_durable_seq", "The last seq known to be on disk.", [("", Int64(snap.durableSeq))])
        gauge("checkoutbus_journal_bytes", "Bytes in the journal's retained segments.", [("", snap.journalBytes)])
        gauge("checkoutbus_journal_segments", "Retained journal segments.", [("", Int64(snap.journalSegments))])
        gauge("checkoutbus_journal_writable", "1 while the journal takes writes; 0 after a failed write (ingest paused).",
              [("", snap.journalWritable ? 1 : 0)])
        counter("checkoutbus_journal_fsyncs_total", "fdatasync calls by the group commit.", [("", snap.fsyncs)])
        gauge("checkoutbus_journal_fence_recovered",
              "1 when this run began by recovering the journal of a run that a failed durability call fenced (exit 75; the log has the reason).",
              [("", snap.recoveredFence == nil ? 0 : 1)])
        counter("checkoutbus_suppressed_log_sync_failures_total",
                "Failed fdatasyncs of the suppressed-id log (retries of those suppressed updates may be compared by snapshot after a crash).",
                [("", UInt64(snap.suppressedLogSyncFailures))])
        counter("checkoutbus_ack_replies_dropped_total",
                "Acknowledgements dropped: their producer had 100,000 unread (it sends without reading them) "
                    + "or had gone.",
                [("", snap.ackRepliesDropped)])
        snap.fsyncHistogram.write(name: "checkoutbus_journal_fsync_seconds", help: "Duration of each fdatasync.", to: &out)
        gauge("checkoutbus_tracked_checkouts", "Checkouts in the state table.", [("", Int64(snap.trackedCheckouts))])
        gauge("checkoutbus_state_bytes", "Bytes the state table holds in use: its entries, index, idempotency keys and failures.",
              [("", Int64(snap.stateBytes))])
        counter("checkoutbus_checkouts_evicted_total", "Checkouts evicted from a full state table (least recently used).",
                [("", snap.evictedCheckouts)])
        counter("checkoutbus_checkouts_expired_total", "Checkouts forgotten after the idle TTL.", [("", snap.expiredCheckouts)])
        snap.pipelineLatency.write(name: "checkoutbus_pipeline_latency_seconds",
                                   help: "From an event's arrival to its publication (journal write included).", to: &out)
        // What clients did to the daemon (docs/security.md, "What a client can do").
        let sockets = ServiceCounters.Socket.allCases
        counter("checkoutbus_connections_accepted_total", "Connections accepted on each ZeroMQ socket.",
                sockets.map { ("{socket=\"\($0.name)\"}", f.accepted[$0.rawValue]) })
        counter("checkoutbus_connections_closed_total",
                "Connections ended on each ZeroMQ socket: the peer left, or the daemon cut it (a message over the wire limit, a handshake not finished in time).",
                sockets.map { ("{socket=\"\($0.name)\"}", f.disconnected[$0.rawValue]) })
        gauge("checkoutbus_connections_open", "Connections open on each ZeroMQ socket.",
              sockets.map { ("{socket=\"\($0.name)\"}", Int64(f.accepted[$0.rawValue]) - Int64(f.disconnected[$0.rawValue])) })
        counter("checkoutbus_connections_refused_total",
                "Connections cut as they were accepted on each ZeroMQ socket: it had --max-connections open.",
                sockets.map { ("{socket=\"\($0.name)\"}", f.refused[$0.rawValue]) })
        gauge("checkoutbus_publish_hwm",
              "Messages queued per subscriber before it drops: --publish-hwm, or the subscribers' share of --subscriber-memory.",
              [("", Int64(snap.publishHighWaterMark))])
        counter("checkoutbus_handshakes_failed_total", "Handshakes refused or failed (CURVE keys, protocol) on each ZeroMQ socket.",
                sockets.map { ("{socket=\"\($0.name)\"}", f.handshakesFailed[$0.rawValue]) })
        counter("checkoutbus_http_connections_total", "HTTP connections to the metrics endpoint, by outcome.", [
            ("{outcome=\"accepted\"}", f.httpAccepted), ("{outcome=\"refused\"}", f.httpRefused),
            ("{outcome=\"evicted\"}", f.httpEvicted),
            ("{outcome=\"timed_out\"}", f.httpTimedOut), ("{outcome=\"aborted\"}", f.httpAborted),
        ])
        gauge("checkoutbus_http_connections_open", "HTTP connections open on the metrics endpoint.", [("", Int64(f.httpOpen))])
        counter("checkoutbus_http_requests_total", "HTTP requests answered on the metrics endpoint.", [("", f.httpRequests)])
        counter("checkoutbus_control_requests_total", "Requests on the control socket.", [("", f.controlRequests)])
        counter("checkoutbus_control_replies_dropped_total",
                "Control replies not sent: the client's queue was full (it sends without reading) or it had left.",
                [("", f.controlRepliesDropped)])
        counter("checkoutbus_replay_pages_total", "Replay pages served from the journal.", [("", f.replayPages)])
        counter("checkoutbus_replay_records_total", "Records served in replay pages.", [("", f.replayRecords)])
        gauge("checkoutbus_replay_bytes_queued",
              "Bytes of replay pages (and large stats replies) queued for control clients, not yet written to their "
                  + "connections (--control-memory).",
              [("", Int64(f.replayBytesQueued))])
        counter("checkoutbus_replay_busy_total",
                "Replay and stats requests answered busy: the client had replies queued unread, or the queued replies "
                    + "held --control-memory.",
                [("", f.replayBusy)])
        out += "# HELP checkoutbus_snapshot_age_seconds Age of the pipeline's figures this page shows.\n"
        out += "# TYPE checkoutbus_snapshot_age_seconds gauge\ncheckoutbus_snapshot_age_seconds \(Histogram.seconds(snapshotAge))\n"
        gauge("checkoutbus_up_seconds", "Seconds since the daemon started.", [("", Int64(upNanoseconds / 1_000_000_000))])
        gauge("checkoutbus_build_info", "1, labelled with the version and the git revision the daemon was built from.",
              [("{version=\"\(escape(CheckoutBusVersion.current))\",revision=\"\(escape(CheckoutBusVersion.revision))\"}", 1)])
        ProcessFigures.read().write(to: &out)
        return out
    }

    /// A label value with backslash, quote and newline escaped.
    package static func escape(_ s: String) -> String {
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
