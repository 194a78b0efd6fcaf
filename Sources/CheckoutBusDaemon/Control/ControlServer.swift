#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusCore
import Foundation
import Synchronization
import ZeroMQ
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// The control thread: everything that serves a client besides the pipeline itself. It owns the
/// control socket (replay, stats, report: ``ControlService``), the CURVE handshakes' ZAP handlers,
/// and the monitors that count each socket's connections (``ServiceCounters``).
///
/// The control socket lives in a ZeroMQ context of its own, with its own I/O thread, so the bytes
/// of replay pages never queue behind live envelopes in the pipeline's I/O thread. This thread
/// runs at a lower scheduling priority than the pipeline (nice +5): on a busy host, a replay storm
/// waits for CPU before live traffic does.
///
/// `Sendable` handle; the sockets and the service live on the thread, which ``stop()`` ends.
package final class ControlServer: Sendable {
    package struct Settings: Sendable {
        var endpoint: String
        /// The context of the pipeline's sockets: their ZAP handler and monitors are made in it.
        var liveContext: ZMQContext
        /// The control socket's own context.
        var controlContext: ZMQContext
        var allowlists: CurveAllowlists?
        var curveSecretKey: String?
        var shard: ShardMap
        /// The journal's identity (`<data-dir>/journal-id`) and the run's start, which replay replies carry.
        var run: DaemonRun?
        /// Monitors of the pipeline's sockets (`inproc://` endpoints their owner started), by socket.
        var monitors: [(socket: ServiceCounters.Socket, endpoint: String)]
        /// Connections each ZeroMQ socket keeps, by ``ServiceCounters/Socket``; more are cut as
        /// they are accepted.
        var maxConnections: [Int]
        /// What all control clients' queued replies may hold together (`--control-memory`).
        var replyBudget: Int
        var catalog: JournalCatalog
        var exchange: SnapshotExchange
        var reports: SubscriberReportBook
        var counters: ServiceCounters
        var logger: BusLogger
    }

    /// Replies queued per control client before further replies to it are dropped (`ZMQ_SNDHWM`).
    package static let sendHighWaterMark: Int32 = 8
    /// Requests queued per control client (`ZMQ_RCVHWM`): clients ask one or two things at a time
    /// (a subscriber's report beside its replay). libzmq counts a multipart message once, whatever
    /// its frames, so this is also what bounds the frames a client can park in the daemon while the
    /// control thread is busy (each frame at most ``maxRequestBytes``).
    package static let receiveHighWaterMark: Int32 = 8
    /// A control request larger than this disconnects its client (`ZMQ_MAXMSGSIZE`).
    package static let maxRequestBytes: Int64 = 64 * 1024

    /// The control endpoint as bound.
    package let endpoint: String
    private let thread: Runner

    /// Starts the thread, which sets up its sockets and binds the control endpoint.
    /// - Throws: what setting up threw (an endpoint that cannot be bound, say).
    package init(_ settings: Settings) throws {
        thread = try Runner()
        endpoint = try thread.start(settings)
    }

    /// Ends the thread after the request it is serving, and waits for it.
    package func stop() { thread.stop() }
}

extension ControlServer {
    /// The thread itself. `Sendable`: an atomic flag, a pipe and semaphores.
    private final class Runner: Sendable {
        private let stopping = Atomic<Bool>(false)
        /// A connection monitor's read has failed, and it was said (once: a monitor that keeps
        /// failing is readable on every poll).
        private let monitorReadFailed = Atomic<Bool>(false)
        private let wake: WakePipe
        private let finished = DispatchSemaphore(value: 0)
        /// The bound endpoint, or why binding failed, once the thread has set up.
        private let started = Mutex<Result<String, any Error>?>(nil)
        private let startedSignal = DispatchSemaphore(value: 0)

        init() throws { wake = try WakePipe("control thread's") }

        func start(_ settings: Settings) throws -> String {
            NamedThread.start("control") { [self] in run(settings) }
            startedSignal.wait()
            switch started.withLock({ $0 })! {
            case .success(let bound): return bound
            case .failure(let error):
                finished.wait()
                wake.close()
                throw error
            }
        }

        func stop() {
            stopping.store(true, ordering: .releasing)
            wake.signal()
            finished.wait()
            wake.close()
        }

