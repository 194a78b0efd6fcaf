import Testing

import CheckoutBusDaemon

/// When a rendered `/metrics` page is sent again rather than rendered anew (MetricsHTTPServer: one
/// page per snapshot, shared by the clients answered from it).
@Suite("the /metrics page shared by the requests of one snapshot")
struct MetricsPageTests {
    static func page(takenAt: UInt64, stale: Bool, renderedAt: UInt64) -> MetricsHTTPServer.RenderedPage {
        MetricsHTTPServer.RenderedPage(takenAt: takenAt, stale: stale, renderedAt: renderedAt, get: [], head: [])
    }

    @Test("a page of the snapshot the pipeline answered with serves every request answered with it, and no other")
    func answeredSnapshot() {
        let page = Self.page(takenAt: 100, stale: false, renderedAt: 200)
        #expect(page.serves(takenAt: 100, unanswered: false, now: 200 + 60_000_000_000))
        #expect(!page.serves(takenAt: 101, unanswered: false, now: 201))
        // The pipeline did not answer the next request: the same snapshot, shown as stale, is rendered anew.
        #expect(!page.serves(takenAt: 100, unanswered: true, now: 201))
    }

    @Test("while the pipeline does not answer, a page of the last snapshot serves for a second, then is rendered again")
    func unansweredSnapshot() {
        let page = Self.page(takenAt: 100, stale: true, renderedAt: 5_000_000_000)
        #expect(page.serves(takenAt: 100, unanswered: true, now: 5_900_000_000))
        #expect(!page.serves(takenAt: 100, unanswered: true, now: 6_000_000_000))
        // The pipeline answers again: its new snapshot's page.
        #expect(!page.serves(takenAt: 100, unanswered: false, now: 5_100_000_000))
    }
}
