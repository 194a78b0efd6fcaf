/// A first-in, first-out queue on a ring of slots: appends at the back, takes from the front.
///
/// The ring doubles when an append finds it full and never shrinks, so its storage is bounded by
/// twice the most elements it ever held at once, however far the taking lags behind the
/// appending as long as it keeps up on the whole. A taken element's slot is cleared at once: the
/// queue keeps nothing alive that it has handed out. The one queue type of the package (in place
/// of an array with a head index, which keeps every taken element until it drains): the daemon's
/// waiting acknowledgements, the subscriber's pending and unconfirmed envelopes, the async
/// hand-over, the router's waiting acknowledgements and the JetStream bridge's commits.
///
/// A value with copy-on-write storage; `Sendable` when its elements are. Not thread-safe: share it
/// behind a lock.
public struct RingBuffer<Element> {
    private var slots: ContiguousArray<Element?>
    /// The slot of the first element.
    private var head = 0
    /// Elements queued.
    public private(set) var count = 0

    /// An empty queue with room for `initialCapacity` elements before it first grows.
    public init(initialCapacity: Int = 16) {
        slots = ContiguousArray(repeating: nil, count: max(1, initialCapacity))
    }

    public var isEmpty: Bool { count == 0 }

    /// The slots the storage holds (queued elements and free slots): what the queue costs in memory.
    public var capacity: Int { slots.count }

    /// Queues `element` at the back, doubling the ring first when it is full.
    public mutating func append(_ element: Element) {
        if count == slots.count { grow() }
        slots[slot(count)] = element
        count += 1
    }

    /// Takes the front element, clearing its slot; nil when the queue is empty.
    public mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let element = slots[head].take()
        head = slot(1)
        count -= 1
        return element
    }

    /// The front element, left in place.
    public var first: Element? { count > 0 ? slots[head] : nil }

    /// The back element (the last appended), left in place.
    public var last: Element? { count > 0 ? slots[slot(count - 1)] : nil }

    /// The element `offset` places from the front (0: ``first``); `offset` must be below ``count``.
    public subscript(offset: Int) -> Element {
        precondition(offset >= 0 && offset < count, "RingBuffer offset \(offset) out of 0..<\(count)")
        return slots[slot(offset)]!
    }

    /// Takes every element, keeping the storage.
    public mutating func removeAll() {
        while popFirst() != nil {}
        head = 0
    }

    /// Takes every element; without `keepingCapacity`, the storage goes back to `initialCapacity`
    /// slots (a queue that once held a flood does not keep its size).
    public mutating func removeAll(keepingCapacity: Bool, initialCapacity: Int = 16) {
        if keepingCapacity {
            removeAll()
        } else {
            slots = ContiguousArray(repeating: nil, count: max(1, initialCapacity))
            head = 0
            count = 0
        }
    }

    /// The slot `offset` places after the head.
    private func slot(_ offset: Int) -> Int {
        let i = head + offset
        return i < slots.count ? i : i - slots.count
    }

    private mutating func grow() {
        var bigger = ContiguousArray<Element?>(repeating: nil, count: slots.count * 2)
        for i in 0..<count { bigger[i] = slots[slot(i)].take() }
        slots = bigger
        head = 0
    }
}

extension RingBuffer: Sendable where Element: Sendable {}
