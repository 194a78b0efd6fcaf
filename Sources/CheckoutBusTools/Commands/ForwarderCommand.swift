import CheckoutBusCore
import ZeroMQ
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// `checkoutbus forwarder`: the raw baseline — a ZeroMQ PULL→PUB forwarder doing no work
/// (`zmq_proxy`). `checkoutbus bench` runs it beside the daemon to measure the transport's ceiling.
/// Not `Sendable`; blocks the calling thread until killed.
package struct ForwarderCommand {
    static let ingest = CommandOption("ingest", "ENDPOINT", help: "where producers push (PULL)", default: "tcp://127.0.0.1:*")
    static let publish = CommandOption("publish", "ENDPOINT", help: "where subscribers connect (PUB)", default: "tcp://127.0.0.1:*")
    static let hwm = CommandOption("hwm", "N", help: "both sockets' high-water mark", default: "100000")

    package static let spec = CommandSpec(
        "checkoutbus forwarder", summary: "a raw ZeroMQ PULL→PUB forwarder (zmq_proxy), the benchmark's baseline.",
        options: [ingest, publish, hwm],
        notes: """
            Prints {"ready":true,"ingest":…,"publish":…} with the endpoints as bound, then forwards each
            message unchanged until killed.
            """)
    package static var help: String { spec.help }

    package var ingest: String
    package var publish: String
    package var hwm: Int32

    package init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try Self.spec.parse(arguments)
        ingest = args.string(Self.ingest)
        publish = args.string(Self.publish)
        hwm = Int32(try args.int(Self.hwm, in: 0...100_000_000))
    }

    package func run() -> Int32 {
        do {
            let context = try ZMQContext()
            let pull = try ZMQSocket(context: context, type: .pull)
            let pub = try ZMQSocket(context: context, type: .pub)
            try pull.setOption(.receiveHighWaterMark, hwm)
            try pub.setOption(.sendHighWaterMark, hwm)
            try pull.bind(ingest)
            try pub.bind(publish)
            var w = JSONWriter(capacity: 128)
            w.append("{\"ready\":true,\"ingest\":")
            w.appendString(try pull.lastEndpoint)
            w.append(",\"publish\":")
            w.appendString(try pub.lastEndpoint)
            w.append("}\n")
            FileHandleWriter.standardOutput(String(decoding: w.bytes, as: UTF8.self))
            zmqProxy(frontend: pull, backend: pub)
            return 0
        } catch {
            FileHandleWriter.standardError("checkoutbus forwarder: \(error)\n")
            return 1
        }
    }
}
