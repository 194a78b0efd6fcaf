#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusCore

extension TailCommand {
    /// `tail --control/--since/--record`: a ``BusSubscriber`` that replays, follows live and fills
    /// every gap from the journal; prints (or records) each envelope once, in `seq` order, and ends
    /// with a summary on stderr.
    func runRecovering(stop: StopSignal) -> Int32 {
        guard let control else { return 2 }
        var options = BusSubscriber.Options(publish: endpoint, control: control)
        options.prefixes = topics
        options.name = name
        options.curve = curve
        if let receiveHighWaterMark { options.receiveHighWaterMark = receiveHighWaterMark }
        let recording: EnvelopeRecording?
        let cursor: any SubscriberCursor
        do {
            if let recordPath {
                let file = try EnvelopeRecording(path: recordPath)
                if file.truncatedBytes > 0 {
                    FileHandleWriter.standardError("tail: cut a torn last line (\(file.truncatedBytes) bytes) from \(recordPath)\n")
                }
                recording = file
                if file.wasEmpty {
                    cursor = MemoryCursor(seq: max(0, (since ?? 1) - 1))
                    options.start = since == nil ? .live : .cursor
                } else {
                    cursor = file
                    FileHandleWriter.standardError("tail: resuming \(recordPath) after seq \(file.lastSeq)\n")
                }
            } else {
                recording = nil
                cursor = MemoryCursor(seq: max(0, (since ?? 1) - 1))
                options.start = since == nil ? .live : .cursor
            }
        } catch {
            FileHandleWriter.standardError("checkoutbus tail: \(error)\n")
            return 1
        }

        let subscriber = BusSubscriber(options: options, cursor: cursor)
        subscriber.logger = Logger(label: "tail", level: .warning)
        let topics = self.topics
        let endpoint = self.endpoint
        subscriber.onSubscribed = {
            FileHandleWriter.standardError(
                "tail: subscribed to \(topics.map { "\"\($0)\"" }.joined(separator: ", ")) at \(endpoint)\n")
        }
        let deadline = timeoutSeconds.map { BusClock.monotonicNanoseconds() + UInt64($0) * 1_000_000_000 }
        let doc = JSONDocument()
        // Printed lines are written a batch at a time (each round of the subscriber's loop).
        var output: [UInt8] = []
        func flush() {
            FileHandleWriter.writeAll(1, &output)
            output.removeAll(keepingCapacity: true)
        }
        subscriber.onBatchEnd = { if !output.isEmpty { flush() } }
        if recording == nil && topics.contains(where: { "bus.heartbeat".hasPrefix($0) }) {
            let format = self.format
            subscriber.onHeartbeat = { topic, envelope in
                switch format {
                case .json: output.append(contentsOf: envelope)
                case .pretty: output.append(contentsOf: TailCommand.pretty(topic: topic, envelope: envelope, doc: doc).utf8)
                }
                output.append(0x0A)
            }
        }
        var printed = 0
        let count = self.count
        let format = self.format
        // The count stops this process; raising the shared signal is how the handler ends the run.
        let status: Int32
        do {
            let outcome = try subscriber.run(stop: stop, deadline: deadline) { envelope in
                if let recording {
                    try recording.append(envelope)
                } else {
                    switch format {
                    case .json: output.append(contentsOf: envelope.bytes)
                    case .pretty:
                        output.append(contentsOf: TailCommand.pretty(topic: envelope.topic, envelope: envelope.bytes, doc: doc).utf8)
                    }
                    output.append(0x0A)
                    if output.count >= 1 << 16 { flush() }
                }
                printed += 1
                if let count, printed >= count { stop.raise() }
            }
            if outcome == .deadlineReached {
                FileHandleWriter.standardError("tail: timed out after \(printed) envelopes\n")
                status = 1
            } else {
                status = 0
            }
        } catch {
            FileHandleWriter.standardError("checkoutbus tail: \(error)\n")
            status = 1
        }
        flush()
        let s = subscriber.statistics
        FileHandleWriter.standardError(
            "tail: summary handled=\(s.handled) from_journal=\(s.fromJournal) missed=\(s.missed) recovered=\(s.recovered) "
                + "gaps=\(s.gaps) duplicates=\(s.duplicates) not_retained=\(s.notRetained) "
                + "replay_requests=\(s.replayRequests) last_seq=\(s.lastSeq)\n")
        return status
    }
}
