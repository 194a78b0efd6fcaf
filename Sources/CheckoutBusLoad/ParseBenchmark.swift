#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusTools
import CheckoutBusCore
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// `checkoutbus bench parse`: how fast the hot path reads a snapshot, stage by stage, on one core.
///
/// Stages: the tape scan alone; scan plus canonical snapshot hash; and the whole processor (decode,
/// rules, summary, redaction, envelope), fed two alternating snapshots so nothing is suppressed.
/// Not `Sendable`; runs on the calling thread.
package struct ParseBenchmark {
    package var file: String
    package var iterations: Int
    /// Skip the scan and hash stages (for profiling the full stage alone).
    package var onlyFullProcess = false

    package init(file: String, iterations: Int, onlyFullProcess: Bool = false) {
        self.file = file
        self.iterations = iterations
        self.onlyFullProcess = onlyFullProcess
    }

    package func run() -> Int32 {
        guard let bytes = ParseBenchmark.readFile(file) else {
            FileHandleWriter.standardError("checkoutbus bench parse: cannot read \(file)\n")
            return 1
        }
        var text = bytes
        while let last = text.last, last == 0x0A || last == 0x0D || last == 0x20 { text.removeLast() }
        // A second snapshot of the same checkout, one line item's quantity changed, so the
        // processor alternates A→B→A and publishes every one (nothing is suppressed).
        var other = text
        let key = Array(#""quantity":"#.utf8)
        if let at = (0...(other.count - key.count)).first(where: { other[$0..<($0 + key.count)].elementsEqual(key) }) {
            let digit = at + key.count
            other[digit] = other[digit] == UInt8(ascii: "7") ? UInt8(ascii: "8") : UInt8(ascii: "7")
        }

        let doc = JSONDocument()
        var sink: UInt64 = 0
        let all = !onlyFullProcess
        let scan = !all ? 0 : measure { text.withUnsafeBytes { try? doc.parse($0) }; sink &+= UInt64(doc.root) }
        let hash = !all ? 0 : measure {
            text.withUnsafeBytes { try? doc.parse($0) }
            sink &+= CanonicalHash.hash(doc, doc.root)
        }
        let processor = EventProcessor()
        var flip = false
        var published = true
        let now = BusClock.monotonicSeconds()
        let process = measure {
            flip.toggle()
            let result = (flip ? text : other).withUnsafeBytes {
                processor.process($0, receivedAt: Timestamp(milliseconds: 0), now: now)
            }
            if case .published = result.outcome { sink &+= 1 } else { published = false }
        }
        if all {
            report("scan", scan, text.count)
            report("scan+hash", hash, text.count)
        }
        report("full process", process, text.count)
        if !published {
            FileHandleWriter.standardError("checkoutbus bench parse: some inputs were not published; the figure is not the full path\n")
        }
        if sink == 42 { FileHandleWriter.standardError("\n") }
        return 0
    }

    private func measure(_ body: () -> Void) -> Double {
        for _ in 0..<min(iterations, 10_000) { body() }
        let t0 = BusClock.monotonicNanoseconds()
        for _ in 0..<iterations { body() }
        let seconds = Double(BusClock.monotonicNanoseconds() - t0) / 1e9
        return Double(iterations) / seconds
    }

    private func report(_ stage: String, _ perSecond: Double, _ size: Int) {
        let name = stage + String(repeating: " ", count: max(0, 12 - stage.count))
        FileHandleWriter.standardOutput(
            "swift    \(name) \(size) bytes: \(Int(perSecond)) docs/s (\(Int(perSecond * Double(size) / 1e6)) MB/s)\n")
    }

    package static func readFile(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        let reader = LineReader(fd: fd, name: path)
        var all: [UInt8] = []
        do {
            while let line = try reader.nextLine() {
                all += line
                all.append(0x0A)
            }
        } catch {
            return nil  // unreadable: said by the caller, as for a file that cannot be opened
        }
        return all
    }
}
