import NATS
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// Whether an existing stream can take the bridge's messages without breaking its guarantees.
/// `Sendable` (no state).
///
/// Refused: subjects that do not cover `checkout.>` and `bus.deadletter` — after the bridge's
/// ``BridgeOptions/subjectPrefix``, if any — (messages would be lost as "no stream"), a retention other than limits (consumers acknowledging would delete messages,
/// and the start-up reading of the tail that prevents duplicates would not find them), a stream
/// that does not acknowledge, or a sealed one. Differences in replicas, age, size limits and
/// duplicate window are the operator's choice: logged, not refused.
enum StreamCompatibility {
    static func check(_ existing: StreamConfiguration, against options: BridgeOptions, logger: BusLogger) throws(BridgeError) {
        let wanted = options.streamConfiguration
        for subject in options.subjects where !existing.subjects.contains(where: { covers($0, subject) }) {
            throw BridgeError("stream \(existing.name) does not take \(subject) (its subjects: \(existing.subjects.joined(separator: ", ")))")
        }
        guard existing.retention == .limits else {
            throw BridgeError("stream \(existing.name) has \(existing.retention) retention; the bridge needs limits retention")
        }
        guard existing.acknowledges else { throw BridgeError("stream \(existing.name) does not acknowledge publishes (no_ack)") }
        guard !existing.sealed else { throw BridgeError("stream \(existing.name) is sealed") }
        var differences: [String] = []
        if existing.replicas != wanted.replicas { differences.append("replicas \(existing.replicas) (flag \(wanted.replicas))") }
        if existing.storage != .file { differences.append("memory storage") }
        if existing.maxAgeNanoseconds != wanted.maxAgeNanoseconds {
            differences.append("max_age \(existing.maxAgeNanoseconds / 1_000_000_000)s (flag \(wanted.maxAgeNanoseconds / 1_000_000_000)s)")
        }
        if existing.duplicateWindowNanoseconds != wanted.duplicateWindowNanoseconds {
            differences.append("duplicate_window \(existing.duplicateWindowNanoseconds / 1_000_000_000)s "
                + "(flag \(wanted.duplicateWindowNanoseconds / 1_000_000_000)s)")
        }
        if existing.discard != .old { differences.append("discard new") }
        if !differences.isEmpty {
            logger.warning("the existing stream differs from the flags; it is used as it is",
                           ["stream": existing.name, "differences": differences.joined(separator: "; ")])
        }
    }

    /// Whether the subject filter `pattern` matches every subject `subject` does (`>` and `*` wildcards).
    static func covers(_ pattern: String, _ subject: String) -> Bool {
        let p = pattern.split(separator: ".", omittingEmptySubsequences: false)
        let s = subject.split(separator: ".", omittingEmptySubsequences: false)
        for (i, token) in p.enumerated() {
            if token == ">" { return i < s.count }
            guard i < s.count else { return false }
            if token == "*" { if s[i] == ">" { return false } else { continue } }
            if token != s[i] { return false }
        }
        return p.count == s.count
    }
}
