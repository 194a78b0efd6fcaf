import CNATS

/// A failure reported by the NATS C client: the status, JetStream's error code when the server sent
/// one, the C function that failed, and the library's text. `Sendable`.
package struct NATSError: Error, CustomStringConvertible, Sendable {
    /// The `natsStatus` value (`NATS_TIMEOUT`, `NATS_NOT_FOUND`, …).
    package let status: UInt32
    /// JetStream's `err_code` (for example 10059, stream not found), or 0.
    package let jetStreamCode: Int
    /// The C function that returned the status.
    package let function: String
    package let message: String

    package init(status: UInt32, jetStreamCode: Int = 0, function: String, message: String) {
        self.status = status
        self.jetStreamCode = jetStreamCode
        self.function = function
        self.message = message
    }

    /// The error for a status just returned on this thread, with the library's last error text.
    init(_ status: natsStatus, _ function: String, jetStreamCode: jsErrCode = jsErrCode(rawValue: 0)) {
        var last = NATS_OK
        let detail = nats_GetLastError(&last).map { String(cString: $0) }
        let text = String(cString: natsStatus_GetText(status))
        self.init(status: status.rawValue, jetStreamCode: Int(jetStreamCode.rawValue), function: function,
                  message: detail.flatMap { $0.isEmpty ? nil : $0 } ?? text)
    }

    /// The operation timed out (no answer from the server in time).
    package var isTimeout: Bool { status == NATS_TIMEOUT.rawValue }

    /// The message is larger than the server's `max_payload`: it will be refused however often it
    /// is sent.
    package var isOverMaxPayload: Bool { status == NATS_MAX_PAYLOAD.rawValue }

    /// JetStream answered that the stream does not exist.
    package var isStreamNotFound: Bool { jetStreamCode == Int(JSStreamNotFoundErr.rawValue) }

    package var description: String {
        "\(function): \(message)" + (jetStreamCode != 0 ? " (jetstream error \(jetStreamCode))" : "")
    }
}

/// Calls a C function returning `natsStatus` and throws on anything but `NATS_OK`.
@inline(__always)
func natsCall(_ function: String, _ body: () -> natsStatus) throws(NATSError) {
    let status = body()
    guard status == NATS_OK else { throw NATSError(status, function) }
}
