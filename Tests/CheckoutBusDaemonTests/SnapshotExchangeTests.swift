import Glibc
import Testing

@testable import CheckoutBusCore
import CheckoutBusRuntime
@testable import CheckoutBusDaemon

/// The exchange between the pipeline and the threads serving clients: a reader that has
/// unregistered is never written to, so it can close its pipe while the pipeline goes on.
@Suite("snapshot exchange: readers come and go")
struct SnapshotExchangeTests {
    static func snapshot() -> DaemonSnapshot {
        DaemonSnapshot(takenAt: 1, counters: EventProcessor.Counters(), kindSeqs: [0, 0, 0, 0, 0, 0], lastSeq: 0,
                       durableSeq: 0, firstSeq: 0, journalSegments: 0, journalBytes: 0, fsyncs: 0, fsyncMaxMicros: 0,
                       fsyncHistogram: Histogram(boundsMicroseconds: [1]), writesDirect: false, journalWritable: true,
                       trackedCheckouts: 0, evictedCheckouts: 0, expiredCheckouts: 0,
                       pipelineLatency: Histogram(boundsMicroseconds: [1]), stages: StageTimes())
    }

    static func readable(_ pipe: WakePipe) -> Bool {
        var fd = pollfd(fd: pipe.readFD, events: Int16(POLLIN), revents: 0)
        return poll(&fd, 1, 0) == 1
    }

    @Test("a publication wakes every registered reader and no unregistered one")
    func unregistered() throws {
        let exchange = try SnapshotExchange()
        defer { exchange.requests.close() }
        let a = try WakePipe("a"), b = try WakePipe("b")
        defer { a.close(); b.close() }
        exchange.register(a)
        exchange.register(b)
        exchange.publish(Self.snapshot())
        #expect(Self.readable(a) && Self.readable(b))
        a.drain(); b.drain()

        exchange.unregister(a)
        #expect(exchange.readerCount == 1)
        exchange.publish(Self.snapshot())
        #expect(!Self.readable(a))
        #expect(Self.readable(b))
        #expect(exchange.latest.generation == 2)

        exchange.unregister(b)
        exchange.unregister(b)  // twice: nothing to remove
        #expect(exchange.readerCount == 0)
    }
}
