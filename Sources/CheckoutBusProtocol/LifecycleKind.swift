import CheckoutBusJSON

/// The five lifecycle kinds every raw event is normalised into. `Sendable`.
public enum LifecycleKind: UInt8, Sendable, CaseIterable {
    case start, update, complete, fail, dismiss

    /// The kind's name in envelopes (`"kind"`) and topics.
    public var name: StaticString {
        switch self {
        case .start: "start"
        case .update: "update"
        case .complete: "complete"
        case .fail: "fail"
        case .dismiss: "dismiss"
        }
    }

    /// The topic an event of this kind is published on (failures append `.<code>`).
    public var topic: StaticString {
        switch self {
        case .start: "checkout.start"
        case .update: "checkout.update"
        case .complete: "checkout.complete"
        case .fail: "checkout.fail"
        case .dismiss: "checkout.dismiss"
        }
    }
}
