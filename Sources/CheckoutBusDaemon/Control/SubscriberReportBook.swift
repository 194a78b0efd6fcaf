import CheckoutBusCore
import Synchronization
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime
import ZeroMQ

/// The latest `report` of each subscriber (drops it saw, envelopes it recovered), kept for `stats`
/// and `/metrics`.
///
/// `Sendable`: one mutex. The control thread records reports; the metrics thread reads them. At
/// most ``capacity`` names: the least recently reporting is forgotten first.
package final class SubscriberReportBook: Sendable {
    package struct Report: Sendable {
        var lastSeq: Int64 = 0
        var missed: Int64 = 0
        var recovered: Int64 = 0
        var gaps: Int64 = 0
        /// Envelopes the subscriber holds parked, not applied (the fulfilment worker's `rejected`
        /// table), as it last said; 0 for a subscriber that does not report it.
        var rejected: Int64 = 0
        var reportedAt = Timestamp(milliseconds: 0)
        var order: UInt64 = 0
    }

    package static let capacity = 1024

    private struct State {
        var reports: [String: Report] = [:]
        var order: UInt64 = 0
    }

    private let state = Mutex(State())

    /// Updates `name`'s report with the fields given (nil: unchanged), stamped now.
    package func record(_ name: String, lastSeq: Int64?, missed: Int64?, recovered: Int64?, gaps: Int64?,
                        rejected: Int64? = nil, at time: Timestamp) {
        state.withLock { s in
            var r = s.reports[name] ?? Report()
            r.lastSeq = lastSeq ?? r.lastSeq
            r.missed = missed ?? r.missed
            r.recovered = recovered ?? r.recovered
            r.gaps = gaps ?? r.gaps
            r.rejected = rejected ?? r.rejected
            r.reportedAt = time
            s.order += 1
            r.order = s.order
            s.reports[name] = r
            if s.reports.count > SubscriberReportBook.capacity,
                let stalest = s.reports.min(by: { $0.value.order < $1.value.order })?.key
            {
                s.reports[stalest] = nil
            }
        }
    }

    /// Every report, by name.
    package var sorted: [(name: String, report: Report)] {
        state.withLock { s in s.reports.keys.sorted().map { ($0, s.reports[$0]!) } }
    }
}
