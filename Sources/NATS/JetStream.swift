#if canImport(Glibc)
import Glibc
#endif
import CNATS
import Synchronization

/// A JetStream context on a ``NATSConnection``: stream management and publishing with acknowledgements.
///
/// Two ways to publish:
/// - ``publish(subject:payload:headers:timeoutMilliseconds:)`` waits for the stream's `PubAck`;
/// - ``publishAsync(subject:payload:headers:ackWaitMilliseconds:)`` returns at once; at most
///   ``Options/maxPending`` messages are in flight (a further publish waits up to
///   ``Options/stallWaitMilliseconds``), and ``waitForAcknowledgements(timeoutMilliseconds:)``
///   collects the outcome of everything published so far.
///
/// Not `Sendable`: used on the thread that owns the connection. Acknowledgements arrive on a client
/// thread and are recorded in a ``PublishTracker`` (atomic), which is all that thread touches.
package final class JetStream {
    /// Tuning. `Sendable`.
    package struct Options: Sendable {
        /// Asynchronous publishes awaiting their acknowledgement, at most.
        package var maxPending: Int64 = 4096
        /// How long an asynchronous publish waits for room when ``maxPending`` are in flight.
        package var stallWaitMilliseconds: Int64 = 5000
        /// How long a request to the JetStream API (stream info, add stream, a synchronous publish)
        /// waits for its answer.
        package var requestTimeoutMilliseconds: Int64 = 5000

        package init() {}
    }

    let connection: NATSConnection
    let handle: OpaquePointer
    /// Where acknowledgements are counted; shared with the client thread, released after the context.
    package let tracker: PublishTracker
    private let trackerPointer: UnsafeMutableRawPointer

    /// - Throws: ``NATSError`` when the context cannot be created.
    package init(connection: NATSConnection, options: Options = Options()) throws(NATSError) {
        self.connection = connection
        tracker = PublishTracker()
        trackerPointer = Unmanaged.passRetained(tracker).toOpaque()
        var o = jsOptions()
        jsOptions_Init(&o)
        o.Wait = options.requestTimeoutMilliseconds
        o.PublishAsync.MaxPending = options.maxPending
        o.PublishAsync.StallWait = options.stallWaitMilliseconds
        o.PublishAsync.AckHandlerClosure = trackerPointer
        o.PublishAsync.AckHandler = { _, msg, ack, failure, closure in
            defer { natsMsg_Destroy(msg) }
            guard let closure else { return }
            let tracker = Unmanaged<PublishTracker>.fromOpaque(closure).takeUnretainedValue()
            if let ack {
                tracker.recordAcknowledged(id: msg.flatMap(JetStream.messageID), duplicate: ack.pointee.Duplicate)
            } else {
                var text = failure.flatMap { $0.pointee.ErrText.map { String(cString: $0) } }
                if text == nil || text?.isEmpty == true, let failure {
                    text = String(cString: natsStatus_GetText(failure.pointee.Err))
                }
                tracker.recordFailure(PublishFailure(messageID: msg.flatMap(JetStream.messageID), reason: text ?? "unknown"))
            }
        }
        var js: OpaquePointer?
        let status = natsConnection_JetStream(&js, connection.handle, &o)
        guard status == NATS_OK, let js else {
            Unmanaged<PublishTracker>.fromOpaque(trackerPointer).release()
            throw NATSError(status, "natsConnection_JetStream")
        }
        handle = js
    }

    deinit {
        jsCtx_Destroy(handle)
        // The ack handler may still be running on the client thread for a message acknowledged just
        // now; the tracker is small, and kept for the life of the process rather than risk it.
        _ = trackerPointer
    }

    // MARK: Publishing

    /// Publishes one message and waits for the stream to store it.
    /// - Parameters:
    ///   - headers: message headers, for example `Nats-Msg-Id` for de-duplication.
    /// - Returns: the stream's acknowledgement.
    /// - Throws: ``NATSError``: no stream for the subject, a timeout, a rejected message.
    @discardableResult
    package func publish(subject: String, payload: [UInt8], headers: [(String, String)] = [],
                        timeoutMilliseconds: Int64? = nil) throws(NATSError) -> PublishAck {
        let msg = try Self.makeMessage(subject: subject, payload: payload, headers: headers)
        defer { natsMsg_Destroy(msg) }
        var opts = jsPubOptions()
        jsPubOptions_Init(&opts)
        if let timeoutMilliseconds { opts.MaxWait = timeoutMilliseconds }
        var ack: UnsafeMutablePointer<jsPubAck>?
        var code = jsErrCode(rawValue: 0)
        let status = js_PublishMsg(&ack, handle, msg, &opts, &code)
        guard status == NATS_OK, let ack else { throw NATSError(status, "js_PublishMsg", jetStreamCode: code) }
        defer { jsPubAck_Destroy(ack) }
        return PublishAck(stream: ack.pointee.Stream.map { String(cString: $0) } ?? "", sequence: ack.pointee.Sequence,
                          duplicate: ack.pointee.Duplicate)
    }

    /// Publishes one message without waiting; its outcome is recorded in ``tracker``.
    ///
    /// A message the stream did not acknowledge within `ackWaitMilliseconds` is recorded as a
    /// failure (it may still have been stored: republish it under the same `Nats-Msg-Id`).
    /// - Throws: ``NATSError`` when the message could not even be sent: a closed connection, or no
    ///   room in the window within the stall wait (`NATS_TIMEOUT`).
    package func publishAsync(subject: String, payload: [UInt8], headers: [(String, String)] = [],
                             ackWaitMilliseconds: Int64) throws(NATSError) {
        var msg: OpaquePointer? = try Self.makeMessage(subject: subject, payload: payload, headers: headers)
        defer { natsMsg_Destroy(msg) }
        var opts = jsPubOptions()
        jsPubOptions_Init(&opts)
        opts.MaxWait = ackWaitMilliseconds
        let status = js_PublishMsgAsync(handle, &msg, &opts)
        guard status == NATS_OK else { throw NATSError(status, "js_PublishMsgAsync") }
    }

    /// Waits until every asynchronous publish so far is acknowledged or failed.
    ///
    /// Messages still unanswered when the timeout passes are taken back from the client and
    /// returned as failures, so nothing is left in flight when this returns.
    /// - Returns: the failures (from the tracker and the unanswered), empty when all were stored.
    package func waitForAcknowledgements(timeoutMilliseconds: Int64) -> [PublishFailure] {
        var opts = jsPubOptions()
        jsPubOptions_Init(&opts)
        opts.MaxWait = timeoutMilliseconds
        let status = js_PublishAsyncComplete(handle, &opts)
        var failures = tracker.takeFailures()
        if status != NATS_OK {
            var list = natsMsgList()
            if js_PublishAsyncGetPendingList(&list, handle) == NATS_OK {
                for i in 0..<Int(list.Count) {
                    failures.append(PublishFailure(messageID: list.Msgs[i].flatMap(Self.messageID),
                                                   reason: "no acknowledgement within \(timeoutMilliseconds) ms"))
                }
                natsMsgList_Destroy(&list)
            }
            // Late answers for what was taken back are ignored by the client.
            failures += tracker.takeFailures()
        }
        return failures
    }

    static func makeMessage(subject: String, payload: [UInt8], headers: [(String, String)]) throws(NATSError) -> OpaquePointer {
        var msg: OpaquePointer?
        let status = payload.withUnsafeBytes { buf in
            natsMsg_Create(&msg, subject, nil, buf.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(buf.count))
        }
        guard status == NATS_OK, let msg else { throw NATSError(status, "natsMsg_Create") }
        for (key, value) in headers {
            let s = natsMsgHeader_Set(msg, key, value)
            guard s == NATS_OK else {
                natsMsg_Destroy(msg)
                throw NATSError(s, "natsMsgHeader_Set")
            }
        }
        return msg
    }

    static func messageID(_ msg: OpaquePointer) -> String? { header(msg, "Nats-Msg-Id") }

    static func header(_ msg: OpaquePointer, _ key: String) -> String? {
        var value: UnsafePointer<CChar>?
        guard natsMsgHeader_Get(msg, key, &value) == NATS_OK, let value else { return nil }
        return String(cString: value)
    }

    // MARK: Streams

    /// The stream's configuration and state, or nil when there is no such stream.
    /// - Throws: ``NATSError`` for anything but "not found".
    package func streamInfo(_ name: String) throws(NATSError) -> StreamInfo? {
        var info: UnsafeMutablePointer<jsStreamInfo>?
        var code = jsErrCode(rawValue: 0)
        let status = js_GetStreamInfo(&info, handle, name, nil, &code)
        if status == NATS_NOT_FOUND || code == JSStreamNotFoundErr { return nil }
        guard status == NATS_OK, let info else { throw NATSError(status, "js_GetStreamInfo", jetStreamCode: code) }
        defer { jsStreamInfo_Destroy(info) }
        return StreamInfo(info.pointee)
    }

    /// Creates a stream.
    /// - Throws: ``NATSError``, for example when a stream of that name exists with another config.
    @discardableResult
    package func addStream(_ config: StreamConfiguration) throws(NATSError) -> StreamInfo {
        var c = jsStreamConfig()
        jsStreamConfig_Init(&c)
        let name = strdup(config.name)
        let subjects: [UnsafePointer<CChar>?] = config.subjects.map { UnsafePointer(strdup($0)) }
        defer {
            free(name)
            subjects.forEach { free(UnsafeMutablePointer(mutating: $0)) }
        }
        c.Name = UnsafePointer(name)
        c.Storage = config.storage == .file ? js_FileStorage : js_MemoryStorage
        c.Retention = switch config.retention {
        case .limits: js_LimitsPolicy
        case .interest: js_InterestPolicy
        case .workQueue: js_WorkQueuePolicy
        }
        c.Discard = config.discard == .old ? js_DiscardOld : js_DiscardNew
        c.Replicas = Int64(config.replicas)
        c.MaxAge = config.maxAgeNanoseconds
        c.MaxBytes = config.maxBytes
        c.MaxMsgs = config.maxMessages
        c.MaxMsgSize = config.maxMessageSize
        c.Duplicates = config.duplicateWindowNanoseconds
        var info: UnsafeMutablePointer<jsStreamInfo>?
        var code = jsErrCode(rawValue: 0)
        var subjectPointers = subjects
        let status = subjectPointers.withUnsafeMutableBufferPointer { buf -> natsStatus in
            c.Subjects = buf.baseAddress
            c.SubjectsLen = Int32(buf.count)
            return js_AddStream(&info, handle, &c, nil, &code)
        }
        guard status == NATS_OK, let info else { throw NATSError(status, "js_AddStream", jetStreamCode: code) }
        defer { jsStreamInfo_Destroy(info) }
        return StreamInfo(info.pointee)
    }

    /// Deletes a stream and everything in it.
    package func deleteStream(_ name: String) throws(NATSError) {
        var code = jsErrCode(rawValue: 0)
        let status = js_DeleteStream(handle, name, nil, &code)
        guard status == NATS_OK else { throw NATSError(status, "js_DeleteStream", jetStreamCode: code) }
    }
}

