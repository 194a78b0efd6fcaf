import Foundation
import CheckoutBusProtocol

/// One envelope a ``Subscriber`` delivered: the raw bytes as published, the positions read from
/// them, and the typed fields on demand (``decode()``).
///
/// Hand it back to ``Subscriber/commit(_:)`` once its work is done. `Sendable` (a value).
public struct ReceivedEnvelope: Sendable {
    /// What the subscriber read from the envelope (seq, kind_seq, kind, topic, bytes, origin, shard).
    public let raw: BusEnvelope
    /// The position of its shard in the subscriber's endpoint list: which cursor a commit moves.
    let position: Int

    /// The topic, as published (`checkout.complete`, `checkout.fail.network_error`, …).
    public var topic: String { raw.topicString }
    /// The envelope JSON, byte for byte as published.
    public var bytes: [UInt8] { raw.bytes }
    /// The position in the publishing shard's journal.
    public var seq: Int64 { raw.seq }
    public var kindSeq: Int64 { raw.kindSeq }
    public var kind: JournaledKind { raw.kind }
    /// The shard that published it (0 on an unsharded bus).
    public var shard: Int { raw.shard }
    /// Live from the publish socket, or from the journal (catching up, filling a gap).
    public var origin: BusEnvelope.Origin { raw.origin }

    /// The envelope's fields, decoded with Foundation's `JSONDecoder` (opt-in, per envelope).
    /// - Throws: a `DecodingError` for bytes that are not an envelope.
    public func decode() throws -> Envelope {
        try JSONDecoder().decode(Envelope.self, from: Data(raw.bytes))
    }

    /// The envelope decoded as any `Decodable` type of the caller's (a subset of the fields, say).
    public func decode<T: Decodable>(as type: T.Type, using decoder: JSONDecoder = JSONDecoder()) throws -> T {
        try decoder.decode(type, from: Data(raw.bytes))
    }
}
