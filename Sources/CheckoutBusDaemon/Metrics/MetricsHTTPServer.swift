#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// `--metrics HOST:PORT`: Prometheus text at `GET /metrics` and liveness at `GET /healthz`, served
/// by a thread of its own over plain non-blocking sockets — never by the pipeline.
///
/// Not a general HTTP server, on purpose: one request head per connection (at most
/// ``maxRequestBytes``, reassembled from however many TCP segments it arrives in), `GET` or `HEAD`
/// of those two paths (anything else 404, other methods 405), answered with `Connection: close`.
/// Every connection is bounded: at most ``maxConnections`` at once (a newcomer past it takes the
/// place of the connection that has waited longest without sending a whole request, or is
/// answered 503 when all are being answered), ``requestTimeoutNanoseconds`` to send the head, ``responseTimeoutNanoseconds``
/// to take the answer; a client that closes or resets early only loses its answer. Writes never
/// block and never raise SIGPIPE. What it refuses is counted (``ServiceCounters``).
///
/// The figures come from a ``DaemonSnapshot`` the pipeline takes after the request arrived
/// (requests waiting at once share one); `/healthz` answers 200 only if the pipeline answered
/// within ``snapshotWaitNanoseconds`` and the journal is writable, so it is a real liveness probe,
/// and `/metrics` then shows the last figures with their age.
///
/// `Sendable` handle; the sockets live on the thread, which ``stop()`` ends.
package final class MetricsHTTPServer: Sendable {
    package static let maxConnections = 128
    package static let maxRequestBytes = 8192
    package static let requestTimeoutNanoseconds: UInt64 = 5_000_000_000
    package static let responseTimeoutNanoseconds: UInt64 = 5_000_000_000
    /// How long a request waits for the pipeline's snapshot: `/healthz` answers 503 after it.
    package static let snapshotWaitNanoseconds: UInt64 = 1_000_000_000

    package struct Settings: Sendable {
        /// `HOST:PORT`; PORT may be `*` or 0 for a free one, HOST `*` for every interface.
        var address: String
        var exchange: SnapshotExchange
        var reports: SubscriberReportBook
        var counters: ServiceCounters
        var startedAt: UInt64
        var logger: BusLogger
    }

    /// `HOST:PORT` as bound.
    package let boundAddress: String
    private let listenFD: Int32
    private let stopping = Atomic<Bool>(false)
    private let wake: WakePipe
    /// Readable when the pipeline has a stats snapshot for this thread; made here, so that a start
    /// without one fails, rather than a thread that quietly never answers.
    private let snapshots: WakePipe
    private let finished = DispatchSemaphore(value: 0)

    /// Binds and starts the thread.
    /// - Throws: ``DaemonError`` when the address cannot be bound.
    package init(_ settings: Settings) throws {
        (listenFD, boundAddress) = try MetricsHTTPServer.listen(settings.address)
        do {
            wake = try WakePipe("metrics thread's")
        } catch {
            Glibc.close(listenFD)
            throw error
        }
        do {
            snapshots = try WakePipe("metrics thread's snapshot")
        } catch {
            Glibc.close(listenFD)
            wake.close()
            throw error
        }
        NamedThread.start("metrics-http") { [self] in run(settings) }
    }

    package func stop() {
        stopping.store(true, ordering: .releasing)
        wake.signal()
        finished.wait()
        wake.close()
    }

    // MARK: Listening

    /// Binds a non-blocking listening socket. - Returns: it and its `HOST:PORT`.
    package static func listen(_ address: String) throws -> (Int32, String) {
        guard let colon = address.lastIndex(of: ":") else { throw DaemonError(.badSetting, "--metrics must be HOST:PORT, got \(address)") }
        var host = String(address[..<colon])
        let portText = String(address[address.index(after: colon)...])
        let port = portText == "*" ? "0" : portText
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        var hints = addrinfo()
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var info: UnsafeMutablePointer<addrinfo>?
        let rc = host == "*" || host.isEmpty
            ? getaddrinfo(nil, port, &hints, &info) : getaddrinfo(host, port, &hints, &info)
        guard rc == 0, let first = info else {
            throw DaemonError(.badSetting, "cannot resolve the metrics address \(address): \(String(cString: gai_strerror(rc)))")
        }
        defer { freeaddrinfo(info) }
        let fd = socket(first.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
                            | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw DaemonError(.noResource, "cannot create the metrics socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard bind(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0, Glibc.listen(fd, 1024) == 0 else {
            let e = errno
            Glibc.close(fd)
            throw DaemonError(.noResource, "cannot bind the metrics address \(address): \(String(cString: strerror(e)))")
        }
        // The address as bound (the port a `:0` or `:*` got), for the ready line: a start that
        // cannot tell it fails rather than announcing an address no client can use.
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else {
            let e = errno
            Glibc.close(fd)
            throw DaemonError(.noResource, "cannot read the bound metrics address: \(String(cString: strerror(e)))")
        }
        var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var service = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        let numeric = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                getnameinfo($0, length, &text, socklen_t(text.count), &service, socklen_t(service.count),
                            NI_NUMERICHOST | NI_NUMERICSERV)
            }
        }
        guard numeric == 0 else {
            Glibc.close(fd)
            throw DaemonError(.noResource,
                              "cannot format the bound metrics address: \(String(cString: gai_strerror(numeric)))")
        }
        func string(_ c: [CChar]) -> String { String(decoding: c.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        let boundHost = string(text)
        let shown = boundHost.contains(":") ? "[\(boundHost)]" : boundHost
        return (fd, "\(shown):\(string(service))")
    }

    // MARK: The thread

    private enum Phase {
        /// Reading the request head.
        case reading
        /// A `/metrics` or `/healthz` request waiting for a snapshot newer than `generation`.
        case waiting(path: String, head: Bool, generation: UInt64, since: UInt64)
        /// Writing the answer, from `sent` on.
        case writing(sent: Int)
    }

    private struct Connection {
        var fd: Int32
        var acceptedAt: UInt64
        var request: [UInt8] = []
        var phase = Phase.reading
        var response: [UInt8] = []
        var deadline: UInt64
    }

    private func run(_ s: Settings) {
        defer {
            Glibc.close(listenFD)
            finished.signal()
        }
        lowerPriority(s.logger)
        s.exchange.register(snapshots)
        defer {
            s.exchange.unregister(snapshots)
            snapshots.close()
        }
        var connections: [Connection] = []
        defer { for c in connections { Glibc.close(c.fd) } }
        var page: RenderedPage?
        var fds: [pollfd] = []
        var acceptPausedUntil: UInt64 = 0
        while !stopping.load(ordering: .acquiring) {
            let now = BusClock.monotonicNanoseconds()
            fds.removeAll(keepingCapacity: true)
            fds.append(pollfd(fd: wake.readFD, events: Int16(POLLIN), revents: 0))
            fds.append(pollfd(fd: snapshots.readFD, events: Int16(POLLIN), revents: 0))
            // Out of descriptors, the listening socket stays readable with nothing acceptable:
            // it is left out of the poll for a while instead of spun on.
            let accepting = now >= acceptPausedUntil
            fds.append(pollfd(fd: accepting ? listenFD : -1, events: Int16(POLLIN), revents: 0))
            var nextDeadline = accepting ? now + 1_000_000_000 : acceptPausedUntil
            for c in connections {
                var events: Int16 = 0
                switch c.phase {
                case .reading: events = Int16(POLLIN)
                case .waiting(_, _, _, let since): nextDeadline = min(nextDeadline, since + MetricsHTTPServer.snapshotWaitNanoseconds)
                case .writing: events = Int16(POLLOUT)
                }
                fds.append(pollfd(fd: c.fd, events: events, revents: 0))
                nextDeadline = min(nextDeadline, c.deadline)
            }
            let timeout = Int32(min(1000, (nextDeadline - min(nextDeadline, now)) / 1_000_000 + 1))
            let ready = poll(&fds, nfds_t(fds.count), timeout)
            if ready < 0 && errno != EINTR { usleep(10_000) }
            if fds[0].revents != 0 { wake.drain() }
            if fds[1].revents != 0 { snapshots.drain() }
            let now2 = BusClock.monotonicNanoseconds()
            // Each connection's turn, then the closed ones go.
            for i in connections.indices {
                let revents = fds[3 + i].revents
                step(&connections[i], revents: revents, now: now2, page: &page, s)
            }
            let closed = connections.filter { $0.fd < 0 }.count
            if closed > 0 {
                connections.removeAll { $0.fd < 0 }
                s.counters.update { $0.httpOpen = connections.count }
            }
            if fds[2].revents != 0 {
                if !accept(into: &connections, now: now2, s) {
                    acceptPausedUntil = now2 + MetricsHTTPServer.acceptPauseNanoseconds
                }
            }
        }
    }

    /// Accepts every pending connection: kept while fewer than ``maxConnections`` are open,
    /// otherwise answered 503 and closed at once.
    /// - Returns: false when the process is out of descriptors (`EMFILE`, `ENFILE`): the pending
    ///   ones stay in the backlog and accepting pauses for ``acceptPauseNanoseconds``.
    @discardableResult
    private func accept(into connections: inout [Connection], now: UInt64, _ s: Settings) -> Bool {
        var (accepted, refused, evicted, aborted) = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        defer {
            let open = connections.count
            s.counters.update {
                $0.httpAccepted += accepted
                $0.httpRefused += refused
                $0.httpEvicted += evicted
                $0.httpAborted += aborted
                $0.httpOpen = open
            }
        }
        // At most a backlog's worth per turn: clients that reconnect as fast as they are
        // answered must not keep this loop from the connections already open, or its clock still.
        for _ in 0..<MetricsHTTPServer.acceptsPerTurn {
            let fd = Glibc.accept(listenFD, nil, nil)
            if fd < 0 {
                if errno == EINTR { continue }
                if errno == ECONNABORTED {
                    // Taken from the backlog already reset by its client: counted as one accepted
                    // and aborted, as a connection whose client is gone by its first read.
                    accepted += 1
                    aborted += 1
                    continue
                }
                // EAGAIN: none left. EMFILE/ENFILE: the process is out of descriptors; the
                // pending ones stay in the backlog until some close.
                return !(errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
            }
            let flags = fcntl(fd, F_GETFL)
            guard flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0, fcntl(fd, F_SETFD, FD_CLOEXEC) == 0 else {
                Glibc.close(fd)
                refused += 1
                continue
            }
            // What the newcomer has already sent is read at once: a client that sent its whole
            // request with its connection is being answered, not idle, when room must be made.
            var c = Connection(fd: fd, acceptedAt: now, deadline: now + MetricsHTTPServer.requestTimeoutNanoseconds)
            read(&c, now: now, s)
            if c.fd < 0 {
                // Its client closed or reset it at once (counted as aborted).
                accepted += 1
                continue
            }
            if connections.count >= MetricsHTTPServer.maxConnections {
                // Connections whose clients have gone since the last turn make room first: read
                // what the reading ones sent (a gone one reads EOF and is closed, counted aborted).
                for i in connections.indices {
                    if case .reading = connections[i].phase { read(&connections[i], now: now, s) }
                }
                connections.removeAll { $0.fd < 0 }
            }
            if connections.count >= MetricsHTTPServer.maxConnections {
                // Full: a connection that has not sent a whole request makes room: the oldest one
                // open ``evictableAge`` or more, so idle, stalled or trickling connections cannot
                // lock health checks out (a real request head comes within milliseconds, so one in
                // two segments is not cut between them); else the oldest that has sent nothing at
                // all, so an idle flood cannot either. With neither, every connection is being
                // answered or is young and sending, and the newcomer is told 503: a clear answer,
                // never a reset.
                guard let oldest = MetricsHTTPServer.evictionCandidate(connections, now: now) else {
                    _ = MetricsHTTPServer.busy.withUnsafeBytes {
                        send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
                    }
                    Glibc.close(fd)
                    refused += 1
                    continue
                }
                Glibc.close(connections[oldest].fd)
                connections.remove(at: oldest)
                evicted += 1
            }
            connections.append(c)
            accepted += 1
        }
        return true
    }

    /// Connections accepted per turn of the loop at most.
    private static let acceptsPerTurn = 256

    /// How long a connection that has not sent a whole request must have been open before a
    /// newcomer may take its place (one that has sent nothing may be taken at any age).
    package static let evictableAge: UInt64 = 100_000_000

    /// The connection a newcomer to a full endpoint replaces, if any (see ``accept(into:now:_:)``).
    private static func evictionCandidate(_ connections: [Connection], now: UInt64) -> Int? {
        var aged: Int?
        var idle: Int?
        for (i, c) in connections.enumerated() {
            guard case .reading = c.phase else { continue }
            let older = { (j: Int?) in j.map { c.acceptedAt < connections[$0].acceptedAt } ?? true }
            if now &- c.acceptedAt >= evictableAge, older(aged) { aged = i }
            if c.request.isEmpty, older(idle) { idle = i }
        }
        return aged ?? idle
    }

    /// How long accepting pauses when the process is out of descriptors.
    package static let acceptPauseNanoseconds: UInt64 = 50_000_000

    private static let busy = response(status: "503 Service Unavailable", type: "text/plain",
                                       body: "too many connections\n", head: false)

    /// Moves one connection on after a poll; sets its `fd` to -1 once it is closed.
    /// The last `/metrics` answer rendered and the snapshot it shows (its `takenAt`): every request
    /// answered from that snapshot is sent the same bytes — one render, and one buffer however many
    /// connections take it (an array shared, never copied: a page lists every reported subscriber,
    /// up to a few MB, and 128 clients that never read held a copy each before).
    package struct RenderedPage {
        var takenAt: UInt64
        /// Rendered from the last snapshot because the pipeline did not answer in time.
        var stale: Bool
        var renderedAt: UInt64
        var get: [UInt8]
        var head: [UInt8]

        package init(takenAt: UInt64, stale: Bool, renderedAt: UInt64, get: [UInt8], head: [UInt8]) {
            (self.takenAt, self.stale, self.renderedAt, self.get, self.head) = (takenAt, stale, renderedAt, get, head)
        }

        /// Whether this page answers a request answered from the snapshot taken at `takenAt`:
        /// always when the pipeline answered (the same figures), for a second when it did not
        /// (`unanswered`: the last snapshot again, whose age moves on).
        package func serves(takenAt: UInt64, unanswered: Bool, now: UInt64) -> Bool {
            self.takenAt == takenAt && stale == unanswered && (!unanswered || now - min(now, renderedAt) < 1_000_000_000)
        }
    }

    private func step(_ c: inout Connection, revents: Int16, now: UInt64, page: inout RenderedPage?, _ s: Settings) {
        switch c.phase {
        case .reading:
            if revents != 0 { read(&c, now: now, s) }
        case .waiting(let path, let head, let generation, let since):
            let (snapshot, current) = s.exchange.latest
            let timedOut = now - since >= MetricsHTTPServer.snapshotWaitNanoseconds
            if current > generation || timedOut {
                answer(&c, path: path, head: head, snapshot: current > generation ? snapshot : nil,
                       stale: snapshot, now: now, page: &page, s)
            }
        case .writing:
            if revents != 0 { write(&c, now: now, s) }
        }
        if c.fd >= 0 && now >= c.deadline {
            close(&c)
            s.counters.update { $0.httpTimedOut += 1 }
        }
    }

    private func close(_ c: inout Connection) {
        Glibc.close(c.fd)
        c.fd = -1
    }

    private func read(_ c: inout Connection, now: UInt64, _ s: Settings) {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            // Never more than one byte past the limit is read, so a head too large is told so
            // whatever size the reads come in.
            let room = min(chunk.count, MetricsHTTPServer.maxRequestBytes + 1 - c.request.count)
            let n = chunk.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, room, Int32(MSG_DONTWAIT)) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
            if n <= 0 {
                // Closed or reset before a whole request head arrived.
                close(&c)
                s.counters.update { $0.httpAborted += 1 }
                return
            }
            c.request.append(contentsOf: chunk[0..<n])
            if let end = MetricsHTTPServer.headEnd(c.request), end <= MetricsHTTPServer.maxRequestBytes {
                route(&c, head: Array(c.request[..<end]), now: now, s)
                return
            }
            if c.request.count > MetricsHTTPServer.maxRequestBytes {
                respond(&c, status: "431 Request Header Fields Too Large", type: "text/plain", body: "request too large\n",
                        head: false, now: now, s)
                return
            }
        }
    }

    private func route(_ c: inout Connection, head requestHead: [UInt8], now: UInt64, _ s: Settings) {
        s.counters.update { $0.httpRequests += 1 }
        let line = requestHead.split(separator: 0x0A, maxSplits: 1).first.map { Array($0) } ?? []
        let parts = line.split(separator: 0x20)
        let method = parts.first.map { String(decoding: $0, as: UTF8.self) } ?? ""
        let target = parts.count > 1 ? String(decoding: parts[1], as: UTF8.self) : ""
        let path = target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? target
        let head = method == "HEAD"
        switch (method, path) {
        case ("GET", "/metrics"), ("HEAD", "/metrics"), ("GET", "/healthz"), ("HEAD", "/healthz"):
            let generation = s.exchange.latest.generation
            c.phase = .waiting(path: path, head: head, generation: generation, since: now)
            s.exchange.request()
        case ("GET", _), ("HEAD", _):
            respond(&c, status: "404 Not Found", type: "text/plain", body: "try /metrics or /healthz\n", head: head, now: now, s)
        default:
            respond(&c, status: "405 Method Not Allowed", type: "text/plain", body: "GET only\n", head: false, now: now, s)
        }
    }

    /// Answers a `/metrics` or `/healthz` request.
    /// - Parameters:
    ///   - snapshot: one the pipeline took after the request, or nil if it did not answer in time.
    ///   - stale: the latest snapshot whatever its age (what `/metrics` shows when `snapshot` is nil).
    ///   - page: the last `/metrics` page rendered, used again for the same snapshot.
    private func answer(_ c: inout Connection, path: String, head: Bool, snapshot: DaemonSnapshot?,
                        stale: DaemonSnapshot?, now: UInt64, page: inout RenderedPage?, _ s: Settings) {
        if path == "/healthz" {
            let status: String
            let code: String
            if let snapshot {
                status = snapshot.journalWritable ? "ok" : "journal_unwritable"
                code = snapshot.journalWritable ? "200 OK" : "503 Service Unavailable"
            } else {
                status = "pipeline_unresponsive"
                code = "503 Service Unavailable"
            }
            let shown = snapshot ?? stale
            var body = "{\"status\":\"\(status)\""
            if let shown {
                body += ",\"last_seq\":\(shown.lastSeq),\"durable_seq\":\(shown.durableSeq)"
                body += ",\"snapshot_age_ms\":\((now - min(now, shown.takenAt)) / 1_000_000)"
            }
            body += "}\n"
            respond(&c, status: code, type: "application/json", body: body, head: head, now: now, s)
            return
        }
        guard let shown = snapshot ?? stale else {
            respond(&c, status: "503 Service Unavailable", type: "text/plain", body: "the pipeline has not answered yet\n",
                    head: head, now: now, s)
            return
        }
        // Shared among the requests the pipeline answered with this snapshot (taken after they
        // arrived, so as fresh for each). A stale one — the pipeline did not answer — is shared for
        // a second at most, so its age, the uptime and the other threads' figures move on.
        let unanswered = snapshot == nil
        if page?.serves(takenAt: shown.takenAt, unanswered: unanswered, now: now) != true {
            let text = MetricsText.render(shown, subscribers: s.reports.entries(), figures: s.counters.figures,
                                          snapshotAge: now - min(now, shown.takenAt), upNanoseconds: now - s.startedAt)
            let type = "text/plain; version=0.0.4; charset=utf-8"
            page = RenderedPage(takenAt: shown.takenAt, stale: unanswered, renderedAt: now,
                                get: MetricsHTTPServer.response(status: "200 OK", type: type, body: text, head: false),
                                head: MetricsHTTPServer.response(status: "200 OK", type: type, body: text, head: true))
        }
        start(&c, answer: head ? page!.head : page!.get, now: now, s)
    }

    private func respond(_ c: inout Connection, status: String, type: String, body: String, head: Bool, now: UInt64,
                         _ s: Settings) {
        start(&c, answer: MetricsHTTPServer.response(status: status, type: type, body: body, head: head), now: now, s)
    }

    /// Starts writing `response` to `c`.
    private func start(_ c: inout Connection, answer response: [UInt8], now: UInt64, _ s: Settings) {
        c.response = response
        c.request = []
        c.phase = .writing(sent: 0)
        c.deadline = now + MetricsHTTPServer.responseTimeoutNanoseconds
        write(&c, now: now, s)
    }

    private func write(_ c: inout Connection, now: UInt64, _ s: Settings) {
        guard case .writing(var sent) = c.phase else { return }
        while sent < c.response.count {
            let n = c.response.withUnsafeBytes {
                send(c.fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                c.phase = .writing(sent: sent)
                return
            }
            if n <= 0 {
                // EPIPE, ECONNRESET: the client left; its answer is lost, nothing else.
                close(&c)
                s.counters.update { $0.httpAborted += 1 }
                return
            }
            sent += n
        }
        // Everything is with the kernel: it sends it and the FIN after it.
        close(&c)
    }

    package static func response(status: String, type: String, body: String, head: Bool) -> [UInt8] {
        let bytes = Array(body.utf8)
        let text = "HTTP/1.1 \(status)\r\nContent-Type: \(type)\r\nContent-Length: \(bytes.count)\r\nConnection: close\r\n\r\n"
        return Array(text.utf8) + (head ? [] : bytes)
    }

    /// The index just past the blank line that ends a request head, if it arrived.
    package static func headEnd(_ b: [UInt8]) -> Int? {
        guard b.count >= 2 else { return nil }
        for i in 1..<b.count where b[i] == 0x0A && (b[i - 1] == 0x0A || (i >= 2 && b[i - 1] == 0x0D && b[i - 2] == 0x0A)) {
            return i + 1
        }
        return nil
    }
}
