#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusClient
import CheckoutBusRuntime
import Foundation

/// `checkoutbus top`: a live full-screen view of one or more daemons over their control sockets,
/// refreshed every interval; one line per interval when stdout is not a terminal.
///
/// Not `Sendable`; runs on the calling thread. Every `stats` request is bounded by `--timeout`:
/// a daemon that does not answer shows as "no answer" for that round.
public struct TopCommand {
    public static let help = """
        checkoutbus top — a live view of running daemons: rates, failures, dead letters, subscribers' lag.

        USAGE: checkoutbus top [--control ENDPOINT[,ENDPOINT…]] [--interval SECONDS] [--by-shard]
                               [--top N] [--timeout SECONDS] [--once] [--json]

          --control E0,E1,…    the daemons' --control endpoints (default tcp://127.0.0.1:7703); with
                               several shards, their figures are summed
          --by-shard           several shards side by side (a column each, and their total)
          --interval SECONDS   time between two stats requests (default 1; 0.2 to 3600)
          --top N              rows of the failures table (default 5)
          --timeout SECONDS    how long to wait for each round of answers (default: half the
                               interval, at most 5); a daemon that does not answer shows "no answer"
          --once               two rounds an interval apart, print them once and exit
          --json               without a terminal (or with --once), one JSON object per interval
        \(CurveClientKeys.help)

        On a terminal: the full screen, keys q (quit), s (sort the failures and subscribers tables:
        by rate/lag, by total/drops, by name), + and - (interval ×2, ÷2), b (summed / side by side),
        g (gone subscribers shown / hidden: by default only live ones are listed; SEEN is the time
        since a subscriber's last report).
        Otherwise one key=value line per interval until SIGINT or SIGTERM.
        Rates are differences of the daemons' counters between two rounds over the elapsed time;
        a subscriber's lag is the daemon's last_seq minus the seq through which it reported having
        everything it follows.
        """

    public var controls = ["tcp://127.0.0.1:7703"]
    public var interval = 1.0
    public var timeout: Double?
    public var byShard = false
    public var topN = 5
    public var once = false
    public var json = false
    public var curve: CurveClientKeys?

