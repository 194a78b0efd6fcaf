#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusCore
import CheckoutBusDaemon
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime
import ZeroMQ

/// The flood's findings, as text for people or one JSON object. `Sendable`.
package struct FloodReport: Sendable {
    package let result: LoadDriver.Result
    package let expectedPublished: [Int]
    package let expectedSuppressed: Int
    package let sorted: [UInt64]

    package init(result: LoadDriver.Result, expected: [FloodGenerator.Event]) {
        self.result = result
        let counts = FloodGenerator.expectedCounts(expected)
        expectedPublished = counts.published
        expectedSuppressed = counts.suppressed
        sorted = result.latencies.sorted()
    }

    package var published: Int { result.receivedByKind.reduce(0, +) }
    package var suppressed: Int { result.sent - published - result.deadLetters }
    package var ok: Bool { result.receivedByKind == expectedPublished && result.deadLetters == 0 && !result.timedOut }

    package func p(_ q: Double) -> Double { result.latencyMicros(q, sorted: sorted) }

    package var text: String {
        var s = "sent        \(result.sent) events in \(String(format2: result.seconds)) s (\(Int(Double(result.sent) / max(result.seconds, 1e-9))) events/s)\n"
        s += "published   \(published) (expected \(expectedPublished.reduce(0, +)))\n"
        for k in LifecycleKind.allCases {
            let i = Int(k.rawValue)
            let mark = result.receivedByKind[i] == expectedPublished[i] ? "" : "   MISMATCH"
            s += "  \(String(describing: k.name).padded(10)) \(result.receivedByKind[i]) (expected \(expectedPublished[i]))\(mark)\n"
        }
        s += "suppressed  \(suppressed) (expected \(expectedSuppressed))\n"
        s += "deadletters \(result.deadLetters) (expected 0)\n"
        s += "throughput  \(Int(result.throughput)) published/s\n"
        s += "latency     p50 \(String(format2: p(0.5))) µs  p90 \(String(format2: p(0.9))) µs  p99 \(String(format2: p(0.99))) µs  p99.9 \(String(format2: p(0.999))) µs\n"
        s += ok ? "result      OK: nothing lost, nothing unexpected\n" : "result      FAILED: the bus did not publish what the generator expects\n"
        return s
    }

    package var json: String {
        var w = JSONWriter(capacity: 512)
        w.append("{\"sent\":")
        w.append(int: result.sent)
        w.append(",\"seconds\":")
        w.appendRaw(String(format2: result.seconds))
        w.append(",\"published\":")
        w.append(int: published)
        w.append(",\"expected_published\":")
        w.append(int: expectedPublished.reduce(0, +))
        w.append(",\"published_by_kind\":")
        FloodReport.appendByKind(result.receivedByKind, to: &w)
        w.append(",\"expected_by_kind\":")
        FloodReport.appendByKind(expectedPublished, to: &w)
        w.append(",\"suppressed\":")
        w.append(int: suppressed)
        w.append(",\"expected_suppressed\":")
        w.append(int: expectedSuppressed)
        w.append(",\"deadletters\":")
        w.append(int: result.deadLetters)
        w.append(",\"throughput\":")
        w.append(int: Int(result.throughput))
        w.append(",\"latency_us\":{\"p50\":")
        w.appendRaw(String(format2: p(0.5)))
        w.append(",\"p90\":")
        w.appendRaw(String(format2: p(0.9)))
        w.append(",\"p99\":")
        w.appendRaw(String(format2: p(0.99)))
        w.append(",\"p99_9\":")
        w.appendRaw(String(format2: p(0.999)))
        w.append("},\"ok\":")
        w.append(bool: ok)
        w.append("}")
        return String(decoding: w.bytes, as: UTF8.self)
    }
}
