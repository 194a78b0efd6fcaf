import Foundation
import Testing

/// The wire format is plain enough for any ZeroMQ client: the README's pyzmq example subscriber,
/// run as its own process, receives correct envelopes of all four raw families.
@Suite("pyzmq subscriber", .serialized, .timeLimit(.minutes(2)))
struct PyZMQSubscriberTests {
    static var pythonWithZMQ: String? {
        for python in ["/usr/bin/python3", "/usr/local/bin/python3", "python3"] {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            p.arguments = [python, "-c", "import zmq"]
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            guard (try? p.start()) != nil else { continue }
            reap(p)
            if p.terminationStatus == 0 { return python }
        }
        return nil
    }

    @Test("examples/pyzmq_subscriber.py receives every family's envelope",
          .enabled(if: pythonWithZMQ != nil, "python3 with pyzmq is not installed"))
    func pyzmqSubscriber() throws {
        let python = try #require(Self.pythonWithZMQ)
        let daemon = try DaemonProcess()
        let script = Products.repositoryRoot.appendingPathComponent("examples/pyzmq_subscriber.py")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = [python, script.path, daemon.publish, "4", "checkout."]
        let out = Pipe()
        let err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.start()
        defer { if p.isRunning { p.terminate() } }
        let errReader = PipeLineReader(err.fileHandleForReading)
        #expect(errReader.readLine(timeout: 20) == "subscribed")
        try send([
            #"{"jsonrpc":"2.0","method":"ec.start","params":{"checkout":{"id":"py-1","currency":"USD"}}}"#,
            #"{"checkout_id":"py-2","payload":{"name":"error","body":"[{\"group\":\"expired\",\"code\":\"cart_expired\",\"reason\":\"x\"}]"}}"#,
            #"{"event":"onCheckoutCompleted","checkout":{"id":"py-3","order":{"id":"o-3"}}}"#,
            #"{"checkout_id":"py-4","sdk":"primer","payload":{"state":"failure","error":{"errorId":"bad-network"}}}"#,
        ], to: daemon.ingest)
        let lines = PipeLineReader(out.fileHandleForReading).readAll(timeout: 30)
        #expect(waitForExit(p, timeout: 10) == 0)
        let events = try lines.map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        #expect(events.map { $0.string("topic") } == ["checkout.start", "checkout.fail.cart_expired",
                                                      "checkout.complete", "checkout.fail.network_error"])
        #expect(events.map { $0.string("checkout_id") } == ["py-1", "py-2", "py-3", "py-4"])
    }
}
