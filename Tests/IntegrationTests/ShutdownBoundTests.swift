import Foundation
import Synchronization
import Testing
import ZeroMQ

#if canImport(Glibc)
import Glibc
#endif

/// SIGTERM drains what was received, but not for ever (docs/durability.md, "Stopping"): producers
/// that never stop sending, on both ingest sockets, cannot hold the daemon's exit off.
@Suite("shutdown under producers that never stop", .serialized, .timeLimit(.minutes(5)))
struct ShutdownBoundTests {
    /// Sends distinct events on a PUSH and a DEALER as fast as they go, until told to stop.
    final class EndlessProducers: Sendable {
        let stop = Atomic<Bool>(false)
        let sent = Atomic<Int>(0)
        let done = DispatchSemaphore(value: 0)

        init(ingest: String, ingestAcked: String) {
            for (endpoint, type) in [(ingest, ZMQSocketType.push), (ingestAcked, .dealer)] {
                Thread { [self] in
                    defer { done.signal() }
                    guard let context = try? ZMQContext(), let socket = try? ZMQSocket(context: context, type: type) else { return }
                    try? socket.setLinger(milliseconds: 0)
                    try? socket.connect(endpoint)
                    var i = 0
                    while !stop.load(ordering: .relaxed) {
                        let event = distinctEvents(1, run: "endless-\(type == .push ? "push" : "dealer")-\(i)")[0]
                        if (try? socket.send(Array(event.utf8), dontWait: true)) == true {
                            i += 1
                            sent.add(1, ordering: .relaxed)
                        } else {
                            usleep(100)
                        }
                        // The DEALER's answers are read and thrown away, so it is never the one blocked.
                        if type == .dealer { while (try? socket.receiveMultipart(dontWait: true)) != nil {} }
                    }
                }.start()
            }
        }

        func finish() {
            stop.store(true, ordering: .relaxed)
            done.wait()
            done.wait()
        }
    }

    @Test("SIGTERM with both ingest sockets flooded for ever: exit 0 within the drain bound, every published event journaled")
    func endlessProducers() throws {
        let daemon = try DaemonProcess()
        let producers = EndlessProducers(ingest: daemon.ingest, ingestAcked: daemon.ingestAcked)
        defer { producers.finish() }
        // Under way: the daemon has taken a good number of both.
        #expect(waitUntil(20) { producers.sent.load(ordering: .relaxed) > 20_000 })
        let started = Date()
        daemon.process.terminate()
        let status = waitForExit(daemon.process, timeout: 20)
        let seconds = Date().timeIntervalSince(started)
        print("shutdown under endless producers: exit \(status) after \(String(format: "%.2f", seconds)) s")
        #expect(status == 0)
        #expect(seconds < 10, "the drain is bounded at 2 s (plus the final sync): took \(seconds) s")
        #expect(daemon.stderrText.contains("stopping: producers were still sending"))
        // What it took before stopping is all in the journal, in order, on the next start.
        let restarted = try DaemonProcess(dataDirectory: daemon.dataDirectory)
        let ids = try AcknowledgedProducerTests.journalEventIDs(restarted)
        #expect(ids.count > 1000)
        #expect(Set(ids.keys) == Set(1...ids.count), "seqs 1…\(ids.count) without a hole")
        #expect(restarted.terminate() == 0)
    }
}
