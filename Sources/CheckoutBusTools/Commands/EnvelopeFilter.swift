import CheckoutBusJSON
import CheckoutBusProtocol
import CheckoutBusRuntime

/// The field filters of `checkoutbus tail` (`--checkout`, `--code`, `--platform`, `--sdk`,
/// `--source`), applied on the client to each envelope after the topic prefixes the daemon applied.
///
/// Each flag may be repeated: an envelope passes a flag when one of its values matches, and passes
/// the filter when it passes every flag given. A flag whose field an envelope lacks excludes it: a
/// dead letter has no `source`, only a `fail` has `error.code`. A dead letter passes `--checkout`
/// when it named that checkout. Heartbeats always pass (tail prints them only when their topic is
/// asked for). `Sendable` value; no thread of its own.
package struct EnvelopeFilter: Sendable, Equatable {
    /// `checkout_id` equal to one of these.
    package var checkoutIDs: [String] = []
    /// `error.code` (the stable code) equal to one of these.
    package var codes: [String] = []
    /// `source.platform` equal to one of these.
    package var platforms: [String] = []
    /// `source.sdk` equal to one of these.
    package var sdks: [String] = []
    /// `source.format` (the raw family) equal to one of these.
    package var sources: [String] = []

    static let checkout = CommandOption(
        "checkout", "ID", help: "only envelopes of this checkout (lifecycle events, and dead letters that named it)", repeatable: true)
    static let code = CommandOption("code", "CODE", help: "only failures with this stable code (docs/error-codes.md)", repeatable: true)
    static let platform = CommandOption(
        "platform", "NAME", help: "only envelopes whose source.platform is NAME (ios, android, react_native, …)", repeatable: true)
    static let sdk = CommandOption("sdk", "NAME", help: "only envelopes whose source.sdk is NAME (shopify, primer)", repeatable: true)
    static let source = CommandOption(
        "source", "FORMAT",
        help: "only envelopes whose source.format is FORMAT (\(RawFormat.labels.joined(separator: ", ")))", repeatable: true)

    /// The flags this filter reads, under their heading in a command's `--help`.
    package static let options = CommandSpec.Group(
        "Filters (each may be repeated: any value matches; they combine with each other and with --topic: all must "
            + "match; applied on this side, to each envelope):",
        [checkout, code, platform, sdk, source])

    package init() {}

    package init(_ args: CommandLineArguments) {
        checkoutIDs = args.all(Self.checkout)
        codes = args.all(Self.code)
        platforms = args.all(Self.platform)
        sdks = args.all(Self.sdk)
        sources = args.all(Self.source)
    }

    /// True when no flag is given: every envelope passes.
    package var isEmpty: Bool {
        checkoutIDs.isEmpty && codes.isEmpty && platforms.isEmpty && sdks.isEmpty && sources.isEmpty
    }

    /// Whether the envelope passes; `doc` is scratch space, reused across calls.
    package func matches(topic: [UInt8], envelope: [UInt8], doc: JSONDocument) -> Bool {
        if isEmpty || topic.elementsEqual("bus.heartbeat".utf8) { return true }
        return envelope.withUnsafeBytes { buf -> Bool in
            do throws(JSONParseError) { try doc.parse(buf) } catch { return false }
            let root = doc.root
            guard doc.kind(root) == .object else { return false }
            func passes(_ wanted: [String], _ token: Int?) -> Bool {
                if wanted.isEmpty { return true }
                guard let token, doc.kind(token) == .string, let value = doc.string(token) else { return false }
                return wanted.contains(value)
            }
            let source = doc.object(root, "source")
            let error = doc.object(root, "error")
            return passes(checkoutIDs, doc.member(root, "checkout_id"))
                && passes(codes, error.flatMap { doc.member($0, "code") })
                && passes(platforms, source.flatMap { doc.member($0, "platform") })
                && passes(sdks, source.flatMap { doc.member($0, "sdk") })
                && passes(sources, source.flatMap { doc.member($0, "format") })
        }
    }
}
