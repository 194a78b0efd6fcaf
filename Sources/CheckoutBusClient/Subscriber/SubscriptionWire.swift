import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// The subscription's messages as bytes: envelopes, heartbeats and control replies read with the
/// tape reader (no Foundation), and the control requests a ``SubscriptionSequencer`` asks for
/// written with ``JSONWriter``.
///
/// Not `Sendable`: it reuses one ``JSONDocument``; it lives on its subscriber's thread.
package final class SubscriptionWire {
    private let document = JSONDocument(maxDepth: EnvelopeLimits.maxDepth)
    package var logger: BusLogger

    package init(logger: BusLogger) { self.logger = logger }

    // MARK: Reading

    /// An envelope's positions read from its bytes; nil (logged) for an envelope without `seq` or
    /// `kind_seq`, or a topic that is no journaled kind's.
    package func envelope(topic: [UInt8], bytes: [UInt8], origin: BusEnvelope.Origin) -> BusEnvelope? {
        guard let kind = JournaledKind(topic: topic) else { return nil }
        let fields = bytes.withUnsafeBytes { buf -> LeadingPositions? in
            if let fields = LeadingPositions.read(buf) { return fields }
            do throws(JSONParseError) { try document.parse(buf) } catch { return nil }
            let root = document.root
            guard let seq = document.member(root, "seq").flatMap({ document.int64($0) }),
                let kindSeq = document.member(root, "kind_seq").flatMap({ document.int64($0) })
            else { return nil }
            let shard = document.member(root, "shard").flatMap { document.int64($0) } ?? 0
            return LeadingPositions(seq: seq, kindSeq: kindSeq, shard: Int(shard))
        }
        guard let fields else {
            logger.warning("envelope without seq or kind_seq; ignored", ["topic": String(decoding: topic, as: UTF8.self)])
            return nil
        }
        return BusEnvelope(seq: fields.seq, kindSeq: fields.kindSeq, kind: kind, topic: topic, bytes: bytes,
                           origin: origin, shard: fields.shard)
    }

    /// The envelopes of a `replay` reply's frames after the first (topic, envelope, topic, …).
    package func page(_ frames: ArraySlice<[UInt8]>) -> [BusEnvelope] {
        var page: [BusEnvelope] = []
        page.reserveCapacity(frames.count / 2)
        var i = frames.startIndex
        while i + 1 < frames.endIndex {
            if let envelope = envelope(topic: frames[i], bytes: frames[i + 1], origin: .journal) { page.append(envelope) }
            i += 2
        }
        return page
    }

    package func heartbeat(_ bytes: [UInt8]) -> SubscriptionSequencer.Heartbeat? {
        bytes.withUnsafeBytes { buf -> SubscriptionSequencer.Heartbeat? in
            do throws(JSONParseError) { try document.parse(buf) } catch { return nil }
            return HeartbeatWire.read(document)
        }
    }

    package func reply(_ bytes: [UInt8]) -> SubscriptionSequencer.Reply? {
        bytes.withUnsafeBytes { buf -> SubscriptionSequencer.Reply? in
            do throws(JSONParseError) { try document.parse(buf) } catch { return nil }
            return ControlReplyWire.read(document)
        }
    }

    // MARK: Writing

    package static func replayRequest(id: Int64, from: Int64, prefixes: [String], limit: Int) -> [UInt8] {
        ControlRequestWire.replay(from: from, prefixes: prefixes, limit: limit, req: id)
    }

    package static func identityRequest(id: Int64) -> [UInt8] {
        ControlRequestWire.stats(req: id)
    }

    package static func report(_ report: SubscriptionSequencer.Report, name: String) -> [UInt8] {
        ControlRequestWire.report(.init(subscriber: name, lastSeq: report.lastSeq, missed: report.missed, recovered: report.recovered,
                                        gaps: report.gaps, throughSeq: report.throughSeq, final: report.final,
                                        durable: report.durable, rejected: report.rejected), req: report.id)
    }
}