    public init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try CommandLineArguments(
            arguments, valued: Set(["control", "interval", "top", "timeout"]).union(CurveClientKeys.flags),
            switches: ["by-shard", "once", "json"])
        curve = try CurveClientKeys.parse(args)
        if let v = args.value("control") {
            controls = v.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            if controls.isEmpty { throw .init("--control needs at least one endpoint") }
        }
        interval = try Self.seconds(args, "interval", default: 1)
        if args.value("timeout") != nil { timeout = try Self.seconds(args, "timeout", default: 5) }
        topN = try args.int("top", default: 5, in: 1...100)
        byShard = args.has("by-shard")
        once = args.has("once")
        json = args.has("json")
        if !args.positionals.isEmpty { throw .init("unexpected argument \(args.positionals[0])") }
    }

    private static func seconds(_ args: CommandLineArguments, _ name: String, default d: Double)
        throws(CommandLineArguments.UsageError) -> Double
    {
        guard let raw = args.value(name) else { return d }
        guard let v = Double(raw), v >= 0.2, v <= 3600 else {
            throw .init("--\(name) must be a number of seconds from 0.2 to 3600, got \(raw)")
        }
        return v
    }

    /// Runs until `q`, the stop signal, or after one view with `--once`. Exits 1 when `--once`
    /// got no answer from any daemon.
    public func run(stop: StopSignal) -> Int32 {
        do {
            let poller = try StatsPoller(endpoints: controls, curve: curve)
            var view = TopView(shards: [], elapsed: 0, topN: topN, byShard: byShard)
            let onTerminal = isatty(1) == 1
            if once { return try runOnce(poller, view: &view, onTerminal: onTerminal) }
            if onTerminal {
                return try runScreen(poller, view: &view, stop: stop)
            }
            return try runLines(poller, view: &view, stop: stop)
        } catch {
            FileHandleWriter.standardError("checkoutbus top: \(error)\n")
            return 1
        }
    }

    /// A round waits at most half the interval by default, so keys are read between rounds even
    /// when a daemon does not answer.
    private func roundTimeout(_ interval: Double) -> Double { timeout ?? min(interval / 2, 5) }

    private func runOnce(_ poller: StatsPoller, view: inout TopView, onTerminal: Bool) throws -> Int32 {
        let first = try poller.round(timeout: roundTimeout(interval))
        let started = BusClock.monotonicNanoseconds()
        sleepUntil(started + UInt64(interval * 1e9), stop: nil)
        let second = try poller.round(timeout: roundTimeout(interval))
        view.shards = zip(controls, zip(first, second)).map { TopView.Shard(endpoint: $0, previous: $1.0, current: $1.1) }
        view.elapsed = Double(BusClock.monotonicNanoseconds() - started) / 1e9
        if json {
            FileHandleWriter.standardOutput(view.json() + "\n")
        } else if onTerminal {
            FileHandleWriter.standardOutput(view.screen(width: TerminalScreen.size().columns, height: 1000,
                                                        interval: interval).joined(separator: "\n") + "\n")
        } else {
            FileHandleWriter.standardOutput(view.line() + "\n")
        }
        if second.allSatisfy({ $0 == nil }) {
            FileHandleWriter.standardError("checkoutbus top: no answer from \(controls.joined(separator: ","))\(curve == nil ? "" : CurveClientKeys.refusalHint)\n")
            return 1
        }
        return 0
    }

    private func runLines(_ poller: StatsPoller, view: inout TopView, stop: StopSignal) throws -> Int32 {
        var previous = try poller.round(timeout: roundTimeout(interval))
        var previousAt = BusClock.monotonicNanoseconds()
        while !stop.isRaised {
            sleepUntil(previousAt + UInt64(interval * 1e9), stop: stop)
            if stop.isRaised { break }
            let current = try poller.round(timeout: roundTimeout(interval))
            let now = BusClock.monotonicNanoseconds()
            view.shards = zip(controls, zip(previous, current)).map { TopView.Shard(endpoint: $0, previous: $1.0, current: $1.1) }
            view.elapsed = Double(now - previousAt) / 1e9
            FileHandleWriter.standardOutput((json ? view.json() : view.line()) + "\n")
            (previous, previousAt) = (current, now)
        }
        return 0
    }

    private func runScreen(_ poller: StatsPoller, view: inout TopView, stop: StopSignal) throws -> Int32 {
        let screen = TerminalScreen()
        defer { screen.restore() }
        var interval = self.interval
        var previous: [TopSnapshot?] = controls.map { _ in nil }
        var previousAt = BusClock.monotonicNanoseconds()
        var current = try poller.round(timeout: roundTimeout(interval))
        var currentAt = BusClock.monotonicNanoseconds()
        func draw() {
            view.shards = zip(controls, zip(previous, current)).map { TopView.Shard(endpoint: $0, previous: $1.0, current: $1.1) }
            view.elapsed = Double(currentAt - previousAt) / 1e9
            let size = TerminalScreen.size()
            screen.draw(view.screen(width: size.columns, height: size.rows, interval: interval))
        }
        draw()
        while !stop.isRaised {
            let due = currentAt + UInt64(interval * 1e9)
            // Keys until the next round is due.
            var redraw = false
            keys: while !stop.isRaised, BusClock.monotonicNanoseconds() < due {
                let left = Int((due - min(due, BusClock.monotonicNanoseconds())) / 1_000_000)
                guard let key = screen.readKey(timeoutMilliseconds: min(100, max(1, left))) else { continue }
                switch key {
                case UInt8(ascii: "q"), UInt8(ascii: "Q"), 3: return 0
                case UInt8(ascii: "s"): view.sort = view.sort.next
                case UInt8(ascii: "b"): view.byShard.toggle()
                case UInt8(ascii: "g"): view.showGone.toggle()
                case UInt8(ascii: "+"): interval = min(3600, interval * 2)
                case UInt8(ascii: "-"): interval = max(0.25, interval / 2)
                default: continue
                }
                redraw = true
                break keys
            }
            if redraw && BusClock.monotonicNanoseconds() < currentAt + UInt64(interval * 1e9) {
                draw()
                continue
            }
            if stop.isRaised { break }
            (previous, previousAt) = (current, currentAt)
            current = try poller.round(timeout: roundTimeout(interval))
            currentAt = BusClock.monotonicNanoseconds()
            draw()
        }
        return 0
    }

    /// Sleeps until the monotonic `deadline`, waking every 100 ms to check `stop`.
    private func sleepUntil(_ deadline: UInt64, stop: StopSignal?) {
        while stop?.isRaised != true {
            let now = BusClock.monotonicNanoseconds()
            if now >= deadline { return }
            usleep(UInt32(min(100_000, (deadline - now) / 1000)))
        }
    }
}
