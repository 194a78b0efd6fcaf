/// One `replay` reply's records, topic and envelope of each, back to back in one buffer: what
/// ``ControlService``'s replay returns and its sender sends after the status frame.
package struct ReplayPage {
    /// Every record's topic then envelope.
    private var bytes: [UInt8] = []
    /// Each record's start in ``bytes`` and its topic's and envelope's lengths.
    private var records: [(start: Int, topic: Int, envelope: Int)] = []

    package init() {}

    /// Records in the page.
    package var count: Int { records.count }

    /// Bytes of topics and envelopes in the page.
    package var byteCount: Int { bytes.count }

    /// Bytes the page's buffer holds without growing.
    var byteCapacity: Int { bytes.capacity }

    /// Adds a record.
    mutating func append(topic: UnsafeRawBufferPointer, envelope: UnsafeRawBufferPointer) {
        records.append((bytes.count, topic.count, envelope.count))
        bytes.append(contentsOf: topic)
        bytes.append(contentsOf: envelope)
    }

    /// Empties the page, keeping its buffers for the next.
    mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        records.removeAll(keepingCapacity: true)
    }

    /// Copies the page into `memory` (at least ``byteCount`` bytes), then calls `body` with each
    /// record's index, topic and envelope there.
    func forEachRecord(copiedTo memory: UnsafeMutableRawBufferPointer,
                       _ body: (Int, UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void) rethrows {
        precondition(memory.count >= bytes.count, "a replay page copied into less memory than it holds")
        bytes.withUnsafeBytes { memory.copyMemory(from: $0) }
        let all = UnsafeRawBufferPointer(memory)
        for (n, r) in records.enumerated() {
            try body(n, UnsafeRawBufferPointer(rebasing: all[r.start..<(r.start + r.topic)]),
                     UnsafeRawBufferPointer(rebasing: all[(r.start + r.topic)..<(r.start + r.topic + r.envelope)]))
        }
    }
}
