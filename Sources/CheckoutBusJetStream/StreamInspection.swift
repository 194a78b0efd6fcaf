#if canImport(Glibc)
import Glibc
#endif
import CheckoutBus
import NATS

/// `checkoutbus-jetstream verify` and `dump`: read a stream back and report on it.
///
/// Not `Sendable`; runs on the calling thread.
public struct StreamInspection {
    public static let help = """
        usage: checkoutbus-jetstream verify --nats URLS --stream NAME
               checkoutbus-jetstream dump --nats URLS --stream NAME [--from SEQ]

        verify prints one JSON object: the stream's message count, how many distinct Nats-Msg-Id
        values it holds, how many messages repeat an id, and per shard the count, lowest and
        highest seq and how many seqs between them are missing. Exit 0 when no id repeats.
        dump prints each message as a JSON line: stream_seq, subject, id, envelope.
        """

    let servers: [String]
    let stream: String
    let from: UInt64

    public init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try CommandLineArguments(arguments, valued: ["nats", "stream", "from"], switches: [])
        servers = try BridgeOptions.list(args.value("nats") ?? "nats://127.0.0.1:4222", flag: "nats")
        stream = args.value("stream") ?? "CHECKOUTS"
        from = UInt64(try args.int("from", default: 1, in: 1...Int.max))
    }

    private func open() throws -> JetStream {
        var options = NATSConnection.Options(servers: servers, name: "checkoutbus-jetstream-inspect")
        options.maxReconnect = 10
        return try JetStream(connection: NATSConnection(options: options))
    }

    /// Runs `read` again (up to five times, a second apart) when it times out: a cluster that just
    /// lost a node answers consumer requests only once it has elected new leaders.
    private func retryingTimeouts<T>(_ read: () throws -> T) throws -> T {
        var attempt = 0
        while true {
            attempt += 1
            do { return try read() } catch let error as NATSError where error.isTimeout && attempt < 5 {
                FileHandleWriter.standardError("checkoutbus-jetstream: \(error); trying again\n")
                sleep(1)
            }
        }
    }

    /// Counts messages and ids; returns the exit status.
    public func verify() throws -> Int32 { try retryingTimeouts(verifyOnce) }

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
    public func dump() throws -> Int32 {
        let js = try open()
        let reader = try StreamReader(jetStream: js, stream: stream, from: from)
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
