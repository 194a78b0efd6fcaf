import Synchronization
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// What the threads that serve clients count: connections on each ZeroMQ socket (from libzmq's
/// socket monitor), the HTTP endpoint's connections and refusals, control replies dropped. Read by
/// `stats` and `/metrics`.
///
/// `Sendable`: one mutex around a value; each update is a connection or a request, never an event.
package final class ServiceCounters: Sendable {
    /// The ZeroMQ sockets a client connects to.
    package enum Socket: Int, CaseIterable, Sendable {
        case ingest, ingestAcked, publish, control
        var name: String {
            switch self {
            case .ingest: "ingest"
            case .ingestAcked: "ingest_acked"
            case .publish: "publish"
            case .control: "control"
            }
        }
    }

    package struct Figures: Sendable {
        /// Connections accepted, by ``Socket``.
        var accepted = [UInt64](repeating: 0, count: Socket.allCases.count)
        /// Connections ended, by ``Socket``: the peer left, or the daemon cut it (a message over
        /// the wire limit, a failed handshake, a handshake not finished in time).
        var disconnected = [UInt64](repeating: 0, count: Socket.allCases.count)
        /// CURVE handshakes refused or failed, by ``Socket``.
        var handshakesFailed = [UInt64](repeating: 0, count: Socket.allCases.count)
        /// Connections cut as they were accepted because the socket had its limit open
        /// (`--max-connections`, `--max-subscribers`),
        /// by ``Socket`` (each is also counted in `accepted` and, once gone, `disconnected`).
        var refused = [UInt64](repeating: 0, count: Socket.allCases.count)
        var httpAccepted: UInt64 = 0
        /// HTTP connections refused at once: ``MetricsHTTPServer/maxConnections`` were open and all
        /// being answered.
        var httpRefused: UInt64 = 0
        /// HTTP connections closed to make room for a newer one: the oldest open 100 ms or more
        /// without a whole request, else the oldest that sent nothing.
        var httpEvicted: UInt64 = 0
        /// HTTP connections closed for taking longer than the request or response timeout.
        var httpTimedOut: UInt64 = 0
        /// HTTP connections the client closed or reset before its answer was written.
        var httpAborted: UInt64 = 0
        var httpRequests: UInt64 = 0
        var httpOpen = 0
        var controlRequests: UInt64 = 0
        /// Control replies not sent: the client's queue was full (it does not read) or it left.
        var controlRepliesDropped: UInt64 = 0
        var replayPages: UInt64 = 0
        var replayRecords: UInt64 = 0
        var replayBytes: UInt64 = 0
        /// Bytes of replay pages queued in libzmq for the control clients (``QueuedReplies``).
        var replayBytesQueued = 0
        /// Replay requests answered `busy`: their client had its pages queued unread, or the
        /// pages queued held the replies' budget.
        var replayBusy: UInt64 = 0
    }

    private let state = Mutex(Figures())

    /// The replay pages queued for control clients, counted as libzmq gives them back.
    package let queuedReplies = QueuedReplies()

    package func update(_ body: (inout Figures) -> Void) { state.withLock { body(&$0) } }

    package var figures: Figures {
        var f = state.withLock { $0 }
        f.replayBytesQueued = queuedReplies.bytes
        f.replayBusy = queuedReplies.busy.load(ordering: .relaxed)
        return f
    }
}
