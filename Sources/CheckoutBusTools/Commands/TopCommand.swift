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
package struct TopCommand {
    static let control = BusOptions.controlShards.described(
        "the daemons' --control endpoints, comma-separated; with several shards, their figures are summed")
    static let byShard = CommandOption("by-shard", help: "several shards side by side (a column each, and their total)")
    static let interval = CommandOption("interval", "SECONDS", help: "time between two stats requests (0.2 to 3600)", default: "1")
    static let top = CommandOption("top", "N", help: "rows of the failures table", default: "5")
    static let timeout = CommandOption(
        "timeout", "SECONDS",
        help: "how long to wait for each round of answers; a daemon that does not answer shows \"no answer\"",
        defaultNote: "half the interval, at most 5")
    static let once = CommandOption("once", help: "two rounds an interval apart, print them once and exit")
    static let json = CommandOption("json", help: "without a terminal (or with --once), one JSON object per interval")

    package static let spec = CommandSpec(
        "checkoutbus top", summary: "a live view of running daemons: rates, failures, dead letters, subscribers' lag.",
        options: [control, byShard, interval, top, timeout, once, json] + CurveClientKeys.options,
        notes: """
            On a terminal: the full screen, keys q (quit), s (sort the failures and subscribers tables:
            by rate/lag, by total/drops, by name), + and - (interval ×2, ÷2), b (summed / side by side),
            g (gone subscribers shown / hidden: by default only live ones are listed; SEEN is the time
            since a subscriber's last report).
            Otherwise one key=value line per interval until SIGINT or SIGTERM.
            Rates are differences of the daemons' counters between two rounds over the elapsed time;
            a subscriber's lag is the daemon's last_seq minus the seq through which it reported having
            everything it follows.
            """)
    package static var help: String { spec.help }

    package var controls: [String]
    package var interval: Double
    package var timeout: Double?
    package var byShard: Bool
    package var topN: Int
    package var once: Bool
    package var json: Bool
    package var curve: CurveClientKeys?

    package init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try Self.spec.parse(arguments)
        curve = try CurveClientKeys.parse(args)
        controls = try BusOptions.endpoints(args, Self.control)
        interval = try Self.seconds(args, Self.interval)!
        timeout = try Self.seconds(args, Self.timeout)
        topN = try args.int(Self.top, in: 1...100)
        byShard = args.has(Self.byShard)
        once = args.has(Self.once)
        json = args.has(Self.json)
        if !args.positionals.isEmpty { throw .init("unexpected argument \(args.positionals[0])") }
    }

    private static func seconds(_ args: CommandLineArguments, _ option: CommandOption)
        throws(CommandLineArguments.UsageError) -> Double?
    {
        guard let raw = args.value(option) else { return nil }
        guard let v = Double(raw), v >= 0.2, v <= 3600 else {
            throw .init(.invalidValue, "--\(option.name) must be a number of seconds from 0.2 to 3600, got \(raw)")
        }
        return v
    }

    /// Runs until `q`, the stop signal, or after one view with `--once`. Exits 1 when `--once`
    /// got no answer from any daemon.
    package func run(stop: StopSignal) -> Int32 {
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
