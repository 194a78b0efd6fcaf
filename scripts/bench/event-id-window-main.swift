// The harness of scripts/event-id-window-stall: the event-id window of two revisions, side by side,
// each as `Window0` and `Window1` (their sources, renamed, beside this file). Fresh random ids, one
// lookup and one insert each, as the pipeline does for every event with an id; every insert timed.
import Glibc

@inline(never) func now() -> UInt64 {
    var t = timespec()
    guard clock_gettime(CLOCK_MONOTONIC, &t) == 0 else { fatalError("clock_gettime failed") }
    return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
}

var state: UInt64 = 42
func nextRandom() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
}

let arguments = CommandLine.arguments
let capacity = arguments.count > 1 ? Int(arguments[1]) ?? 200_000 : 200_000
let events = arguments.count > 2 ? Int(arguments[2]) ?? 2_000_000 : 2_000_000

func run(_ name: String, _ step: ((UInt64, UInt64), UInt64) -> Bool) {
    var worst: UInt64 = 0
    var overMillisecond = 0
    var found = 0
    let start = now()
    for i in 0..<events {
        let key = (nextRandom(), nextRandom())
        let t = now()
        if step(key, UInt64(i + 1)) { found += 1 }
        let d = now() - t
        worst = max(worst, d)
        if d > 1_000_000 { overMillisecond += 1 }
    }
    let perEvent = (now() - start) / UInt64(events)
    print("\(name): \(perEvent) ns per event (lookup and insert, clock reads included); "
          + "slowest \(worst / 1000) µs; over 1 ms: \(overMillisecond); found \(found)")
}

print("window of \(capacity) ids, \(events) fresh ids")
for round in 1...2 {
    var w0 = Window0(capacity: capacity)
    run("round \(round) \(arguments.count > 3 ? arguments[3] : "old")", { key, seq in
        let hit = w0.lookup(key) != nil
        w0.insert(key, seq: seq)
        return hit
    })
    var w1 = Window1(capacity: capacity)
    run("round \(round) \(arguments.count > 4 ? arguments[4] : "new")", { key, seq in
        let hit = w1.lookup(key) != nil
        w1.insert(key, seq: seq)
        return hit
    })
}
