#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusClient

// async-seq-recorder PUBLISH CONTROL CURSOR SEQS — a test fixture: the async Subscriber as a process
// that the integration tests kill -9 (Tests/IntegrationTests/AsyncSubscriberKillTests.swift).
//
// Follows every journaled topic from CURSOR (a FileCursor). Appends `start <cursor>` to SEQS when it
// starts, then for each envelope appends `<seq>` and fsyncs the file — its work, done — and only then
// commits. Prints `recorder: subscribed` on stderr once its subscriptions are live.
let given = Array(CommandLine.arguments.dropFirst())

/// One line on stderr, in one write.
@Sendable func say(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

guard given.count == 4 else {
    say("usage: async-seq-recorder PUBLISH CONTROL CURSOR SEQS")
    exit(2)
}
let seqs = open(given[3], O_WRONLY | O_APPEND | O_CREAT, 0o644)
guard seqs >= 0 else {
    say("async-seq-recorder: cannot open \(given[3])")
    exit(1)
}

/// Appends one line to SEQS and waits until it is on the disk.
func appendDurably(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    let written = bytes.withUnsafeBytes { write(seqs, $0.baseAddress, $0.count) }
    guard written == bytes.count, fsync(seqs) == 0 else {
        say("async-seq-recorder: cannot write \(given[3])")
        exit(1)
    }
}

var options = BusSubscriber.Options(publish: given[0], control: given[1])
options.prefixes = ["checkout.", "bus.deadletter"]
options.liveSubscription = .everything
options.name = "async-seq-recorder"
let cursor = try FileCursor(path: given[2])
appendDurably("start \(cursor.load())")
let subscriber = Subscriber(options: options, cursor: cursor, onSubscribed: { say("recorder: subscribed") })
for try await envelope in subscriber.envelopes {
    appendDurably(String(envelope.seq))
    try await subscriber.commit(envelope)
}
