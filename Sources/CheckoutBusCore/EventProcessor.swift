import CheckoutBusProtocol
import CheckoutBusJSON

/// The pure heart of the daemon: raw bytes in, `[topic][envelope]` out, with every rule applied.
///
/// Decodes (``RawEventDecoder``), applies the lifecycle rules (``CheckoutStateTable``), assigns
/// `seq` and `kind_seq`, and writes the envelope of `docs/envelope.md`. Input that cannot be used
/// becomes a `bus.deadletter` envelope instead; nothing is dropped and no input can make it trap.
/// Each call returns what it produced as a ``ProcessingResult``; nothing is left in fields for the
/// caller to read back afterwards.
///
/// Not `Sendable`: one processor per pipeline thread; it reuses its buffers message after message.
package final class EventProcessor {
    /// How the processor treats input; every field has a daemon flag.
    package struct Options: Sendable {
        /// Keep buyer and payment details (`--buyer-data full`) instead of redacting them.
        package var keepBuyerData = false
        /// Larger messages are dead-lettered as `oversized` (`--max-message-bytes`).
        package var maxMessageBytes = 1 << 20
        /// Most checkouts tracked at once (`--max-checkouts`).
        package var maxCheckouts = 1_000_000
        /// Seconds after which an idle checkout is forgotten (`--checkout-ttl`).
        package var checkoutTTLSeconds: UInt32 = 86_400
        /// Bytes of an unusable message kept in its dead letter.
        package var deadLetterRawLimit = 64 * 1024
        /// Event ids remembered to recognise a producer's retry; 0 (the default here): off. The daemon's
        /// default is set in `DaemonConfiguration.processor` (`--dedupe-window`).
        package var dedupeWindow = 0
        /// This daemon's shard (`--shard I/N`): events of checkouts another shard owns are
        /// dead-lettered as `wrong_shard`, and every envelope carries the index.
        package var shard = ShardMap.single
        package init() {}
    }

    /// What happened to one input.
    package enum Outcome: Equatable {
        case published(LifecycleKind)
        case suppressed
        case deadLettered(DeadLetterReason)
        /// The event's `event_id` was already taken: published under this seq (0: it was suppressed).
        case duplicate(UInt64)
        /// The event's `event_id` was dead-lettered before, under this seq and for this reason, and
        /// this input fails the same way: a retry of that dead letter, not published again.
        case duplicateDeadLetter(UInt64, DeadLetterReason)
    }

    /// Running counts, read by stats and metrics.
    package struct Counters: Sendable {
        package var received: UInt64 = 0
        package var receivedByFormat = [UInt64](repeating: 0, count: 4)
        package var publishedByKind = [UInt64](repeating: 0, count: LifecycleKind.allCases.count)
        package var suppressed: UInt64 = 0
        /// Retries recognised by `event_id` and not published again.
        package var duplicates: UInt64 = 0
        package var deadLettered: [String: UInt64] = [:]
        package var deadLetteredTotal: UInt64 = 0
        /// Published `fail` envelopes by their stable code (what `checkout.fail.<code>` carries), in
        /// `StableErrorCode.allCases` order (an array: no hashing on the hot path).
        package var failedByCode = [UInt64](repeating: 0, count: StableErrorCode.allCases.count)
        /// Terminal `fail` envelopes published with `repeat: true`: the same failure (code, raw
        /// code, message) reported again for a checkout; not in ``failedByCode``.
        package var repeatedFailures: UInt64 = 0
        /// Failures published as `unknown`, by raw code (`""` for none): the first
        /// ``EventProcessor/maxUnknownRawCodes`` raw codes since start, each at most
        /// ``EventProcessor/maxUnknownRawCodeBytes`` bytes; the others are summed in
        /// ``unknownRawCodesOther``. A new SDK error id shows here the day it appears.
        package var unknownRawCodes: [String: UInt64] = [:]
        package var unknownRawCodesOther: UInt64 = 0
    }

    /// Distinct raw codes of `unknown` failures counted apart (``Counters/unknownRawCodes``).
    package static let maxUnknownRawCodes = 64
    /// Longer raw codes are counted under their first this many bytes.
    package static let maxUnknownRawCodeBytes = 64

    package let options: Options
    /// Running counts (read by stats and metrics, not per event: each read builds the arrays).
    package var counters: Counters {
        var c = otherCounters
        c.receivedByFormat = Array(UnsafeBufferPointer(start: perEventCounts + EventProcessor.receivedByFormatAt,
                                                       count: EventProcessor.formatCount))
        c.publishedByKind = Array(UnsafeBufferPointer(start: perEventCounts + EventProcessor.publishedByKindAt,
                                                      count: EventProcessor.kindCount))
        return c
    }
    /// ``counters`` but for its per-format and per-kind counts, which live in ``perEventCounts``.
    private var otherCounters = Counters()
    /// The counts every event adds to, in one block of fixed size: received by format, published
    /// by kind, and each kind's `kind_seq` (``kindSeq``). A count in an array stored in the
    /// processor took a uniqueness check (a runtime call) each time it was added to.
    private let perEventCounts: UnsafeMutablePointer<UInt64> = {
        let p = UnsafeMutablePointer<UInt64>.allocate(capacity: EventProcessor.perEventCountsSize)
        p.initialize(repeating: 0, count: EventProcessor.perEventCountsSize)
        return p
    }()
    /// `RawFormat.allCases.count` (checked when a processor is made), as a constant: the offsets
    /// below stay literals in the per-event path.
    private static let formatCount = 4
    /// `LifecycleKind.allCases.count` (checked when a processor is made), as a constant.
    private static let kindCount = 5
    private static let receivedByFormatAt = 0
    private static let publishedByKindAt = formatCount
    private static let kindSeqAt = formatCount + kindCount
    private static let perEventCountsSize = formatCount + 2 * kindCount
    /// The last `seq` assigned (0 before the first).
    package private(set) var lastSeq: UInt64
    /// Each kind's last `kind_seq`, in `LifecycleKind.allCases` order.
    package var kindSeq: [UInt64] {
        Array(UnsafeBufferPointer(start: perEventCounts + EventProcessor.kindSeqAt, count: EventProcessor.kindCount))
    }
    package private(set) var deadLetterSeq: UInt64 = 0
    package private(set) var state: CheckoutStateTable

    /// The context ``process(_:receivedAt:now:timed:)`` prepares messages in (and ``restore(envelope:seq:rememberEventID:rebuildState:wallNow:now:)`` parses).
    private let ownContext = EventDecodeContext()
    private var document: JSONDocument { ownContext.document }
    /// For ``redactedHash(_:)``: a snapshot written redacted and parsed again.
    private var scratch = JSONWriter(capacity: 0)
    private let scratchDocument = JSONDocument()
    /// The monotonic time the last restored envelope was taken to arrive at.
    private var restoreClock: UInt32?
    /// Writes the envelopes; a ``ProcessingResult/publication``'s frames point into its buffers. A
    /// heartbeat's buffers are apart from an event's, so a heartbeat between processing an event
    /// and publishing it cannot overwrite it.
    private var envelopes: EnvelopeWriter

    /// Recent event ids, when ``Options/dedupeWindow`` is on.
    private var eventIDs: EventIDWindow?

    /// The last result's event id and (for a suppressed update) checkout id, copied from its
    /// message when they were read in place (``ProcessingResult/eventIdentifier``,
    /// ``ProcessingResult/suppressedCheckout``): no `String` is built unless the caller reads one.
    private let resultEventIDBytes = IdentifierText.Copy()
    private let resultCheckoutIDBytes = IdentifierText.Copy()

    deinit {
        perEventCounts.deallocate()
    }

    /// The event's id for its ``ProcessingResult``: its `String`, or its bytes copied into
    /// ``resultEventIDBytes`` (the message may be gone when the result is read).
    private func resultEventID(_ e: borrowing DecodedEvent) -> IdentifierText {
        resultEventIDBytes.keep(e.eventIdentifier)
    }

    package init(options: Options = Options(), startSeq: UInt64 = 0) {
        precondition(LifecycleKind.allCases.count == EventProcessor.kindCount
                     && LifecycleKind.allCases.allSatisfy { Int($0.rawValue) < EventProcessor.kindCount }
                     && RawFormat.allCases.count == EventProcessor.formatCount
                     && RawFormat.allCases.allSatisfy { Int($0.rawValue) < EventProcessor.formatCount })
        self.options = options
        self.lastSeq = startSeq
        self.envelopes = EnvelopeWriter(shard: options.shard, keepBuyerData: options.keepBuyerData)
        if options.dedupeWindow > 0 { eventIDs = EventIDWindow(capacity: options.dedupeWindow) }
        self.state = CheckoutStateTable(capacity: options.maxCheckouts, idleTTL: options.checkoutTTLSeconds)
        // The redaction prefilter's tables are built (and their one precondition checked) when a
        // processor is made, at start, not on the first message.
        _ = BuyerDataRedactor.screen
    }

    /// Continues numbering after a restart: `seq` and each kind's `kind_seq` (start, update,
    /// complete, fail, dismiss, then dead letters) as the journal last recorded them.
    package func restore(seq: UInt64, kindSeqs: [UInt64]) {
        lastSeq = seq
        let n = EventProcessor.kindCount
        for i in 0..<min(n, kindSeqs.count) { perEventCounts[EventProcessor.kindSeqAt + i] = kindSeqs[i] }
        if kindSeqs.count > n { deadLetterSeq = kindSeqs[n] }
    }

    /// Processes one raw message on this processor's own context: the prepare, then the commit
    /// (as ``prepare(_:options:eventIDWindow:in:timed:into:prefetch:)`` then
    /// ``commit(_:_:_:_:receivedAt:now:)``, without moving the decoded event between them).
    /// - Parameters:
    ///   - now: monotonic seconds, for the idle TTL.
    ///   - timed: time the message's stages (``ProcessingResult/stages``).
    /// - Returns: what the message produced. When it is published or dead-lettered, the result's
    ///   ``ProcessingResult/publication`` holds the message to journal and send, in buffers this
    ///   processor owns: valid until the next call of this method, ``commit(_:_:_:_:receivedAt:now:)``
    ///   or ``reject(_:_:_:receivedAt:)``.
    package func process(_ bytes: UnsafeRawBufferPointer, receivedAt: Timestamp, now: UInt32,
                        timed: Bool = false) -> ProcessingResult {
        // The state table's and the event-id window's slots are far apart in large tables (a
        // cache miss each): they start loading before the snapshot is hashed. A decoded event goes
        // straight from the prepare to the commit, not through an optional between them.
        let context = ownContext
        return EventProcessor.prepare(bytes, options: options, eventIDWindow: eventIDs != nil, in: context, timed: timed,
                                      prefetch: { key, idKey in
                                          state.prefetch(key)
                                          if let idKey { eventIDs!.prefetch(idKey) }
                                      },
                                      decoded: { event, keys, marks in
                                          otherCounters.received &+= 1
                                          return commit(event, keys, marks, context, receivedAt: receivedAt, now: now)
                                      },
                                      otherwise: { prepared, event in
                                          commit(bytes, context, prepared, event, receivedAt: receivedAt, now: now)
                                      })
    }

    /// The part of processing that needs nothing of a processor's state, so that several threads
    /// may run it on different messages at once (``EventDecodeContext``): the message is parsed,
    /// decoded, checked against the shard, its keys computed and its snapshot hashed.
    /// - Parameters:
    ///   - bytes: the message; it must stay valid until the commit.
    ///   - eventIDWindow: whether the processor keeps event ids (its window's key is computed).
    ///   - context: the buffers the message is parsed into; they must stay as they are until the commit.
    ///   - timed: note when each stage ends (the commit returns them as ``ProcessingResult/stages``).
    ///   - event: where the decoded event goes (it refers into `context`), to be committed with
    ///     what this returns; set to nil when the message did not decode.
    ///   - prefetch: called with the event's state-table and window keys before the snapshot is
    ///     hashed.
    /// - Returns: what the prepare found, for ``commit(_:_:_:_:receivedAt:now:)`` with `context`.
    @inline(__always)
    package static func prepare(_ bytes: UnsafeRawBufferPointer, options: Options, eventIDWindow: Bool,
                               in context: EventDecodeContext, timed: Bool = false,
                               into event: inout DecodedEvent?,
                               prefetch: (CheckoutStateTable.Key, (UInt64, UInt64)?) -> Void) -> PreparedEvent {
        prepare(bytes, options: options, eventIDWindow: eventIDWindow, in: context, timed: timed, prefetch: prefetch,
                decoded: { decoded, keys, marks in
                    event = consume decoded
                    return PreparedEvent(.decoded(keys), marks: marks)
                },
                otherwise: { prepared, decoded in
                    event = consume decoded
                    return prepared
                })
    }

    /// ``prepare(_:options:eventIDWindow:in:timed:into:prefetch:)`` handing its findings on:
    /// `decoded` gets an event decoded for this shard with its keys (and its marks, when timed);
    /// `otherwise` gets any other outcome, with the event when it decoded for another shard. The
    /// sequential path commits from `decoded` directly, so the event is not moved in and out of
    /// an optional on its way (a copy of the whole event each time).
    @inline(__always)
    static func prepare<Result>(_ bytes: UnsafeRawBufferPointer, options: Options, eventIDWindow: Bool,
                                in context: EventDecodeContext, timed: Bool,
                                prefetch: (CheckoutStateTable.Key, (UInt64, UInt64)?) -> Void,
                                decoded onDecoded: (consuming DecodedEvent, PreparedEvent.Keys, PreparedEvent.Marks?) -> Result,
                                otherwise: (PreparedEvent, consuming DecodedEvent?) -> Result) -> Result {
        let startedAt = timed ? StageTimes.now() : 0
        if bytes.count > options.maxMessageBytes { return otherwise(PreparedEvent(rejected: .oversized), nil) }
        let json = EventProcessor.withoutByteOrderMark(bytes)
        let document = context.document
        do {
            try document.parse(json)
        } catch {
            return otherwise(PreparedEvent(rejected: .parseFailed(EventProcessor.utf8First(error, json))), nil)
        }
        let decoded: DecodedEvent
        do {
            decoded = try context.decoder.decode(document)
        } catch {
            // The reply to an acknowledged producer names the event its wrapper gave, if any — not
            // one over the ids' limit, which would make the reply and the dead letter that long.
            let fits = { (id: String) in id.utf8.count <= DeadLetterReason.maxIDBytes ? id : nil }
            let eventID = (context.decoder.wrapperEventID
                ?? document.member(document.root, anyOf: "event_id", "eventId").flatMap { document.identifier($0) })
                .flatMap(fits)
            let checkoutID = document.member(document.root, anyOf: "checkout_id", "checkoutId")
                .flatMap { document.identifier($0) }.flatMap(fits)
            return otherwise(PreparedEvent(rejected: .decodeFailed(error, eventID: eventID, checkoutID: checkoutID)), nil)
        }
        let decodedAt = timed ? StageTimes.now() : 0
        if options.shard.count > 1,
            case let owner = ShardMap.owner(of: decoded.checkoutID!, count: options.shard.count), owner != options.shard.index
        {
            return otherwise(PreparedEvent(.wrongShard(owner: owner)), consume decoded)
        }
        let checkoutKey = decoded.checkoutKey()!  // the decoder guarantees one
        var idKey: (UInt64, UInt64)?
        if eventIDWindow { idKey = decoded.eventIDKey(checkout: checkoutKey) }
        prefetch(checkoutKey, idKey)
        var redactionsToken: Int?
        let hash = snapshotHash(decoded.snapshot, options: options, context, redactionsToken: &redactionsToken)
        let keys = PreparedEvent.Keys(checkoutKey: checkoutKey, idKey: idKey, hash: hash, redactionsToken: redactionsToken)
        guard timed else { return onDecoded(consume decoded, keys, nil) }
        return onDecoded(consume decoded, keys, PreparedEvent.Marks(started: startedAt, decoded: decodedAt, hashed: StageTimes.now()))
    }

    /// The part of processing that is sequential: counters, dead letters, the event-id window, the
    /// lifecycle rules, `seq` and `kind_seq`, the envelope. Messages must be committed in the order
    /// they arrived, each after its ``prepare(_:options:eventIDWindow:in:timed:into:prefetch:)``.
    /// - Parameters:
    ///   - bytes: the message `prepared` was prepared from, in `context`.
    /// - Returns: as ``process(_:receivedAt:now:timed:)``; a timed message that decoded carries its
    ///   ``ProcessingResult/stages``.
    package func commit(_ bytes: UnsafeRawBufferPointer, _ context: EventDecodeContext, _ prepared: PreparedEvent,
                       _ decoded: consuming DecodedEvent?, receivedAt: Timestamp, now: UInt32) -> ProcessingResult
    {
        otherCounters.received &+= 1
        switch prepared.outcome {
        case .decoded(let keys):
            // Moved out once (`take()!` moved it twice, a copy of the whole event each time).
            guard let event = consume decoded else { preconditionFailure("a decoded outcome without its event") }
            return commit(event, keys, prepared.marks, context, receivedAt: receivedAt, now: now)
        case .rejected:
            guard let rejection = prepared.rejection else { preconditionFailure("a rejected outcome without its reason") }
            switch rejection.reason {
            case .oversized:
                return deadLetter(.oversized, "message of \(bytes.count) bytes exceeds the limit of \(options.maxMessageBytes)",
                                  bytes, receivedAt, eventID: nil, context: context)
            case .parseFailed(let error):
                return deadLetter(DeadLetterReason(parseError: error), "\(error.reason.name) at byte \(error.offset)",
                                  bytes, receivedAt, eventID: nil, context: context)
            case .decodeFailed(let error, let eventID, let checkoutID):
                if let retry = deadLetterRetry(eventID, checkoutID: checkoutID, reason: error.reason) { return retry }
                return deadLetter(error.reason, error.detail, bytes, receivedAt, eventID: eventID, parsed: true,
                                  checkoutID: checkoutID, context: context)
            }
        case .wrongShard(let owner):
            guard let event = consume decoded else { preconditionFailure("a wrong-shard outcome without its event") }
            perEventCounts[EventProcessor.receivedByFormatAt + Int(event.format.rawValue)] &+= 1
            if let retry = deadLetterRetry(event.eventID, checkoutID: event.checkoutID, reason: .wrongShard) { return retry }
            return deadLetter(.wrongShard, "checkout \(event.checkoutID!) belongs to shard \(owner)/\(options.shard.count), not \(options.shard)",
                              bytes, receivedAt, eventID: event.eventID, parsed: true, checkoutID: event.checkoutID,
                              context: context)
        }
    }

    /// ``commit(_:_:_:_:receivedAt:now:)`` of a decoded event: the event-id window, the rules, the envelope.
    @inline(__always)
    private func commit(_ event: consuming DecodedEvent, _ keys: PreparedEvent.Keys, _ marks: PreparedEvent.Marks?,
                        _ context: EventDecodeContext, receivedAt: Timestamp, now: UInt32) -> ProcessingResult {
        perEventCounts[EventProcessor.receivedByFormatAt + Int(event.format.rawValue)] &+= 1
        let commitStart = marks != nil ? StageTimes.now() : 0
        var envelopeStart: UInt64 = 0
        var result: ProcessingResult
        if let idKey = keys.idKey, let original = eventIDs!.lookup(idKey) {
            otherCounters.duplicates &+= 1
            result = ProcessingResult(outcome: .duplicate(original), seq: lastSeq, eventID: resultEventID(event),
                                      suppressedCheckout: IdentifierText(), publication: nil)
        } else {
            result = apply(&event, keys.checkoutKey, snapshotHash: keys.hash, redactionsToken: keys.redactionsToken,
                           receivedAt: receivedAt, now: now, context: context, timed: marks != nil, envelopeStart: &envelopeStart)
            if let idKey = keys.idKey { eventIDs!.insert(idKey, seq: result.publication == nil ? 0 : result.seq) }
        }
        if let marks {
            // Rules are the snapshot's hash (in the prepare) and the commit up to the envelope.
            let end = StageTimes.now()
            let rulesEnd = envelopeStart == 0 ? end : envelopeStart
            result.stages = EventStages(decode: marks.decoded &- marks.started,
                                        rules: (marks.hashed &- marks.decoded) &+ (rulesEnd &- commitStart),
                                        envelope: end &- rulesEnd)
        }
        return result
    }

    /// The canonical hash of `snapshot` (0 without one). With buyer data redacted and compact
    /// input (the usual case), the same walk notes where the snapshot is redacted, so publishing
    /// it takes a few copies and no second walk (``BuyerDataRedactor/write(_:_:redactions:to:)``);
    /// a suppressed update pays only for the notes' checks.
    @inline(__always)
    private static func snapshotHash(_ snapshot: JSONRef?, options: Options, _ context: EventDecodeContext,
                                     redactionsToken: inout Int?) -> UInt64 {
        guard let snapshot else { return 0 }
        guard !options.keepBuyerData && snapshot.doc.isCompact else {
            return CanonicalHash.hash(snapshot.doc, snapshot.token)
        }
        redactionsToken = snapshot.token
        // Used without a retain and release: the event does not own its document (JSONRef.doc is
        // unowned); the decode context or the decoder's embedded documents keep it for this call.
        let token = snapshot.token
        return Unmanaged.passUnretained(snapshot.doc)._withUnsafeGuaranteedRef {
            CanonicalHash.hashNotingRedactions($0, token, into: &context.redactions)
        }
    }

    /// A byte that is not UTF-8 where JSON allows no such byte (`\xff\xfe` at the start, outside
    /// any string): the input is not UTF-8 (`invalid_utf8`) before it is not JSON. A valid UTF-8
    /// character there (`é`) is still `invalid_json`.
    static func utf8First(_ error: JSONParseError, _ json: UnsafeRawBufferPointer) -> JSONParseError {
        guard error.reason == .unexpectedCharacter, error.offset < json.count, json[error.offset] >= 0x80,
            let base = json.baseAddress?.assumingMemoryBound(to: UInt8.self),
            let bad = UTF8Validation.check(base, at: error.offset, count: json.count).invalidAt
        else { return error }
        return JSONParseError(.invalidUTF8, at: bad)
    }

    /// The key dead letters' event ids are kept under: their checkout's (when the input named one)
    /// and their reason's, apart from every checkout's own events — the checkout's key with
    /// constants folded into both words, not a string any checkout id could spell — so a corrected
    /// event under the same id (which decodes) is published as the event it always meant to be;
    /// apart from other checkouts' dead letters, so producers that number each checkout's events
    /// from 1 lose none of them; and one per reason, so a retry that fails each way it failed before
    /// is a duplicate of that dead letter, also after a restart.
    private static func deadLetterIDs(_ checkoutID: String?, _ reason: DeadLetterReason) -> CheckoutStateTable.Key {
        let key = CheckoutStateTable.key(checkoutID ?? "")
        let index = UInt64((DeadLetterReason.all.firstIndex(of: reason) ?? DeadLetterReason.all.count) + 1)
        return CheckoutStateTable.Key(lo: key.lo ^ 0xD1E5_7E77_3C0D_E5A1 ^ (index &* 0x9E37_79B9_7F4A_7C15),
                                      hi: key.hi ^ 0x5DEA_DBEE_F0DD_BA11)
    }
    /// The window's value for a dead letter: its seq, and its reason's index + 1 in the top byte.
    private static let deadLetterTagShift: UInt64 = 56

    /// A retry of a dead-lettered event: the input's event id, `id`, was dead-lettered before for
    /// the same checkout (or none) and the same reason. Failing a way it had not failed before, it
    /// is another dead letter (the producer changed something, and the new reason is what it needs
    /// to see).
    private func deadLetterRetry(_ id: String?, checkoutID: String?, reason: DeadLetterReason) -> ProcessingResult? {
        guard eventIDs != nil, let id,
            let value = eventIDs!.lookup(EventIDWindow.key(id, checkout: EventProcessor.deadLetterIDs(checkoutID, reason))),
            case let tag = Int(value >> EventProcessor.deadLetterTagShift), tag > 0, tag <= DeadLetterReason.all.count,
            DeadLetterReason.all[tag - 1] == reason
        else { return nil }
        otherCounters.duplicates &+= 1
        let original = value & ((1 << EventProcessor.deadLetterTagShift) - 1)
        return ProcessingResult(outcome: .duplicateDeadLetter(original, DeadLetterReason.all[tag - 1]), seq: lastSeq,
                                eventID: IdentifierText(string: id), suppressedCheckout: IdentifierText(),
                                publication: nil)
    }

    /// Remembers that event `id` of `checkoutID` (nil: the input named none) was dead-lettered
    /// under `seq` for `reason`.
    package func rememberDeadLetter(_ id: String, checkoutID: String?, seq: UInt64, reason: DeadLetterReason) {
        guard let index = DeadLetterReason.all.firstIndex(of: reason) else { return }
        eventIDs?.insert(EventIDWindow.key(id, checkout: EventProcessor.deadLetterIDs(checkoutID, reason)),
                         seq: seq | UInt64(index + 1) << EventProcessor.deadLetterTagShift)
    }

    /// Counts an `unknown` failure under its raw code (``Counters/unknownRawCodes``).
    private func countUnknown(rawCode: String?) {
        var key = rawCode ?? ""
        if key.utf8.count > EventProcessor.maxUnknownRawCodeBytes {
            key = String(decoding: key.utf8.prefix(EventProcessor.maxUnknownRawCodeBytes), as: UTF8.self)
        }
        if let n = otherCounters.unknownRawCodes[key] {
            otherCounters.unknownRawCodes[key] = n &+ 1
        } else if otherCounters.unknownRawCodes.count < EventProcessor.maxUnknownRawCodes {
            otherCounters.unknownRawCodes[key] = 1
        } else {
            otherCounters.unknownRawCodesOther &+= 1
        }
    }

    /// A failure's identity for repeat detection: FNV-1a over its code, raw code and message with
    /// a separator byte between them (stable across restarts, so a restored checkout compares the
    /// same way).
    static func failureHash(code: String, rawCode: String?, message: String?) -> UInt64 {
        var h: UInt64 = 0xCBF2_9CE4_8422_2325
        for (i, part) in [code, rawCode, message].enumerated() {
            h = (h ^ UInt64(part == nil ? 0xFE : 0xFF - i)) &* 0x0000_0100_0000_01B3
            for b in (part ?? "").utf8 { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01B3 }
        }
        return h
    }

    /// Remembers an event id of `checkoutID` published under `seq` (the daemon refills the window
    /// from the journal at start, so a retry after a restart is still recognised).
    package func rememberEventID(_ id: String, checkoutID: String, seq: UInt64) {
        eventIDs?.insert(EventIDWindow.key(id, checkout: CheckoutStateTable.key(checkoutID)), seq: seq)
    }

    /// The envelope members ``restore(envelope:seq:rememberEventID:rebuildState:wallNow:now:)`` reads.
    private static let envelopeNames = MemberNames(
        "checkout_id", "kind", "event_id", "received_at", "after_complete", "idempotency_key", "checkout")

    /// Rebuilds state from one envelope the journal holds, oldest first (the daemon replays its
    /// most recent records at start): the event id is remembered for retries (a dead letter's too), and the checkout's
    /// state is what publishing that envelope left — completed with its order's idempotency key,
    /// and the hash of its last published snapshot, so after a restart a repeated `complete`
    /// keeps its key and `repeat: true`, and an unchanged `update` is still suppressed.
    ///
    /// The journal holds snapshots as published: with buyer data redacted the restored hash is of
    /// the redacted form (``CheckoutStateTable/Flags/redactedHash``), and the checkout's next
    /// update is compared in that form once. Each envelope keeps its age (from its `received_at`);
    /// call ``finishRestore(now:)`` after the last one to forget checkouts idle past the TTL.
    /// - Parameters:
    ///   - remember: whether to remember the event id (the daemon does for the last `--dedupe-window` records).
    ///   - rebuildState: whether to rebuild the checkout's state (for the last `--restore-records`).
    ///   - wallNow: the wall-clock time now, to age the envelope by its `received_at`.
    ///   - now: monotonic seconds, as ``process(_:receivedAt:now:timed:)`` takes them.
    /// - Returns: whether the envelope was a lifecycle event this processor could read.
    @discardableResult
    package func restore(envelope bytes: UnsafeRawBufferPointer, seq: UInt64, rememberEventID remember: Bool = true,
                        rebuildState: Bool = true, wallNow: Timestamp, now: UInt32) -> Bool {
        let doc = document
        // An envelope is one level deeper than the raw event it was made from (EnvelopeLimits).
        let rawDepth = doc.maxDepth
        doc.maxDepth = EnvelopeLimits.maxDepth
        defer { doc.maxDepth = rawDepth }
        guard (try? doc.parse(bytes)) != nil, doc.kind(doc.root) == .object else { return false }
        // The envelope's members this needs, found in one pass (this runs for a million records at start).
        let m = doc.members(doc.root, EventProcessor.envelopeNames)
        let f = (checkoutID: m.at(0), kind: m.at(1), eventID: m.at(2), receivedAt: m.at(3), afterComplete: m.at(4),
                 key: m.at(5), checkout: m.at(6))
        if let k = f.kind, doc.stringEquals(k, "deadletter") {
            // A dead letter's event id: a retry that fails again is still a duplicate after a restart.
            guard remember, let t = f.eventID, let id = doc.string(t),
                let reason = doc.member(doc.root, "reason").flatMap({ doc.string($0) })
            else { return false }
            rememberDeadLetter(id, checkoutID: f.checkoutID.flatMap { doc.string($0) }, seq: seq,
                               reason: DeadLetterReason(reason))
            return true
        }
        guard let c = f.checkoutID, let checkoutID = doc.string(c), let k = f.kind,
            let kind = LifecycleKind.allCases.first(where: { doc.stringEquals(k, $0.name) })
        else { return false }
        if remember, let t = f.eventID, let id = doc.string(t) {
            rememberEventID(id, checkoutID: checkoutID, seq: seq)
        }
        guard rebuildState else { return true }
        var age: Int64 = 0
        if let r = f.receivedAt, doc.kind(r) == .string,
            case let quoted = doc.raw(r), let at = Timestamp(rfc3339: UnsafeRawBufferPointer(rebasing: quoted.dropFirst().dropLast()))
        {
            age = max(0, (wallNow.milliseconds - at.milliseconds) / 1000)
        }
        // Every envelope touches its checkout at the time it was received (never earlier than the
        // one before: a wall clock stepped back must not open a gap), so a checkout idle longer
        // than the TTL between two envelopes is reset just as it was live, and ``finishRestore(now:)``
        // forgets those idle too long before the restart.
        var at = now &- UInt32(clamping: age)
        if let last = restoreClock, Int32(bitPattern: at &- last) < 0 { at = last }
        restoreClock = at
        let (entry, _) = state.touch(CheckoutStateTable.key(checkoutID), now: at)
        // A complete leaves its key behind (a repeat carries the same one); a fail published after
        // a complete carries it too, should the complete be older than the replayed records.
        if kind == .complete || (kind == .fail && f.afterComplete.map { doc.kind($0) == .true } == true) {
            let key = f.key.flatMap { doc.string($0) } ?? checkoutID
            if state.completeKey(entry, checkoutID: checkoutID) != key { state.setCompleteKey(key, checkoutID: checkoutID, entry) }
        }
        // A terminal failure leaves its identity behind, so the same failure reported after a
        // restart is still a repeat; a start forgets it.
        if kind == .fail, let err = doc.member(doc.root, "error"), doc.kind(err) == .object,
            doc.member(err, "terminal").map({ doc.kind($0) == .true }) ?? false,
            let code = doc.member(err, "code").flatMap({ doc.string($0) })
        {
            let raw = doc.member(err, "raw_code").flatMap { doc.string($0) }
            let message = doc.member(err, "message").flatMap { doc.string($0) }
            state.setFailureHash(EventProcessor.failureHash(code: code, rawCode: raw, message: message), entry)
        } else if kind == .start {
            state.clearFailure(entry)
        }
        if kind != .fail, let s = f.checkout, doc.kind(s) != .null {
            let h = CanonicalHash.hash(doc, s)
            if options.keepBuyerData { state.setSnapshotHash(h, entry) } else { state.setRedactedSnapshotHash(h, entry) }
        }
        return true
    }

    /// Ends a restore: forgets checkouts idle longer than the TTL at `now`, and zeroes the table's
    /// eviction and expiry counts (they count live operation, not the replay).
    package func finishRestore(now: UInt32) {
        state.expire(now: now)
        state.clearCounts()
        restoreClock = nil
    }

    /// The canonical hash of `snapshot` as published with buyer data redacted: the slow path, taken
    /// only for a checkout whose state was rebuilt from the journal (``restore(envelope:seq:rememberEventID:rebuildState:wallNow:now:)``).
    private func redactedHash(_ snapshot: JSONRef) -> UInt64? {
        scratch.reset()
        BuyerDataRedactor.write(snapshot.doc, snapshot.token, to: &scratch)
        return scratch.withUnsafeBytes { b in
            (try? scratchDocument.parse(b)) != nil ? CanonicalHash.hash(scratchDocument, scratchDocument.root) : nil
        }
    }

    /// `bytes` without a UTF-8 byte order mark in front (some Windows and .NET producers write one):
    /// it is not part of the JSON. The daemon and `route` read a message alike through this.
    @inline(__always)
    package static func withoutByteOrderMark(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        bytes.count >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF
            ? UnsafeRawBufferPointer(rebasing: bytes[3...]) : bytes
    }

    /// Expires idle checkouts; call about once a second.
    package func tick(now: UInt32) { state.expire(now: now) }

    // MARK: Lifecycle rules

    /// - Parameters:
    ///   - checkoutKey: the event's checkout, hashed (``CheckoutStateTable/key(_:)``).
    ///   - hash: the canonical hash of the event's snapshot (0 without one).
    ///   - redactionsToken: the snapshot whose redactions `context` noted, if any.
    ///   - timed: note when the envelope's writing begins in `envelopeStart`.
    private func apply(_ event: inout DecodedEvent, _ checkoutKey: CheckoutStateTable.Key, snapshotHash hash: UInt64,
                       redactionsToken: Int?, receivedAt: Timestamp, now: UInt32, context: EventDecodeContext,
                       timed: Bool, envelopeStart: inout UInt64) -> ProcessingResult {
        let (entry, _) = state.touch(checkoutKey, now: now)
        let flags = state.flags(entry)
        // The operator's `--error-map` adds to and overrides the built-in table, by raw code, and
        // may say whether the failure is terminal (before the repeat rule below reads it).
        if event.kind == .fail, let raw = event.error?.rawCode, let mapped = ErrorMap.mapping(forRaw: raw, family: event.format) {
            event.error!.code = mapped.code
            if let terminal = mapped.terminal { event.error!.terminal = terminal }
        }

        var isRepeat = false
        var afterComplete = false
        switch event.kind {
        case .update:
            // (Tested, not bound: binding would copy the snapshot's reference, a retain and a release.)
            if event.snapshot != nil, flags.contains(.hasSnapshot) {
                let previous = state.snapshotHash(entry)
                if previous == hash || (flags.contains(.redactedHash) && previous == redactedHash(event.snapshot!)) {
                    // A match on the redacted form keeps this snapshot's own hash from now on.
                    if previous != hash { state.setSnapshotHash(hash, entry) }
                    otherCounters.suppressed &+= 1
                    let id = resultEventID(event)
                    let checkout = event.hasEventID
                        ? resultCheckoutIDBytes.keep(event.checkoutIdentifier) : IdentifierText()
                    return ProcessingResult(outcome: .suppressed, seq: lastSeq, eventID: id,
                                            suppressedCheckout: checkout, publication: nil)
                }
            }
        case .complete:
            isRepeat = flags.contains(.completed)
            if !isRepeat {
                // Remember the key this order is published under (its order id, else its checkout
                // id); every repeat reuses it. This envelope writes it from the event itself.
                event.withCheckoutIDBytes { id in
                    if event.hasOrderID {
                        event.orderIdentifier.withUTF8 { state.setCompleteKey($0, checkoutID: id, entry) }
                    } else {
                        state.setCompleteKey(id, checkoutID: id, entry)
                    }
                }
            }
        case .fail:
            afterComplete = flags.contains(.completed)
            // A terminal failure the same as the checkout's last one (code, raw code, message) is
            // that failure reported again: flagged, as a repeated complete is. A non-terminal one
            // (Primer's, before a retry) is an attempt of its own and never a repeat.
            if let err = event.error, err.terminal {
                let h = EventProcessor.failureHash(code: err.code.rawValue, rawCode: err.rawCode, message: err.message)
                isRepeat = state.failureHash(entry) == h
                if !isRepeat { state.setFailureHash(h, entry) }
            }
        case .start:
            // The buyer starts again: a failure like the last one is a new failure.
            state.clearFailure(entry)
        case .dismiss:
            break
        }
        if event.snapshot != nil && event.kind != .fail { state.setSnapshotHash(hash, entry) }
        // One key per placed order: the first complete's key, else this event's order id, else the
        // checkout (nil here: the writer writes the event's order id, else its checkout id as it is
        // in the message, without copying either). The first complete's key is that too; an event
        // after it has its key rebuilt from the packed one (``CompleteKeys``), a `String` built.
        let publication = state.flags(entry).contains(.completed) && (event.kind != .complete || isRepeat)
            ? writeEnvelope(event, idempotencyKey: event.withCheckoutIDBytes { state.completeKey(entry, checkoutID: $0) },
                            isRepeat: isRepeat,
                            afterComplete: afterComplete, receivedAt: receivedAt, context: context,
                            redactionsToken: redactionsToken, timed: timed, envelopeStart: &envelopeStart)
            : writeEnvelope(event, idempotencyKey: nil, isRepeat: isRepeat,
                            afterComplete: afterComplete, receivedAt: receivedAt, context: context,
                            redactionsToken: redactionsToken, timed: timed, envelopeStart: &envelopeStart)
        perEventCounts[EventProcessor.publishedByKindAt + Int(event.kind.rawValue)] &+= 1
        if event.kind == .fail, isRepeat {
            otherCounters.repeatedFailures &+= 1
        } else if event.kind == .fail, let code = event.error?.code, let i = StableErrorCode.allCases.firstIndex(of: code) {
            otherCounters.failedByCode[i] &+= 1
            if code == .unknown { countUnknown(rawCode: event.error?.rawCode) }
        }
        let id = resultEventID(event)
        return ProcessingResult(outcome: .published(event.kind), seq: publication.seq, eventID: id,
                                suppressedCheckout: IdentifierText(), publication: publication)
    }

    // MARK: Envelopes

    private func writeEnvelope(
        _ e: borrowing DecodedEvent, idempotencyKey: String?, isRepeat: Bool, afterComplete: Bool, receivedAt: Timestamp,
        context: EventDecodeContext, redactionsToken: Int?, timed: Bool, envelopeStart: inout UInt64
    ) -> ProcessingResult.Publication {
        if timed { envelopeStart = StageTimes.now() }
        lastSeq &+= 1
        let kindSeqSlot = perEventCounts + EventProcessor.kindSeqAt + Int(e.kind.rawValue)
        kindSeqSlot.pointee &+= 1
        let kindSeq = kindSeqSlot.pointee
        let snapshotToken = e.snapshot?.token
        let useRedactions = snapshotToken != nil && snapshotToken == redactionsToken
        let frames = envelopes.writeEvent(e, seq: lastSeq, kindSeq: kindSeq, idempotencyKey: idempotencyKey, isRepeat: isRepeat,
                                          afterComplete: afterComplete, receivedAt: receivedAt, redactions: context.redactions,
                                          useRedactions: useRedactions)
        return ProcessingResult.Publication(seq: lastSeq, kind: JournaledKind(e.kind), kindSeq: kindSeq,
                                            topic: frames.topic, envelope: frames.envelope)
    }

    /// Dead-letters a message the transport already knows is unusable (a multipart message, say).
    package func reject(_ reason: DeadLetterReason, _ detail: String, _ bytes: UnsafeRawBufferPointer,
                       receivedAt: Timestamp) -> ProcessingResult {
        otherCounters.received &+= 1
        return deadLetter(reason, detail, bytes, receivedAt, eventID: nil, context: ownContext)
    }

    /// - Parameter parsed: `context`'s document holds `bytes` parsed: with buyer data redacted, `raw` is
    ///   then the input as the redactor rewrites it.
    /// - Parameter eventID: the event id the input names, when it names one (the envelope shows it).
    /// - Parameter checkoutID: the checkout the input names, when it names one (the envelope shows it).
    private func deadLetter(
        _ reason: DeadLetterReason, _ detail: String, _ bytes: UnsafeRawBufferPointer, _ receivedAt: Timestamp,
        eventID: String?, parsed: Bool = false, checkoutID: String? = nil, context: EventDecodeContext
    ) -> ProcessingResult {
        let document = context.document
        var redacted = false
        if parsed && !options.keepBuyerData {
            scratch.reset()
            BuyerDataRedactor.writeDescendingIntoStrings(document, document.root, to: &scratch)
            redacted = scratch.withUnsafeBytes { !$0.elementsEqual(document.bytes) }
        }
        otherCounters.deadLettered[reason.code, default: 0] &+= 1
        otherCounters.deadLetteredTotal &+= 1
        lastSeq &+= 1
        deadLetterSeq &+= 1
        let frames = envelopes.writeDeadLetter(
            seq: lastSeq, kindSeq: deadLetterSeq, reason: reason, detail: detail, eventID: eventID, checkoutID: checkoutID,
            receivedAt: receivedAt, size: bytes.count, raw: redacted ? scratch.unsafeBytes : bytes,
            rawLimit: options.deadLetterRawLimit, redacted: redacted)
        if let id = eventID { rememberDeadLetter(id, checkoutID: checkoutID, seq: lastSeq, reason: reason) }
        let publication = ProcessingResult.Publication(seq: lastSeq, kind: .deadletter, kindSeq: deadLetterSeq,
                                                       topic: frames.topic, envelope: frames.envelope)
        return ProcessingResult(outcome: .deadLettered(reason), seq: lastSeq, eventID: IdentifierText(string: eventID),
                                suppressedCheckout: IdentifierText(),
                                publication: publication)
    }

    /// Writes a `bus.heartbeat`: the last `seq` and per-kind `kind_seq`, so an idle subscriber can
    /// tell it is behind.
    /// - Returns: its topic and envelope frames, in buffers of the heartbeat's own (an event's
    ///   ``ProcessingResult/publication`` is left as it was): valid until the next heartbeat.
    package func writeHeartbeat(at time: Timestamp) -> (topic: UnsafeRawBufferPointer, envelope: UnsafeRawBufferPointer) {
        envelopes.writeHeartbeat(at: time, seq: lastSeq, kindSeqs: kindSeqs, trackedCheckouts: state.count,
                                 counters: counters, evictedCheckouts: state.evicted, expiredCheckouts: state.expired,
                                 startedAt: startedAt, journal: journalID)
    }

    /// When this run of the daemon started (set by the daemon; heartbeats carry it as `started_at`):
    /// a subscriber that sees it change knows the daemon restarted and that a request it had in
    /// flight is lost with the old run.
    package var startedAt: Timestamp?

    /// The journal's identity (set by the daemon from `<data-dir>/journal-id`; heartbeats carry it as
    /// `journal_id`): a subscriber checks that its publish and control endpoints are one journal.
    package var journalID: String?

    /// Each kind's last `kind_seq`, dead letters last (as heartbeats and stats write them).
    package var kindSeqs: [UInt64] { kindSeq + [deadLetterSeq] }
}
