#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusTools
import Foundation
import Synchronization
import ZeroMQ
import CheckoutBusClient
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// Impatient clients hammering a daemon's side doors, for `checkoutbus bench`'s abuse round and
/// the tests that prove they cannot stall the bus: replay clients that ask for the journal's
/// first 10,000 records again and again (a subscriber catching up after an outage, times four), and
/// metrics scrapers that fetch `/metrics` in a loop. With `publish`, the hostile ones of
/// docs/security.md as well: a subscriber churning distinct short subscriptions, 20 subscribers that
/// never read, a control client sending multipart requests of 64 KiB frames, and stalled
/// half-sent HTTP heads.
///
/// `Sendable`: each client runs on a thread of its own with its own sockets; ``stop()`` ends them
/// and returns what they got.
package final class ClientStorm: Sendable {
    /// What the clients got: replay pages, records in them, `/metrics` pages.
    package struct Tally: Sendable {
        package var pages = 0
        package var records = 0
        package var scrapes = 0
        /// Subscriptions and cancellations the churning subscriber sent.
        package var subscriptions = 0
        /// Multipart control requests sent.
        package var multipart = 0
    }

    private let stopping = Atomic<Bool>(false)
    private let tally = Mutex(Tally())
    private let done = DispatchSemaphore(value: 0)
    private let clients: Int

    /// Starts `replayClients` replay loops on `control` and `scrapers` scrape loops on `metrics`.
    /// - Parameters:
    ///   - control: the daemon's control endpoint (needed when `replayClients` > 0).
    ///   - metrics: the daemon's metrics `HOST:PORT` (needed when `scrapers` > 0).
    ///   - publish: the daemon's publish endpoint: adds the hostile clients (the churner, 20
    ///     subscribers that never read, and with `control` and `metrics` a multipart control client
    ///     and 100 stalled HTTP heads).
    package init(control: String?, metrics: String?, publish: String? = nil, replayClients: Int = 4, scrapers: Int = 1,
                pageLimit: Int = 10_000) {
        let hostile = publish == nil ? 0 : 2 + (control == nil ? 0 : 1) + (metrics == nil ? 0 : 1)
        clients = (control == nil ? 0 : replayClients) + (metrics == nil ? 0 : scrapers) + hostile
        if let publish {
            Thread { [self] in churnLoop(publish) }.start()
            Thread { [self] in neverReadLoop(publish) }.start()
            if let control { Thread { [self] in multipartLoop(control) }.start() }
            if let metrics { Thread { [self] in stalledHeadsLoop(metrics) }.start() }
        }
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
    package func stop() -> Tally {
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
        let request = ControlRequestWire.replay(from: 1, limit: pageLimit)
        while running {
            guard (try? socket.send(request)) != nil else { return }
            // A reply that times out (the daemon busy, or it dropped it) is simply asked again.
            guard let frames = try? socket.receiveMultipart() else { continue }
            // Answered `busy` (the daemon's replies at their memory bound): not a page.
            if frames.count == 1, frames[0].starts(with: Array(#"{"ok":false,"error":"busy""#.utf8)) { continue }
            tally.withLock {
                $0.pages += 1
                $0.records += (frames.count - 1) / 2
            }
        }
    }

    /// Subscribes to and cancels distinct short prefixes, 20,000 messages a second (a hundred
    /// times what a subscriber restarting in a loop sends; unthrottled, the loop measures only
    /// the CPU it takes from a two-core host).
    private func churnLoop(_ endpoint: String) {
        defer { done.signal() }
        guard let context = try? ZMQContext(), let xsub = try? ZMQSocket(context: context, type: .xsub) else { return }
        defer { context.shutdown() }
        try? xsub.setLinger(milliseconds: 0)
        try? xsub.setOption(.sendTimeout, 100)
        guard (try? xsub.connect(endpoint)) != nil else { return }
        var i = 0
        while running {
            let prefix = Array("storm.\(i % 100_000)".utf8)
            guard (try? xsub.send([1] + prefix)) == true, (try? xsub.send([0] + prefix)) == true else {
                usleep(10_000)
                continue
            }
            i += 1
            if i % 1000 == 0 {
                tally.withLock { $0.subscriptions += 2000 }
                usleep(100_000)
            }
        }
    }

    /// 20 subscribers to everything that never read: the daemon queues for each up to its mark.
    private func neverReadLoop(_ endpoint: String) {
        defer { done.signal() }
        guard let context = try? ZMQContext() else { return }
        defer { context.shutdown() }
        var subscribers: [ZMQSocket] = []
        for _ in 0..<20 {
            guard let sub = try? ZMQSocket(context: context, type: .sub) else { break }
            try? sub.setLinger(milliseconds: 0)
            try? sub.setOption(.receiveHighWaterMark, 1)
            try? sub.setOption(.receiveBuffer, 4096)
            try? sub.subscribe("")
            try? sub.connect(endpoint)
            subscribers.append(sub)
        }
        while running { usleep(50_000) }
    }

    /// Requests of 100 frames of 64 KiB, sent and never read back: ten a second (64 MB/s; more only
    /// measures the memory bandwidth of the host).
    private func multipartLoop(_ endpoint: String) {
        defer { done.signal() }
        guard let context = try? ZMQContext(), let socket = try? ZMQSocket(context: context, type: .dealer) else { return }
        defer { context.shutdown() }
        try? socket.setLinger(milliseconds: 0)
        try? socket.setOption(.sendTimeout, 100)
        guard (try? socket.connect(endpoint)) != nil else { return }
        let frames = [ControlRequestWire.stats()] + Array(repeating: [UInt8](repeating: 0x7B, count: 64 * 1024), count: 99)
        while running {
            if (try? socket.sendMultipart(frames)) == true { tally.withLock { $0.multipart += 1 } }
            usleep(100_000)
        }
    }

    /// 100 HTTP connections that sent half a request head and stall; each one closed is opened again.
    private func stalledHeadsLoop(_ address: String) {
        defer { done.signal() }
        var fds: [Int32] = []
        defer { for fd in fds { close(fd) } }
        while running {
            while fds.count < 100, let fd = try? HTTPProbe.tcpConnect(address) {
                guard Array("GET /metr".utf8).withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) > 0 else {
                    close(fd)
                    break
                }
                fds.append(fd)
            }
            var polled = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            if poll(&polled, nfds_t(polled.count), 100) < 0 { usleep(100_000) }
            fds = polled.filter { pfd in
                if pfd.revents == 0 { return true }
                close(pfd.fd)
                return false
            }.map(\.fd)
        }
    }


    private func scrapeLoop(_ address: String) {
        defer { done.signal() }
        while running {
            if (try? HTTPProbe.get(address, "/metrics", timeoutSeconds: 1)) != nil {
                tally.withLock { $0.scrapes += 1 }
            } else {
                usleep(10_000)
            }
        }
    }

}
