import Foundation
import Glibc
import Testing

import NATS

/// The NATS owner without a server: a connection to a port nobody listens on fails fast, with the
/// C client's status and the function that failed, instead of hanging.
@Suite("NATS connection", .serialized)
struct NATSConnectionTests {
    /// A loopback port that was free a moment ago (bound, then closed).
    static func closedPort() -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { p -> Int32 in
                _ = bind(fd, p, len)
                return getsockname(fd, p, &len)
            }
        }
        return UInt16(bigEndian: addr.sin_port)
    }

    // The limit guards against a hang only (the test measures its own 30 s bound from inside): in a
    // full run the integration suites' blocking tests can hold the cooperative pool's threads for
    // minutes, and this test then waits that long before it runs.
    @Test("no server: the connect fails within its timeout and names the failing call", .timeLimit(.minutes(5)))
    func noServer() {
        var options = NATSConnection.Options(servers: ["nats://127.0.0.1:\(Self.closedPort())"], name: "test")
        options.maxReconnect = 0
        options.connectTimeoutMilliseconds = 500
        let started = Date()
        do {
            _ = try NATSConnection(options: options)
            Issue.record("connected to a port nobody listens on")
        } catch {
            #expect(error.status != 0)
            #expect(!error.function.isEmpty)
            #expect(!error.description.isEmpty)
        }
        #expect(Date().timeIntervalSince(started) < 30)
    }
}
