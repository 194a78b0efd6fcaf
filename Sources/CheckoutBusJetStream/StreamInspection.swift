#if canImport(Glibc)
import Glibc
#endif
import NATS
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// `checkoutbus-jetstream verify` and `dump`: read a stream back and report on it.
///
/// Not `Sendable`; runs on the calling thread.
package struct StreamInspection {
    static let from = CommandOption("from", "SEQ", help: "dump: the first stream sequence to print", default: "1")
    static let wait = CommandOption(
        "wait", "DURATION",
        help: "a read that times out (a cluster that has just lost a node may place the reading consumer on the lost "
            + "node until it notices the loss) is tried again, a second apart, for up to this long; dump tries again "
            + "only while opening the stream, before it reads a message", default: "2m")

    package static let spec = CommandSpec(
        "checkoutbus-jetstream", summary: "read a stream back: verify its ids, or dump its messages.",
        operands: "verify | dump",
        operandHelp: [
            .init("verify", "print one JSON object: the stream's message count, how many distinct Nats-Msg-Id values "
                  + "it holds, how many messages repeat an id, and per shard the count, lowest and highest seq and how "
                  + "many seqs between them are missing. Exit 0 when no id repeats"),
            .init("dump", "print each message as a JSON line: stream_seq, subject, id, envelope"),
        ],
        options: [BridgeOptions.nats, BridgeOptions.streamOption, from, wait])
    package static var help: String { spec.help }

    let servers: [String]
    let stream: String
    let from: UInt64
    /// How long timed-out reads are tried again, in nanoseconds.
    let waitNanoseconds: Int64

    package init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try Self.spec.parse(arguments)
        servers = try BridgeOptions.list(args.string(BridgeOptions.nats), flag: BridgeOptions.nats.name)
        stream = args.string(BridgeOptions.streamOption)
        from = UInt64(try args.int(Self.from, in: 1...Int.max))
        waitNanoseconds = try BridgeOptions.duration(args.string(Self.wait), flag: Self.wait.name)
    }

    private func open() throws -> JetStream {
        var options = NATSConnection.Options(servers: servers, name: "checkoutbus-jetstream-inspect")
        options.maxReconnect = 10
        return try JetStream(connection: NATSConnection(options: options))
    }

    /// Runs `read` again, a second apart, while it times out and `--wait` has not passed.
    ///
    /// An ordered consumer is R1 and placed on one of the stream's peers at random; a cluster that
    /// has just lost a node by `kill -9` goes on choosing that node until it notices the loss, and
    /// such a consumer never answers. Each new try is a new placement.
    private func retryingTimeouts<T>(_ read: () throws -> T) throws -> T {
        let deadline = BusClock.monotonicNanoseconds() + UInt64(waitNanoseconds)
        while true {
            do { return try read() } catch let error as NATSError where error.isTimeout && BusClock.monotonicNanoseconds() < deadline {
                FileHandleWriter.standardError("checkoutbus-jetstream: \(error); trying again\n")
                sleep(1)
            }
        }
    }

    /// Counts messages and ids; returns the exit status.
    package func verify() throws -> Int32 { try retryingTimeouts(verifyOnce) }

    private func verifyOnce() throws -> Int32 {
        let js = try open()
        let reader = try StreamReader(jetStream: js, stream: stream, from: from, headersOnly: true)
        var ids = Set<String>()
        var messages = 0
        var repeated = 0
        var withoutID = 0
        var shards: [Int: (count: Int, low: Int64, high: Int64)] = [:]
        while let message = try reader.next() {
            messages += 1
            guard let id = message.messageID else {
                withoutID += 1
                continue
            }
            guard ids.insert(id).inserted else {
                repeated += 1
                continue
            }
            if let (shard, seq) = BridgeSubject.parseID(id) {
                let s = shards[shard] ?? (0, Int64.max, Int64.min)
                shards[shard] = (s.count + 1, min(s.low, seq), max(s.high, seq))
            }
        }
        let perShard = shards.keys.sorted().map { shard -> String in
            let s = shards[shard]!
            return "\"\(shard)\":{\"count\":\(s.count),\"min_seq\":\(s.low),\"max_seq\":\(s.high),\"missing\":\(s.high - s.low + 1 - Int64(s.count))}"
        }
        FileHandleWriter.standardOutput(
            "{\"stream\":\"\(stream)\",\"messages\":\(messages),\"unique_ids\":\(ids.count),\"repeated_ids\":\(repeated),"
                + "\"without_id\":\(withoutID),\"last_stream_seq\":\(reader.lastSequence),\"shards\":{\(perShard.joined(separator: ","))}}\n")
        return repeated == 0 && withoutID == 0 ? 0 : 1
    }

    /// Prints every message as a JSON line.
    package func dump() throws -> Int32 {
        let reader = try retryingTimeouts { try StreamReader(jetStream: open(), stream: stream, from: from) }
        while let message = try reader.next() {
            var line = Array("{\"stream_seq\":\(message.sequence),\"subject\":\"\(message.subject)\",\"id\":".utf8)
            line += Array((message.messageID.map { "\"\($0)\"" } ?? "null").utf8)
            line += Array(",\"envelope\":".utf8)
            line += message.payload.isEmpty ? Array("null".utf8) : message.payload
            line += Array("}\n".utf8)
            FileHandleWriter.writeAll(1, &line)
        }
        return 0
    }
}
