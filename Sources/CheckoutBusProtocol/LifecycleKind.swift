import CheckoutBusJSON

/// The five lifecycle kinds every raw event is normalised into. `Sendable`.
///
/// Their names and topics are ``JournaledKind``'s, where the kinds are defined once.
public enum LifecycleKind: UInt8, Sendable, CaseIterable {
    case start, update, complete, fail, dismiss

    /// The kind's name in envelopes (`"kind"`) and topics.
    @inlinable
    public var name: StaticString { JournaledKind(self).staticName }

    /// The topic an event of this kind is published on (failures append `.<code>`).
    @inlinable
    public var topic: StaticString { JournaledKind(self).topic }
}
