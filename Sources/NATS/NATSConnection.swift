#if canImport(Glibc)
import Glibc
#endif
import CNATS

/// One connection to a NATS server or cluster, reconnecting on its own.
///
/// The C client keeps the socket on threads of its own: reads, reconnects and callbacks happen
/// there. This object is the one owner of the `natsConnection`, closed and destroyed in `deinit`.
/// Not `Sendable`: create it and use it (and its ``JetStream`` contexts) on one thread.
package final class NATSConnection {
    /// How to connect. `Sendable`.
    package struct Options: Sendable {
        /// Server URLs (`nats://host:port`); the client picks among them and learns the rest of a
        /// cluster from the server.
        package var servers: [String]
        /// The connection's name, shown by the server's monitoring (`connz`).
        package var name: String
        /// Reconnect attempts per server after losing the connection; -1: forever.
        package var maxReconnect: Int32 = -1
        package var reconnectWaitMilliseconds: Int64 = 250
        /// How long one connect attempt may take.
        package var connectTimeoutMilliseconds: Int64 = 2000
        /// Bytes the client buffers for the server while reconnecting; beyond it a publish fails.
        package var reconnectBufferBytes: Int32 = 32 << 20

        package init(servers: [String], name: String) {
            self.servers = servers
            self.name = name
        }
    }

    /// What happened to the connection, for the caller's log. `Sendable`.
    package enum Event: Sendable, Equatable {
        case disconnected
        case reconnected(url: String)
        case closed
    }

    let handle: OpaquePointer

    /// Connects to one of `options.servers`.
    /// - Parameter onEvent: called on a client thread when the connection drops, comes back or closes.
    /// - Throws: ``NATSError`` when no server could be reached.
    package init(options: Options, onEvent: @escaping @Sendable (Event) -> Void = { _ in }) throws(NATSError) {
        var opts: OpaquePointer?
        try natsCall("natsOptions_Create") { natsOptions_Create(&opts) }
        defer { natsOptions_Destroy(opts) }
        let urls = options.servers.map { strdup($0) }
        defer { urls.forEach { free($0) } }
        var pointers = urls.map { UnsafePointer<CChar>($0) }
        try natsCall("natsOptions_SetServers") {
            pointers.withUnsafeMutableBufferPointer { natsOptions_SetServers(opts, $0.baseAddress, Int32($0.count)) }
        }
        try natsCall("natsOptions_SetName") { natsOptions_SetName(opts, options.name) }
        try natsCall("natsOptions_SetMaxReconnect") { natsOptions_SetMaxReconnect(opts, options.maxReconnect) }
        try natsCall("natsOptions_SetReconnectWait") { natsOptions_SetReconnectWait(opts, options.reconnectWaitMilliseconds) }
        try natsCall("natsOptions_SetTimeout") { natsOptions_SetTimeout(opts, options.connectTimeoutMilliseconds) }
        try natsCall("natsOptions_SetReconnectBufSize") { natsOptions_SetReconnectBufSize(opts, options.reconnectBufferBytes) }
        // Retained for good: the client may deliver the closed callback on its own thread after
        // `deinit` has destroyed the connection. One small object per connection.
        let closure = Unmanaged.passRetained(EventSink(onEvent)).toOpaque()
        try natsCall("natsOptions_SetDisconnectedCB") {
            natsOptions_SetDisconnectedCB(opts, { _, closure in
                guard let closure else { return }
                Unmanaged<EventSink>.fromOpaque(closure).takeUnretainedValue().handler(.disconnected)
            }, closure)
        }
        try natsCall("natsOptions_SetReconnectedCB") {
            natsOptions_SetReconnectedCB(opts, { nc, closure in
                guard let closure else { return }
                var buffer = [CChar](repeating: 0, count: 256)
                _ = natsConnection_GetConnectedUrl(nc, &buffer, buffer.count)
                let url = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                Unmanaged<EventSink>.fromOpaque(closure).takeUnretainedValue().handler(.reconnected(url: url))
            }, closure)
        }
        try natsCall("natsOptions_SetClosedCB") {
            natsOptions_SetClosedCB(opts, { _, closure in
                guard let closure else { return }
                Unmanaged<EventSink>.fromOpaque(closure).takeUnretainedValue().handler(.closed)
            }, closure)
        }
        var nc: OpaquePointer?
        let status = natsConnection_Connect(&nc, opts)
        guard status == NATS_OK, let nc else {
            // No connection was made, so no callback can come: the sink goes (the bridge retries
            // every second while NATS is down, and would otherwise keep one per attempt).
            Unmanaged<EventSink>.fromOpaque(closure).release()
            if status != NATS_OK { throw NATSError(status, "natsConnection_Connect") }
            throw NATSError(status: NATS_ERR.rawValue, function: "natsConnection_Connect", message: "no connection")
        }
        handle = nc
    }

    deinit {
        natsConnection_Close(handle)
        natsConnection_Destroy(handle)
    }

    /// The URL of the server currently connected to, or nil while reconnecting.
    package var connectedURL: String? {
        var buffer = [CChar](repeating: 0, count: 256)
        guard natsConnection_GetConnectedUrl(handle, &buffer, buffer.count) == NATS_OK, buffer[0] != 0 else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Sends everything buffered and waits for the server's answer to a PING.
    /// - Throws: ``NATSError`` on timeout or a closed connection.
    package func flush(timeoutMilliseconds: Int64 = 5000) throws(NATSError) {
        try natsCall("natsConnection_FlushTimeout") { natsConnection_FlushTimeout(handle, timeoutMilliseconds) }
    }
}

/// The connection callbacks' target, kept alive by the connection. `Sendable` (immutable).
final class EventSink: Sendable {
    let handler: @Sendable (NATSConnection.Event) -> Void
    init(_ handler: @escaping @Sendable (NATSConnection.Event) -> Void) { self.handler = handler }
}
