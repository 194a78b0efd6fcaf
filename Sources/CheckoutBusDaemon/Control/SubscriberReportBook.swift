import CheckoutBusCore
import Synchronization
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// The subscribers the daemon knows from their `report`s (position, drops, envelopes recovered),
/// each `live` or `gone`, kept for `stats`, `/metrics` and `checkoutbus subscribers`
/// (docs/observability.md, "Subscribers, live and gone").
///
/// A subscriber is *live* while it reports (every heartbeat) and *gone* once it sent its final
/// report (a clean stop) or has sent none for ``Lifetimes/goneAfterMilliseconds``. A gone one is
/// forgotten ``Lifetimes/expireAfterMilliseconds`` after it went, or at once by ``forget(_:)``.
///
/// `Sendable`: one mutex. The control thread records reports; the metrics thread reads them. At
/// most ``capacity`` names: when full, a gone one is forgotten first, else the least recently
/// reporting.
package final class SubscriberReportBook: Sendable {
    package struct Report: Sendable {
        var lastSeq: Int64 = 0
        /// The seq through which the subscriber has every envelope it follows (an idle filtered
        /// subscriber's reaches the bus's last seq although it handled nothing); `lastSeq` when it
        /// does not say.
        var throughSeq: Int64 = 0
        var missed: Int64 = 0
        var recovered: Int64 = 0
        var gaps: Int64 = 0
        /// Envelopes the subscriber holds parked, not applied (the fulfilment worker's `rejected`
        /// table), as it last said; 0 for a subscriber that does not report it.
        var rejected: Int64 = 0
        /// It keeps a position across runs (a cursor file or store): its silence matters. A
        /// subscriber that does not say is taken to keep one.
        var durable = true
        /// Its last report was its final one: it stopped cleanly.
        var stopped = false
        var reportedAt = Timestamp(milliseconds: 0)
        /// `reportedAt` on the monotonic clock (ms), for ages.
        var reportedAtMono: Int64 = 0
        var order: UInt64 = 0

        /// The position lag is measured from.
        package var position: Int64 { max(lastSeq, throughSeq) }
    }

    /// A subscriber's state (docs/observability.md).
    package enum State: String, Sendable {
        case live, gone
    }

    /// Why a gone subscriber is gone.
    package enum GoneReason: String, Sendable {
        /// It sent its final report.
        case stopped
        /// It sent no report for ``Lifetimes/goneAfterMilliseconds``.
        case silent
    }

    /// How long silence makes a subscriber gone, and a gone one is kept. `Sendable`.
    package struct Lifetimes: Sendable {
        package var goneAfterMilliseconds: Int64
        package var expireAfterMilliseconds: Int64
        package init(goneAfterMilliseconds: Int64 = 15_000, expireAfterMilliseconds: Int64 = 3_600_000) {
            self.goneAfterMilliseconds = goneAfterMilliseconds
            self.expireAfterMilliseconds = expireAfterMilliseconds
        }
    }

    /// One subscriber as seen at a time.
    package struct Entry: Sendable {
        package var name: String
        package var report: Report
        package var state: State
        package var goneReason: GoneReason?
        /// Milliseconds since its last report.
        package var ageMilliseconds: Int64

        /// Shown in `/metrics`: a live subscriber, or a gone durable one (a worker that stopped or
        /// went silent still has a position to come back to); a gone `tail` leaves no series.
        package var exported: Bool { state == .live || report.durable }
    }

    package static let capacity = 1024

    private struct Book {
        var reports: [String: Report] = [:]
        var order: UInt64 = 0
    }

    private let book = Mutex(Book())
    package let lifetimes: Lifetimes

    package init(lifetimes: Lifetimes = Lifetimes()) {
        self.lifetimes = lifetimes
    }

    /// The monotonic clock in ms.
    static func nowMilliseconds() -> Int64 { Int64(BusClock.monotonicNanoseconds() / 1_000_000) }

    /// Updates `name`'s report with the fields given (nil: unchanged), stamped now.
    package func record(_ name: String, lastSeq: Int64?, throughSeq: Int64? = nil, missed: Int64?, recovered: Int64?, gaps: Int64?,
                        rejected: Int64? = nil, durable: Bool? = nil, final: Bool = false, at time: Timestamp,
                        now: Int64 = SubscriberReportBook.nowMilliseconds()) {
        book.withLock { s in
            var r = s.reports[name] ?? Report()
            r.lastSeq = lastSeq ?? r.lastSeq
            r.throughSeq = throughSeq ?? r.lastSeq
            r.missed = missed ?? r.missed
            r.recovered = recovered ?? r.recovered
            r.gaps = gaps ?? r.gaps
            r.rejected = rejected ?? r.rejected
            r.durable = durable ?? r.durable
            r.stopped = final
            r.reportedAt = time
            r.reportedAtMono = now
            s.order += 1
            r.order = s.order
            s.reports[name] = r
            if s.reports.count > SubscriberReportBook.capacity {
                // A gone one first (the longest gone), else the least recently reporting.
                let gone = s.reports.filter { state(of: $0.value, now: now).0 == .gone }
                if let victim = (gone.isEmpty ? s.reports : gone).min(by: { $0.value.order < $1.value.order })?.key {
                    s.reports[victim] = nil
                }
            }
        }
    }

    /// Forgets `name` now; returns the entry it had, if any (a live subscriber comes back with its
    /// next report).
    package func forget(_ name: String, now: Int64 = SubscriberReportBook.nowMilliseconds()) -> Entry? {
        book.withLock { s in
            guard let r = s.reports.removeValue(forKey: name) else { return nil }
            let (state, reason) = state(of: r, now: now)
            return Entry(name: name, report: r, state: state, goneReason: reason, ageMilliseconds: max(0, now - r.reportedAtMono))
        }
    }

    private func state(of r: Report, now: Int64) -> (State, GoneReason?) {
        if r.stopped { return (.gone, .stopped) }
        if now - r.reportedAtMono >= lifetimes.goneAfterMilliseconds { return (.gone, .silent) }
        return (.live, nil)
    }

    /// Every subscriber known at `now`, by name; those gone longer than
    /// ``Lifetimes/expireAfterMilliseconds`` are forgotten first.
    package func entries(now: Int64 = SubscriberReportBook.nowMilliseconds()) -> [Entry] {
        book.withLock { s in
            var out: [Entry] = []
            var expired: [String] = []
            for (name, r) in s.reports {
                let (state, reason) = state(of: r, now: now)
                let age = max(0, now - r.reportedAtMono)
                if state == .gone {
                    let goneFor = reason == .stopped ? age : age - lifetimes.goneAfterMilliseconds
                    if goneFor >= lifetimes.expireAfterMilliseconds {
                        expired.append(name)
                        continue
                    }
                }
                out.append(Entry(name: name, report: r, state: state, goneReason: reason, ageMilliseconds: age))
            }
            for name in expired { s.reports[name] = nil }
            return out.sorted { $0.name < $1.name }
        }
    }
}
