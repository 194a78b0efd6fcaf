#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusCore
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

extension TailCommand {
    /// `tail --control/--since/--record`: a ``ShardedSubscriber`` (one ``BusSubscriber`` per shard)
    /// that replays, follows live and fills every gap from each shard's journal; prints (or records)
    /// each envelope once, in `seq` order per shard, and ends with a summary on stderr.
    package func runRecovering(stop: StopSignal) -> Int32 {
        guard let controls else { return 2 }
        let shardCount = endpoints.count
        var shardOptions: [BusSubscriber.Options] = zip(endpoints, controls).map { publish, control in
            var options = BusSubscriber.Options(publish: publish, control: control)
            options.prefixes = topics
            options.name = name
            options.curve = curve
            if let receiveHighWaterMark { options.receiveHighWaterMark = receiveHighWaterMark }
            options.receiveBufferBytes = receiveBufferBytes
            return options
        }
        // --since a time: each shard's daemon says where it begins.
        var sinceByShard = self.sinceByShard
        if let sinceTime {
            var resolved: [Int: Int64] = [:]
            for (shard, control) in controls.enumerated() {
                do {
                    let r = try JournalPosition.time(milliseconds: sinceTime).resolve(control: control, curve: curve)
                    resolved[shard] = r.seq
                    let at = shardCount == 1 ? "" : " of shard \(shard)"
                    FileHandleWriter.standardError("tail: --since \(Timestamp(milliseconds: sinceTime).rfc3339) is seq \(r.seq)\(at)"
                        + (r.beforeRetention ? " (the oldest retained: the journal no longer holds what came before)" : "")
                        + (r.seq > r.lastSeq ? " (nothing received since: following live from there)" : "") + "\n")
                } catch {
                    FileHandleWriter.standardError("checkoutbus tail: --since: \(error)\n")
                    return 1
                }
            }
            sinceByShard = resolved
        }
        /// Where a shard without a recorded line begins: --since (all or its own), else live.
        func startPosition(_ shard: Int) -> (MemoryCursor, BusSubscriber.StartPosition) {
            let from = sinceByShard.map { $0[shard] } ?? since
            return (MemoryCursor(seq: max(0, (from ?? 1) - 1)), from == nil ? .live : .cursor)
        }
        let recording: EnvelopeRecording?
        var cursors: [any SubscriberCursor] = []
        do {
            if let recordPath {
                let file = try EnvelopeRecording(path: recordPath, shards: shardCount)
                if file.truncatedBytes > 0 {
                    FileHandleWriter.standardError("tail: cut a torn last line (\(file.truncatedBytes) bytes) from \(recordPath)\n")
                }
                recording = file
                for shard in 0..<shardCount {
                    if file.hasLines[shard] {
                        cursors.append(file.cursor(forShard: shard))
                    } else {
                        let (cursor, start) = startPosition(shard)
                        // The file holds the position from its first line on.
                        cursor.keepsPosition = true
                        cursors.append(cursor)
                        shardOptions[shard].start = start
                    }
                }
                if !file.wasEmpty {
                    let positions = shardCount == 1
                        ? "seq \(file.lastSeq)"
                        : "seq " + (0..<shardCount).filter { file.hasLines[$0] }.map { "\($0):\(file.lastSeqs[$0])" }.joined(separator: ",")
                    FileHandleWriter.standardError("tail: resuming \(recordPath) after \(positions)\n")
                }
            } else {
                recording = nil
                for shard in 0..<shardCount {
                    let (cursor, start) = startPosition(shard)
                    cursors.append(cursor)
                    shardOptions[shard].start = start
                }
            }
        } catch {
            FileHandleWriter.standardError("checkoutbus tail: \(error)\n")
            return 1
        }

        let topicList = topics
        let endpointList = endpoints.joined(separator: ",")
        var hooks = ShardedSubscriber.Hooks(onSubscribed: {
            FileHandleWriter.standardError(
                "tail: subscribed to \(topicList.map { "\"\($0)\"" }.joined(separator: ", ")) at \(endpointList)\n")
        })
        let deadline = timeoutSeconds.map { BusClock.monotonicNanoseconds() + UInt64($0) * 1_000_000_000 }
        let doc = JSONDocument(maxDepth: EnvelopeLimits.maxDepth)
        let showShard = shardCount > 1
        // Printed lines are written a batch at a time (each round of the subscriber's loop).
        var output: [UInt8] = []
        func flush() {
            FileHandleWriter.writeAll(1, &output)
            output.removeAll(keepingCapacity: true)
        }
        hooks.onBatchEnd = { _ in if !output.isEmpty { flush() } }
        if recording == nil && topics.contains(where: { "bus.heartbeat".hasPrefix($0) }) {
            let format = self.format
            hooks.onHeartbeat = { _, topic, envelope in
                switch format {
                case .json: output.append(contentsOf: envelope)
                case .pretty:
                    output.append(contentsOf: TailCommand.pretty(topic: topic, envelope: envelope, doc: doc, showShard: showShard).utf8)
                }
                output.append(0x0A)
            }
        }
        let subscriber = ShardedSubscriber(shards: shardOptions, cursors: cursors, hooks: hooks,
                                           logger: BusLogger(label: "tail", level: .warning))
        var printed = 0
        let count = self.count
        let format = self.format
        let filter = self.filter
        // The count stops this process; raising the shared signal is how the handler ends the run.
        let status: Int32
        do {
            let outcome = try subscriber.run(stop: stop, deadline: deadline) { envelope in
                guard filter.matches(topic: envelope.topic, envelope: envelope.bytes, doc: doc) else { return }
                if let recording {
                    try recording.append(envelope)
                } else {
                    switch format {
                    case .json: output.append(contentsOf: envelope.bytes)
                    case .pretty:
                        output.append(contentsOf: TailCommand.pretty(topic: envelope.topic, envelope: envelope.bytes, doc: doc,
                                                                     showShard: showShard).utf8)
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
        let position = shardCount == 1
            ? "last_seq=\(subscriber.shards[0].statistics.lastSeq)"
            : "last_seqs=" + subscriber.shards.enumerated().map { "\($0.offset):\($0.element.statistics.lastSeq)" }.joined(separator: ",")
        FileHandleWriter.standardError(
            "tail: summary handled=\(s.handled) from_journal=\(s.fromJournal) missed=\(s.missed) recovered=\(s.recovered) "
                + "gaps=\(s.gaps) duplicates=\(s.duplicates) not_retained=\(s.notRetained) "
                + "replay_requests=\(s.replayRequests) replay_busy=\(s.replayBusy) \(position)\n")
        return status
    }
}
