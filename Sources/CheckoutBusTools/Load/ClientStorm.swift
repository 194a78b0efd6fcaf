#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import ZeroMQ
import CheckoutBusDaemon
import CheckoutBusClient
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// Impatient clients hammering a daemon's side doors, for `checkoutbus bench`'s abuse round and
/// the tests that prove they cannot stall the bus: replay clients that ask for the journal's
/// first 10,000 records again and again (a subscriber catching up after an outage, times four), and
/// metrics scrapers that fetch `/metrics` in a loop.
///
/// `Sendable`: each client runs on a thread of its own with its own sockets; ``stop()`` ends them
/// and returns what they got.
public final class ClientStorm: Sendable {
    /// What the clients got: replay pages, records in them, `/metrics` pages.
    public struct Tally: Sendable {
        public var pages = 0
        public var records = 0
        public var scrapes = 0
    }

    private let stopping = Atomic<Bool>(false)
    private let tally = Mutex(Tally())
    private let done = DispatchSemaphore(value: 0)
    private let clients: Int

    /// Starts `replayClients` replay loops on `control` and `scrapers` scrape loops on `metrics`.
    /// - Parameters:
    ///   - control: the daemon's control endpoint (needed when `replayClients` > 0).
    ///   - metrics: the daemon's metrics `HOST:PORT` (needed when `scrapers` > 0).
    public init(control: String?, metrics: String?, replayClients: Int = 4, scrapers: Int = 1, pageLimit: Int = 10_000) {
        clients = (control == nil ? 0 : replayClients) + (metrics == nil ? 0 : scrapers)
        if let control {
            for i in 0..<replayClients {
                let thread = Thread { [self] in replayLoop(control, pageLimit: pageLimit) }
                thread.name = "storm-replay-\(i)"
                thread.start()
            }
        }
        if let metrics {
            for i in 0..<scrapers {
                let thread = Thread { [self] in scrapeLoop(metrics) }
                thread.name = "storm-scrape-\(i)"
                thread.start()
            }
        }
    }

    /// Ends every client (each within about a second) and returns the tally.
    @discardableResult
    public func stop() -> Tally {
        stopping.store(true, ordering: .releasing)
        for _ in 0..<clients { done.wait() }
        return tally.withLock { $0 }
    }

    private var running: Bool { !stopping.load(ordering: .acquiring) }

    private func replayLoop(_ endpoint: String, pageLimit: Int) {
        defer { done.signal() }
        guard let context = try? ZMQContext(), let socket = try? ZMQSocket(context: context, type: .dealer) else { return }
        defer { context.shutdown() }
        try? socket.setLinger(milliseconds: 0)
        try? socket.setOption(.receiveTimeout, 1000)
        guard (try? socket.connect(endpoint)) != nil else { return }
        let request = "{\"op\":\"replay\",\"from\":1,\"limit\":\(pageLimit)}"
        while running {
            guard (try? socket.send(request)) != nil else { return }
            // A reply that times out (the daemon busy, or it dropped it) is simply asked again.
            guard let frames = try? socket.receiveMultipart() else { continue }
            tally.withLock {
                $0.pages += 1
                $0.records += (frames.count - 1) / 2
            }
        }
    }

    private func scrapeLoop(_ address: String) {
        defer { done.signal() }
        while running {
            if (try? ClientStorm.httpGet(address, "/metrics", timeoutSeconds: 1)) != nil {
                tally.withLock { $0.scrapes += 1 }
            } else {
                usleep(10_000)
            }
        }
    }

    /// One HTTP/1.1 GET over a fresh TCP connection to an IPv4 `HOST:PORT`, read to the end.
    /// - Returns: the status code and body.
    /// - Throws: ``DaemonError`` when it cannot connect or the answer is not HTTP.
    public static func httpGet(_ address: String, _ path: String, timeoutSeconds: Int = 10) throws -> (status: Int, body: String) {
        guard let colon = address.lastIndex(of: ":"), let port = UInt16(address[address.index(after: colon)...]) else {
            throw DaemonError("not HOST:PORT: \(address)")
        }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw DaemonError("socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        inet_pton(AF_INET, String(address[..<colon]), &addr.sin_addr)
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let connected = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw DaemonError("cannot connect to \(address)") }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: \(address)\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            response.append(contentsOf: buffer[0..<n])
        }
        let text = String(decoding: response, as: UTF8.self)
        guard text.hasPrefix("HTTP/1.1 "), let status = Int(text.dropFirst(9).prefix(3)) else {
            throw DaemonError("not an HTTP response from \(address)")
        }
        let body = text.range(of: "\r\n\r\n").map { String(text[$0.upperBound...]) } ?? ""
        return (status, body)
    }
}