        private func run(_ s: Settings) {
            defer { finished.signal() }
            lowerPriority(s.logger)
            let snapshots: WakePipe
            var sockets: (control: ZMQSocket, zap: [CurveAuthenticator], monitors: [(ServiceCounters.Socket, ZMQSocket)])
            do {
                snapshots = try WakePipe("control thread's snapshot")
                sockets = try setUp(s)
                started.withLock { $0 = .success((try? sockets.control.lastEndpoint) ?? s.endpoint) }
            } catch {
                started.withLock { $0 = .failure(error) }
                startedSignal.signal()
                return
            }
            startedSignal.signal()
            s.exchange.register(snapshots)
            defer {
                s.exchange.unregister(snapshots)
                snapshots.close()
            }
            let service = ControlService(reader: JournalReader(catalog: s.catalog, logger: s.logger), shard: s.shard,
                                         exchange: s.exchange, reports: s.reports, counters: s.counters)
            service.run = s.run
            service.replyBudget = s.replyBudget
            let poller = ZMQPoller()
            let controlIndex = poller.addReadable(sockets.control)
            let wakeIndex = poller.addReadable(fileDescriptor: wake.readFD)
            let snapshotIndex = poller.addReadable(fileDescriptor: snapshots.readFD)
            let zapIndexes = sockets.zap.map { poller.addReadable($0.socket) }
            let monitorIndexes = sockets.monitors.map { poller.addReadable($0.1) }
            while !stopping.load(ordering: .acquiring) {
                do {
                    // Waiting stats requests are answered within their wait even if no snapshot comes.
                    let wait = service.hasPendingStats ? 50 : 500
                    guard try poller.poll(timeoutMilliseconds: wait) >= 0 else { continue }
                    if poller.isReadable(wakeIndex) { wake.drain() }
                    for (i, zap) in zip(zapIndexes, sockets.zap) where poller.isReadable(i) { try zap.serve() }
                    for (i, (socket, monitor)) in zip(monitorIndexes, sockets.monitors) where poller.isReadable(i) {
                        readEvents(monitor, socket, s)
                    }
                    if poller.isReadable(snapshotIndex) { snapshots.drain() }
                    try service.answerPendingStats(sockets.control)
                    // One request per client and turn: a page each, then the next client's.
                    if poller.isReadable(controlIndex) { try service.serve(sockets.control, limit: 4) }
                } catch let e as ZMQError where e.isContextTerminated {
                    break
                } catch {
                    s.logger.error("control: request failed", ["error": "\(error)"])
                }
            }
            // Before the monitors' readers close (libzmq's monitor sends block without a reader).
            do { try sockets.control.stopMonitor() } catch {
                s.logger.warning("control: its connection monitor could not be stopped", ["error": "\(error)"])
            }
        }

        /// Creates the ZAP handlers, the monitors' readers and the control socket, and binds it.
        private func setUp(_ s: Settings) throws
            -> (control: ZMQSocket, zap: [CurveAuthenticator], monitors: [(ServiceCounters.Socket, ZMQSocket)])
        {
            // The ZAP handlers are bound before any CURVE socket of their context accepts a connection.
            var zap: [CurveAuthenticator] = []
            if let allowlists = s.allowlists {
                zap.append(try CurveAuthenticator(context: s.liveContext, allowlists: allowlists, logger: s.logger))
                zap.append(try CurveAuthenticator(context: s.controlContext, allowlists: allowlists, logger: s.logger))
            }
            var monitors: [(ServiceCounters.Socket, ZMQSocket)] = []
            for (socket, endpoint) in s.monitors {
                monitors.append((socket, try Runner.monitorReader(s.liveContext, endpoint)))
            }
            let control = try ZMQSocket(context: s.controlContext, type: .router)
            try control.setOption(.sendHighWaterMark, ControlServer.sendHighWaterMark)
            try control.setOption(.receiveHighWaterMark, ControlServer.receiveHighWaterMark)
            try control.setOption(.routerMandatory, 1)
            try control.setMaxMessageSize(ControlServer.maxRequestBytes)
            try control.setHandshakeTimeout(milliseconds: BusDaemon.handshakeTimeoutMilliseconds)
            try control.setLinger(milliseconds: 0)
            try control.monitor("inproc://checkoutbus-monitor-control")
            monitors.append((.control, try Runner.monitorReader(s.controlContext, "inproc://checkoutbus-monitor-control")))
            if let key = s.curveSecretKey {
                try control.makeCurveServer(secretKey: key, domain: CurveAllowlists.subscribersDomain)
            }
            try control.bind(s.endpoint)
            return (control, zap, monitors)
        }

        /// The reader of a socket monitor: no receive high-water mark, so libzmq's blocking event
        /// sends never wait for this thread (``ZMQSocket/monitor(_:events:)``).
        static func monitorReader(_ context: ZMQContext, _ endpoint: String) throws -> ZMQSocket {
            let pair = try ZMQSocket(context: context, type: .pair)
            try pair.setLinger(milliseconds: 0)
            try pair.setOption(.receiveHighWaterMark, 0)
            try pair.connect(endpoint)
            return pair
        }

