import CheckoutBusClient
import CheckoutBusJSON
import CheckoutBusRuntime
import ZeroMQ
import CheckoutBusProtocol

/// One DEALER per daemon's control socket, asking them all for `stats` at once and waiting at
/// most a timeout for the answers. Not `Sendable`: its sockets live on the calling thread.
final class StatsPoller {
    private let context: ZMQContext
    private let sockets: [ZMQSocket]
    private var round = 0
    private let document = JSONDocument()

    init(endpoints: [String], curve: CurveClientKeys?) throws {
        let context = try ZMQContext()
        self.context = context
        sockets = try endpoints.map { endpoint in
            let s = try ZMQSocket(context: context, type: .dealer)
            try s.setLinger(milliseconds: 0)
            try curve?.apply(to: s)
            try s.connect(endpoint)
            return s
        }
    }

    /// Each daemon's snapshot, in endpoint order; nil for one that did not answer in `timeout`
    /// seconds. Replies to an earlier round (a daemon that answered late) are dropped by `req`.
    func round(timeout: Double) throws -> [TopSnapshot?] {
        round += 1
        let request = ControlRequestWire.stats(req: Int64(round))
        var answers = [TopSnapshot?](repeating: nil, count: sockets.count)
        var waiting = Set<Int>()
        for (i, s) in sockets.enumerated() where try s.send(request, dontWait: true) { waiting.insert(i) }
        let deadline = BusClock.monotonicNanoseconds() + UInt64(timeout * 1e9)
        while !waiting.isEmpty {
            let now = BusClock.monotonicNanoseconds()
            if now >= deadline { break }
            let poller = ZMQPoller()
            let order = Array(waiting)
            for i in order { poller.addReadable(sockets[i]) }
            if try poller.poll(timeoutMilliseconds: Int((deadline - now) / 1_000_000) + 1) == 0 { continue }
            for (index, i) in order.enumerated() where poller.isReadable(index) {
                while let frames = try sockets[i].receiveMultipart(dontWait: true) {
                    guard let reply = frames.first,
                        ControlReplyWire.parse(reply, into: document),
                        ControlReplyWire.read(document).req == Int64(round), let stats = StatsReply.read(document)
                    else { continue }
                    answers[i] = TopSnapshot(stats)
                    waiting.remove(i)
                }
            }
        }
        return answers
    }
}
