import Testing

import CheckoutBusRuntime

/// The package's one queue type: order, growth, and release of what was taken.
@Suite("ring buffer")
struct RingBufferTests {
    final class Token {
        let n: Int
        init(_ n: Int) { self.n = n }
    }

    @Test("first in, first out across wrap-arounds and growth; storage within twice the most held")
    func order() {
        var ring = RingBuffer<Int>(initialCapacity: 4)
        var expected: [Int] = []
        var next = 0
        var most = 0
        // Uneven rounds: appends outpace takes, then takes catch up, wrapping and growing on the way.
        for round in 0..<200 {
            for _ in 0..<(round % 7) {
                ring.append(next)
                expected.append(next)
                next += 1
            }
            most = max(most, ring.count)
            for _ in 0..<(round % 5) {
                #expect(ring.first == expected.first)
                #expect(ring.popFirst() == (expected.isEmpty ? nil : expected.removeFirst()))
            }
            #expect(ring.count == expected.count)
        }
        while let v = ring.popFirst() { #expect(v == expected.removeFirst()) }
        #expect(expected.isEmpty && ring.isEmpty)
        #expect(ring.capacity < 2 * most, "capacity \(ring.capacity) for at most \(most) held")
    }

    @Test("a taken element is released at once, also across growth; removeAll releases the rest")
    func releases() {
        var ring = RingBuffer<Token>(initialCapacity: 2)
        weak var taken: Token?
        weak var queued: Token?
        do {
            let a = Token(1)
            let b = Token(2)
            taken = a
            queued = b
            ring.append(a)
            ring.append(b)
        }
        for n in 3...9 { ring.append(Token(n)) }  // grows twice
        #expect(ring.popFirst()?.n == 1)
        #expect(taken == nil, "the ring no longer holds the element it handed out")
        #expect(queued != nil)
        ring.removeAll()
        #expect(queued == nil && ring.isEmpty)
        ring.append(Token(10))
        #expect(ring.popFirst()?.n == 10)
    }

    @Test("last and subscript read from the back and by offset across a wrap; removeAll without keeping capacity shrinks")
    func indexing() {
        var ring = RingBuffer<Int>(initialCapacity: 4)
        for i in 0..<3 { ring.append(i) }
        _ = ring.popFirst()
        _ = ring.popFirst()
        for i in 3..<6 { ring.append(i) }  // wraps: slots 2, 3, 0, 1
        #expect(ring.first == 2 && ring.last == 5 && ring.count == 4)
        #expect((0..<ring.count).map { ring[$0] } == [2, 3, 4, 5])
        for i in 6..<40 { ring.append(i) }
        #expect(ring.capacity >= 38 && ring.last == 39 && ring[37] == 39)
        ring.removeAll(keepingCapacity: true)
        #expect(ring.isEmpty && ring.capacity >= 38 && ring.last == nil)
        for i in 0..<40 { ring.append(i) }
        ring.removeAll(keepingCapacity: false, initialCapacity: 8)
        #expect(ring.isEmpty && ring.capacity == 8 && ring.first == nil)
    }
}
