import CheckoutBusCore
import ZeroMQ
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// `checkoutbus forwarder`: the raw baseline — a ZeroMQ PULL→PUB forwarder doing no work
/// (`zmq_proxy`). `checkoutbus bench` runs it beside the daemon to measure the transport's ceiling.
/// Not `Sendable`; blocks the calling thread until killed.
public struct ForwarderCommand {
    public static let help = """
        checkoutbus forwarder — a raw ZeroMQ PULL→PUB forwarder (zmq_proxy), the benchmark's baseline.

        USAGE: checkoutbus forwarder [--ingest ENDPOINT] [--publish ENDPOINT] [--hwm N]

        Prints {"ready":true,"ingest":…,"publish":…} with the endpoints as bound, then forwards each
        message unchanged until killed.
        """

    package var ingest = "tcp://127.0.0.1:*"
    package var publish = "tcp://127.0.0.1:*"
    package var hwm: Int32 = 100_000

    public init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try CommandLineArguments(arguments, valued: ["ingest", "publish", "hwm"], switches: [])
        if let v = args.value("ingest") { ingest = v }
        if let v = args.value("publish") { publish = v }
        hwm = Int32(try args.int("hwm", default: 100_000, in: 0...100_000_000))
    }

    public func run() -> Int32 {
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
