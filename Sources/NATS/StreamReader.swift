import CNATS

/// Reads a stream's messages in order, from a given stream sequence, through an ordered consumer.
///
/// An ordered consumer is ephemeral, unacknowledged and flow-controlled; the client recreates it
/// by itself if a message is missed, so the sequence of messages read has no holes. The reader
/// stops at the stream's last sequence as of ``init(jetStream:stream:from:headersOnly:)``.
///
/// Not `Sendable`: used on the connection's thread. The subscription is destroyed in `deinit`.
package final class StreamReader {
    /// Kept so the context and its connection outlive the subscription.
    private let jetStream: JetStream
    private let subscription: OpaquePointer
    /// The stream's last sequence when the reader was created: ``next(timeoutMilliseconds:)`` returns
    /// nil after it.
    package let lastSequence: UInt64
    private var done: Bool

    /// - Parameters:
    ///   - from: the first stream sequence to read (1: from the beginning).
    ///   - headersOnly: deliver headers only (and `Nats-Msg-Size`), not the payloads.
    /// - Throws: ``NATSError`` when the stream does not exist or the consumer cannot be created.
    package init(jetStream: JetStream, stream: String, from: UInt64, headersOnly: Bool = false) throws(NATSError) {
        guard let info = try jetStream.streamInfo(stream) else {
            throw NATSError(status: NATS_NOT_FOUND.rawValue, jetStreamCode: Int(JSStreamNotFoundErr.rawValue),
                            function: "js_GetStreamInfo", message: "no stream \(stream)")
        }
        self.jetStream = jetStream
        lastSequence = info.lastSequence
        done = info.messages == 0 || from > info.lastSequence
        var options = jsSubOptions()
        jsSubOptions_Init(&options)
        options.Ordered = true
        options.Config.DeliverPolicy = js_DeliverByStartSequence
        options.Config.OptStartSeq = max(1, from)
        options.Config.HeadersOnly = headersOnly
        var sub: OpaquePointer?
        var code = jsErrCode(rawValue: 0)
        let status = stream.withCString { name in
            options.Stream = name
            return js_SubscribeSync(&sub, jetStream.handle, ">", nil, &options, &code)
        }
        guard status == NATS_OK, let sub else { throw NATSError(status, "js_SubscribeSync", jetStreamCode: code) }
        subscription = sub
    }

    deinit {
        natsSubscription_Unsubscribe(subscription)
        natsSubscription_Destroy(subscription)
    }

    /// The next message, or nil once ``lastSequence`` was read.
    /// - Throws: ``NATSError`` (`NATS_TIMEOUT` when nothing arrives in time).
    package func next(timeoutMilliseconds: Int64 = 5000) throws(NATSError) -> StreamMessage? {
        if done { return nil }
        var msg: OpaquePointer?
        try natsCall("natsSubscription_NextMsg") { natsSubscription_NextMsg(&msg, subscription, timeoutMilliseconds) }
        guard let msg else { return nil }
        defer { natsMsg_Destroy(msg) }
        var meta: UnsafeMutablePointer<jsMsgMetaData>?
        try natsCall("natsMsg_GetMetaData") { natsMsg_GetMetaData(&meta, msg) }
        let sequence = meta?.pointee.Sequence.Stream ?? 0
        jsMsgMetaData_Destroy(meta)
        if sequence >= lastSequence { done = true }
        let length = Int(natsMsg_GetDataLength(msg))
        var payload = [UInt8](repeating: 0, count: length)
        if length > 0, let data = natsMsg_GetData(msg) {
            payload.withUnsafeMutableBytes { $0.copyMemory(from: UnsafeRawBufferPointer(start: data, count: length)) }
        }
        return StreamMessage(sequence: sequence, subject: natsMsg_GetSubject(msg).map { String(cString: $0) } ?? "",
                             messageID: JetStream.messageID(msg), payload: payload)
    }
}

/// One message read from a stream. `Sendable`.
package struct StreamMessage: Sendable {
    /// Its position in the stream.
    package var sequence: UInt64
    package var subject: String
    /// Its `Nats-Msg-Id` header.
    package var messageID: String?
    /// The payload (empty when read headers-only).
    package var payload: [UInt8]
}