/// The stream's answer to a stored message. `Sendable`.
package struct PublishAck: Sendable, Equatable {
    package var stream: String
    /// The message's position in the stream.
    package var sequence: UInt64
    /// The stream already had a message with this `Nats-Msg-Id` within its duplicate window and
    /// did not store this one again.
    package var duplicate: Bool
}

/// An asynchronous publish that was not acknowledged. `Sendable`.
package struct PublishFailure: Sendable, Equatable {
    /// The message's `Nats-Msg-Id` header, when it had one.
    package var messageID: String?
    package var reason: String
}

/// Counts acknowledgements of asynchronous publishes and keeps the failures until taken.
///
/// `Sendable`: written by the client's thread, read by the publisher's, under a mutex.
package final class PublishTracker: Sendable {
    struct State {
        var acknowledged = 0
        var duplicates = 0
        var failures: [PublishFailure] = []
        /// The `Nats-Msg-Id`s acknowledged since the last ``takeAcknowledgedIDs()``.
        var acknowledgedIDs: [String] = []
    }

    private let state = Mutex(State())

    /// Messages the stream stored (or recognised as duplicates) since the tracker was created.
    package var acknowledged: Int { state.withLock { $0.acknowledged } }
    /// Of those, duplicates the stream did not store again.
    package var duplicates: Int { state.withLock { $0.duplicates } }

    func recordAcknowledged(id: String?, duplicate: Bool) {
        state.withLock {
            $0.acknowledged += 1
            if duplicate { $0.duplicates += 1 }
            if let id { $0.acknowledgedIDs.append(id) }
        }
    }

    /// The `Nats-Msg-Id`s of the messages the stream acknowledged (stored, or recognised as
    /// duplicates of stored ones) since the last call: the only proof a message is in the stream.
    package func takeAcknowledgedIDs() -> [String] {
        state.withLock {
            let taken = $0.acknowledgedIDs
            $0.acknowledgedIDs = []
            return taken
        }
    }

    func recordFailure(_ failure: PublishFailure) { state.withLock { $0.failures.append(failure) } }

    func takeFailures() -> [PublishFailure] {
        state.withLock {
            let taken = $0.failures
            $0.failures = []
            return taken
        }
    }
}