        /// Counts the connection events queued on a monitor's socket, and cuts a connection
        /// accepted while its socket already had its ``Settings/maxConnections`` open.
        ///
        /// The queued events are read first: a connection accepted and gone again within them is
        /// not looked for, since its descriptor may already belong to a newer connection.
        private func readEvents(_ monitor: ZMQSocket, _ socket: ServiceCounters.Socket, _ s: Settings) {
            var events: [(event: ZMQMonitorEvent, endpoint: [UInt8])] = []
            while events.count < 4096 {
                let frames: [[UInt8]]?
                do {
                    frames = try monitor.receiveMultipart(dontWait: true)
                } catch {
                    // Connection counts and the cap on connections go by these events: said.
                    if !monitorReadFailed.exchange(true, ordering: .relaxed) {
                        s.logger.error("control: a connection monitor cannot be read; connection counts and the "
                                       + "connection cap may lag", ["socket": "\(socket)", "error": "\(error)"])
                    }
                    break
                }
                guard let frames else { break }
                guard let first = frames.first, let e = ZMQMonitorEvent(frame: first) else { continue }
                events.append((e, frames.count > 1 ? frames[1] : []))
            }
            for (i, (e, endpoint)) in events.enumerated() {
                var open = 0
                s.counters.update { c in
                    switch e.event {
                    case ZMQMonitorEvent.accepted: c.accepted[socket.rawValue] += 1
                    case ZMQMonitorEvent.disconnected: c.disconnected[socket.rawValue] += 1
                    case ZMQMonitorEvent.handshakeFailedNoDetail, ZMQMonitorEvent.handshakeFailedProtocol,
                        ZMQMonitorEvent.handshakeFailedAuth:
                        c.handshakesFailed[socket.rawValue] += 1
                    default: break
                    }
                    open = Int(c.accepted[socket.rawValue]) - Int(c.disconnected[socket.rawValue])
                }
                guard e.event == ZMQMonitorEvent.accepted, open > s.maxConnections[socket.rawValue] else { continue }
                let goneSince = events[(i + 1)...].contains { $0.event.event == ZMQMonitorEvent.disconnected && $0.event.value == e.value }
                if !goneSince && ConnectionCutter.cut(Int32(bitPattern: e.value), acceptedOn: endpoint) {
                    s.counters.update { $0.refused[socket.rawValue] += 1 }
                }
            }
        }
    }
}

/// Cuts a connection libzmq accepted, by its descriptor, from outside libzmq: `shutdown(2)`, so
/// libzmq sees the peer gone and closes the descriptor itself (closing it here would race with
/// libzmq's use of it).
enum ConnectionCutter {
    /// Shuts down `fd` if it still is a connection accepted on `listener` (the monitor event's
    /// endpoint: `tcp://HOST:PORT` or `ipc://PATH`); the descriptor may have been closed and reused
    /// since the event, and anything else is left alone.
    /// - Returns: whether it was cut.
    static func cut(_ fd: Int32, acceptedOn listener: [UInt8]) -> Bool {
        guard fd >= 0 else { return false }
        let endpoint = String(decoding: listener, as: UTF8.self)
        var local = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { return false }
        var peer = sockaddr_storage()
        var peerLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let connected = withUnsafeMutablePointer(to: &peer) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &peerLength) }
        }
        // A listening socket has no peer: never cut one.
        guard connected == 0 else { return false }
        let matches: Bool
        switch Int32(local.ss_family) {
        case AF_INET, AF_INET6:
            guard endpoint.hasPrefix("tcp://"), let colon = endpoint.lastIndex(of: ":"),
                let port = UInt16(endpoint[endpoint.index(after: colon)...])
            else { return false }
            let family = Int32(local.ss_family)
            let localPort = withUnsafePointer(to: &local) { p -> UInt16 in
                if family == AF_INET {
                    return p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
                }
                return p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
            }
            matches = localPort == port
        case AF_UNIX:
            guard endpoint.hasPrefix("ipc://") else { return false }
            // An abstract socket's name starts with a NUL byte, which libzmq spells `@`.
            let path = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr_un.self, capacity: 1) { un in
                    withUnsafeBytes(of: un.pointee.sun_path) { bytes in
                        bytes.first == 0 ? "@" + String(decoding: bytes.dropFirst().prefix { $0 != 0 }, as: UTF8.self)
                            : String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
                    }
                }
            }
            matches = path == String(endpoint.dropFirst("ipc://".count))
        default:
            matches = false
        }
        return matches && shutdown(fd, Int32(SHUT_RDWR)) == 0
    }
}

/// Lowers the calling thread's scheduling priority (Linux: a thread is a task with its own nice
/// value), so the pipeline wins the CPU from the threads that serve clients.
package func lowerPriority(_ logger: BusLogger, by increment: Int32 = 5) {
    // `who` 0 with PRIO_PROCESS is the calling thread on Linux (each thread has its own nice value).
    let which = __priority_which_t(PRIO_PROCESS.rawValue)
    if setpriority(which, 0, getpriority(which, 0) + increment) != 0 {
        logger.debug("cannot lower a helper thread's priority", ["error": String(cString: strerror(errno))])
    }
}
