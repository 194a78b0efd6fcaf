import CheckoutBusClient

// checkoutbusd's default endpoints, or `async-subscriber PUBLISH CONTROL CURSOR-FILE`.
let given = Array(CommandLine.arguments.dropFirst())
func argument(_ i: Int, else fallback: String) -> String { i < given.count ? given[i] : fallback }
var options = BusSubscriber.Options(publish: argument(0, else: "tcp://127.0.0.1:7702"),
                                    control: argument(1, else: "tcp://127.0.0.1:7703"))
options.name = "async-example"
let subscriber = Subscriber(options: options, cursor: try FileCursor(path: argument(2, else: "async.cursor")))
for try await envelope in subscriber.envelopes {   // polled on a thread of its own; cancel the task to stop
    let fields = try envelope.decode()             // Envelope: kind, checkoutID, summary, error, …
    print(envelope.seq, envelope.topic, fields.checkoutID ?? "-")   // the work: idempotent, keyed by seq
    try await subscriber.commit(envelope)          // only now does the cursor move
}
