import CheckoutBusJSON
import CheckoutBusProtocol

/// One raw event after decoding, before the lifecycle rules. Refers into the pipeline's documents,
/// so it lives only while the message is being processed.
///
/// Not copyable: the decoder builds it and the processor borrows it, so its strings (an event id
/// is usually longer than a string stored inline) are never retained and released per copy.
public struct DecodedEvent: ~Copyable {
    public var kind: LifecycleKind
    public var format: RawFormat
    public var sdk: String
    public var platform: String?
    public var checkoutID: String?
    public var eventID: String?
    public var occurredAt: JSONRef?
    public var snapshot: JSONRef?
    public var payment: JSONRef?
    public var error: DecodedError?
    public var orderID: String?

    public init(kind: LifecycleKind, format: RawFormat, sdk: String) {
        self.kind = kind
        self.format = format
        self.sdk = sdk
    }
}
