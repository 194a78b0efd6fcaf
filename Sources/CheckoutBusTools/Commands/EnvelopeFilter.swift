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

    /// The flags this filter reads, for a command's parser.
    package static let flags: Set<String> = ["checkout", "code", "platform", "sdk", "source"]

    package static let help = """
          --checkout ID        only envelopes of this checkout (lifecycle events, and dead letters that named it)
          --code CODE          only failures with this stable code (docs/error-codes.md)
          --platform NAME      only envelopes whose source.platform is NAME (ios, android, react_native, …)
          --sdk NAME           only envelopes whose source.sdk is NAME (shopify, primer)
          --source FORMAT      only envelopes whose source.format is FORMAT (\(RawFormat.labels.joined(separator: ", ")))
                               Each of these may be repeated (any value matches) and they combine with each
                               other and with --topic (all must match); applied on this side, to each envelope
        """

    package init() {}

    package init(_ args: CommandLineArguments) {
        checkoutIDs = args.all("checkout")
        codes = args.all("code")
        platforms = args.all("platform")
        sdks = args.all("sdk")
        sources = args.all("source")
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
