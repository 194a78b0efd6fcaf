#if canImport(Glibc)
import CheckoutBusClient
import Glibc
#endif
import CheckoutBusCore
import ZeroMQ
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// `checkoutbus send --acked`: a DEALER on the daemon's `--ingest-acked` socket with a window of
/// events in flight; every reply (in send order) is counted and, with `--ack-log`, logged as
/// `<seq> <event_id>`.
///
/// With `--shards`, one DEALER per shard: each event goes to the shard owning its checkout
/// (``ShardRouter``), the window counts events in flight on every shard, and the ack log's lines
/// are `<shard>:<seq> <event_id>` (each shard numbers its own journal). A reply carries its own
/// `seq` and `event_id`, so a shard that restarts mid-run cannot misattribute an acknowledgement:
/// events lost with it are simply never answered, and counted as such.
///
/// Not `Sendable`; runs on the calling thread.
package struct AckedSender {
    package let command: SendCommand

    package init(command: SendCommand) { self.command = command }

    package func run(_ readers: [LineReader]) -> Int32 {
        var log: Int32 = -1
        if let path = command.ackLog {
            log = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard log >= 0 else {
                FileHandleWriter.standardError("checkoutbus send: cannot open \(path): \(String(cString: strerror(errno)))\n")
                return 1
            }
        }
        defer { for r in readers where r.fd != 0 { close(r.fd) } }
        let endpoints = command.endpoints
        let sharded = command.shards != nil
        var sent = 0
        var acked = 0
        var rejected = 0
        var sentByShard = [Int](repeating: 0, count: endpoints.count)
        var answeredByShard = [Int](repeating: 0, count: endpoints.count)
        var firstRejection: String?
        do {
            let context = try ZMQContext()
            let poller = ZMQPoller()
            let dealers = try endpoints.map { endpoint in
                let dealer = try ZMQSocket(context: context, type: .dealer)
                try dealer.setLinger(milliseconds: 0)
                try dealer.setOption(.sendHighWaterMark, 1_000_000)
                try dealer.setOption(.receiveHighWaterMark, 1_000_000)
                try command.curve?.apply(to: dealer)
                try dealer.connect(endpoint)
                poller.addReadable(dealer)
                return dealer
            }
            let router = ShardRouter(count: dealers.count)
            let reply = JSONDocument()
            let message = ZMQMessage()
            var logBuffer: [UInt8] = []
            var readerIndex = 0
            var exhausted = readers.isEmpty
            var lastProgress = BusClock.monotonicNanoseconds()
            let timeout = UInt64(command.timeoutSeconds) * 1_000_000_000

            while !exhausted || acked + rejected < sent {
                // Fill the window.
                while !exhausted && sent - acked - rejected < command.window {
                    guard let line = try readers[readerIndex].nextLine() else {
                        readerIndex += 1
                        exhausted = readerIndex == readers.count
                        continue
                    }
                    if LineReader.isBlank(line) { continue }
                    let shard = router.route(line).shard
                    guard try line.withUnsafeBytes({ try dealers[shard].send($0, dontWait: true) }) else {
                        // The socket is full or not connected yet: wait for replies or a connection.
                        readers[readerIndex].pushBack(line)
                        break
                    }
                    sent += 1
                    sentByShard[shard] += 1
                }
                // Read every reply that arrived.
                var got = false
                for (shard, dealer) in dealers.enumerated() {
                    while try dealer.receive(into: message, dontWait: true) {
                        got = true
                        answeredByShard[shard] += 1
                        let parsed: Bool = message.withUnsafeBytes { bytes in
                            guard (try? reply.parse(bytes)) != nil, reply.kind(reply.root) == .object else { return false }
                            return true
                        }
                        guard parsed else { continue }
                        let root = reply.root
                        let ok = reply.member(root, "ok").map { reply.kind($0) == .true } ?? false
                        let seq = reply.member(root, "seq").flatMap { reply.int64($0) }
                        let eventID = reply.member(root, "event_id").flatMap { reply.string($0) }
                        if ok {
                            acked += 1
                            if log >= 0 {
                                if sharded {
                                    logBuffer.append(contentsOf: String(shard).utf8)
                                    logBuffer.append(UInt8(ascii: ":"))
                                }
                                logBuffer.append(contentsOf: (seq.map { String($0) } ?? "-").utf8)
                                logBuffer.append(0x20)
                                logBuffer.append(contentsOf: (eventID ?? "-").utf8)
                                logBuffer.append(0x0A)
                            }
                        } else {
                            rejected += 1
                            if firstRejection == nil {
                                let reason = reply.member(root, "reason").flatMap { reply.string($0) } ?? "unknown"
                                let at = sharded ? "shard \(shard) " : ""
                                firstRejection = "\(reason) (\(at)seq \(seq.map { String($0) } ?? "-"), event_id \(eventID ?? "-"))"
                            }
                        }
                    }
                }
                if got {
                    lastProgress = BusClock.monotonicNanoseconds()
                    if logBuffer.count > 65_536 { try flush(&logBuffer, to: log) }
                } else {
                    if BusClock.monotonicNanoseconds() - lastProgress > timeout { break }
                    try poller.poll(timeoutMilliseconds: 10)
                }
            }
            try flush(&logBuffer, to: log)
        } catch {
            FileHandleWriter.standardError("checkoutbus send: \(error)\n")
            if log >= 0 { close(log) }  // already failing: its own error adds nothing
            return 1
        }
        // A write error the file system defers is reported by `close`.
        if log >= 0 && close(log) != 0 {
            let reason = String(cString: strerror(errno))
            FileHandleWriter.standardError("checkoutbus send: cannot write the ack log: \(reason)\n")
            return 1
        }
        let byShard = sharded ? " by_shard=" + sentByShard.map(String.init).joined(separator: ",") : ""
        FileHandleWriter.standardError("sent=\(sent) acked=\(acked) rejected=\(rejected)\(byShard)\n")
        if let firstRejection { FileHandleWriter.standardError("checkoutbus send: first rejection: \(firstRejection)\n") }
        let unanswered = sent - acked - rejected
        if unanswered > 0 || !readersExhausted(readers) {
            let silent = endpoints.indices.filter { sentByShard[$0] > answeredByShard[$0] }
                .map { "\(endpoints[$0]) (\(sentByShard[$0] - answeredByShard[$0]))" }
            FileHandleWriter.standardError(
                "checkoutbus send: \(unanswered) event(s) not acknowledged within \(command.timeoutSeconds)s by \(silent.joined(separator: ", "))\n")
            return 1
        }
        return rejected > 0 ? 1 : 0
    }

    private func readersExhausted(_ readers: [LineReader]) -> Bool {
        readers.allSatisfy { $0.isExhausted }
    }

    /// Writes the buffered acknowledgements to the log.
    /// - Throws: ``ToolError`` when the log cannot be written: a log cut short must not look whole.
    private func flush(_ buffer: inout [UInt8], to fd: Int32) throws(ToolError) {
        guard fd >= 0, !buffer.isEmpty else { return }
        var done = 0
        while done < buffer.count {
            let n = buffer[done...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 {
                let reason = n < 0 ? String(cString: strerror(errno)) : "nothing written"
                throw ToolError("cannot write the ack log: \(reason)")
            }
            done += n
        }
        buffer.removeAll(keepingCapacity: true)
    }
}
