import Foundation
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusRuntime
import CheckoutBusWorkers

/// `checkoutbus cursor show|set`: a subscriber's position where it keeps it — a cursor file (the
/// Swift or Python client's, one per shard), the fulfilment worker's store, the analytics worker's
/// checkpoint — read, and moved while its worker is stopped (docs/commands.md, "cursor").
///
/// Not `Sendable`; runs on the calling thread.
package struct CursorCommand {
    static let toSeq = CommandOption(
        "to-seq", "SEQ", help: "set: resume at SEQ: the next envelope handled is SEQ (the cursor, which names the last one handled, becomes SEQ-1)")
    static let toTime = CommandOption(
        "to-time", "POSITION",
        help: "set: resume at the first envelope received at or after POSITION: a duration back from now (10m, 2h) "
            + "or an RFC 3339 time, resolved by each shard's daemon (--control, one endpoint per shard, in shard order)")
    static let shiftBy = CommandOption(
        "shift-by", "N", help: "set: move by N envelopes: 1 skips the next one (a poison envelope), -500 handles the last 500 again")
    static let shard = CommandOption("shard", "I", help: "only shard I", defaultNote: "every shard of PATH")
    static let shards = CommandOption(
        "shards", "N", help: "PATH's cursor files are PATH.I-of-N (found by themselves when they exist; needed to create them)")
    static let control = BusOptions.controlShards.described("the daemons' --control endpoints, comma-separated, in shard order")
    static let dryRun = CommandOption("dry-run", help: "print what would change; write, create and lock nothing")
    static let format = BusOptions.format(
        "show: pretty, or json: {\"kind\":…, \"path\":…, \"positions\":[{\"shard\":I, \"shards\":N, \"name\":…, \"seq\":S}]}")

    package static let spec = CommandSpec(
        "checkoutbus cursor", summary: "look at a subscriber's position, or move it while the subscriber is stopped.",
        operands: "show PATH | set PATH",
        operandHelp: [
            .init("show PATH", "print the position PATH keeps"),
            .init("set PATH", "move it: exactly one of --to-seq, --to-time, --shift-by"),
            .init("PATH", "where the position is kept, told apart by its content: a cursor file (--cursor of tail "
                  + "--record's resumable subscribers, the Swift and Python clients; for several shards PATH.I-of-N, "
                  + "one per shard), the fulfilment worker's --db store, or the analytics worker's --cursor checkpoint"),
        ],
        options: [toSeq, toTime, shiftBy, shard, shards, control, dryRun, format] + CurveClientKeys.options,
        notes: """
            set takes the position's lock first: it refuses while the worker or subscriber holding it
            runs (stop it, set, start it). Moving back makes the subscriber handle those envelopes again
            (the fulfilment worker keeps orders exactly once by idempotency key; the analytics worker's
            counts add them again); moving forward skips them. Exits 1 on a refusal, 2 on a usage error.
            """)
    package static var help: String { spec.help }

    package enum Action: Sendable, Equatable {
        case show
        case toSeq(Int64)
        case toTime(Int64)
        case shiftBy(Int64)
    }

    package var path = ""
    package var action = Action.show
    package var shard: Int?
    package var shards: Int?
    package var controls: [String]
    package var dryRun: Bool
    package var json: Bool
    package var curve: CurveClientKeys?

    package init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try Self.spec.parse(arguments)
        curve = try CurveClientKeys.parse(args)
        guard args.positionals.count == 2, ["show", "set"].contains(args.positionals[0]) else {
            throw .init("expected `cursor show PATH` or `cursor set PATH …`")
        }
        path = args.positionals[1]
        let moves = [Self.toSeq, Self.toTime, Self.shiftBy].filter(args.given)
        if args.positionals[0] == "show" {
            guard moves.isEmpty else { throw .init("--\(moves[0].name) moves a cursor: use `cursor set`") }
        } else {
            guard moves.count == 1 else { throw .init("cursor set needs exactly one of --to-seq, --to-time, --shift-by") }
            switch moves[0].name {
            case Self.toSeq.name:
                action = .toSeq(Int64(try args.optionalInt(Self.toSeq, in: 1...Int.max)!))
            case Self.toTime.name:
                do {
                    switch try JournalPosition.parse(args.value(Self.toTime)!, now: BusClock.wallMilliseconds()) {
                    case .seq(let seq): action = .toSeq(max(1, seq))
                    case .time(let ms): action = .toTime(ms)
                    }
                } catch { throw .init("--to-time: \(error)") }
            default:
                guard let n = Int64(args.value(Self.shiftBy)!) else { throw .init("--shift-by takes a whole number, such as 1 or -500") }
                action = .shiftBy(n)
            }
        }
        shard = try args.optionalInt(Self.shard, in: 0...(ShardLimits.maxShards - 1))
        shards = try args.optionalInt(Self.shards, in: 1...ShardLimits.maxShards)
        controls = try BusOptions.endpoints(args, Self.control)
        dryRun = args.has(Self.dryRun)
        json = try args.choice(Self.format, ["pretty": false, "json": true])
    }

    /// What PATH holds.
    package enum Store: Equatable {
        /// Cursor files: PATH itself (one shard), or PATH.I-of-N.
        case cursorFiles(shards: Int)
        case fulfilment
        case analytics

        var name: String {
            switch self {
            case .cursorFiles: "cursor file"
            case .fulfilment: "fulfilment store"
            case .analytics: "analytics checkpoint"
            }
        }
    }

    /// One shard's position.
    package struct Position {
        var shard: Int
        var shards: Int
        /// The cursor file, or the store's row name.
        var name: String
        var seq: Int64
    }

    package func run() -> Int32 {
        do {
            let store = try detect()
            if case .show = action { return show(store, try read(store)) }
            return try set(store)
        } catch let error as CursorFailure {
            FileHandleWriter.standardError("checkoutbus cursor: \(error.description)\n")
            return 1
        } catch {
            FileHandleWriter.standardError("checkoutbus cursor: \(error)\n")
            return 1
        }
    }

    struct CursorFailure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// Tells what PATH is by its first bytes, or by the PATH.I-of-N files beside it.
    package func detect() throws -> Store {
        var info = stat()
        if stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR {
            throw CursorFailure("\(path) is a directory, not a cursor file, a fulfilment store or an analytics "
                                + "checkpoint")
        }
        if let handle = FileHandle(forReadingAtPath: path) {
            defer { try? handle.close() }
            let head = [UInt8](handle.readData(ofLength: 16))
            if head.starts(with: Array("SQLite format 3".utf8)) { return .fulfilment }
            if head.first == UInt8(ascii: "{") { return .analytics }
            if head.isEmpty || head.starts(with: Array("cursor v1".utf8)) { return .cursorFiles(shards: 1) }
            throw CursorFailure("\(path) is neither a cursor file, a fulfilment store nor an analytics checkpoint")
        }
        if let shards { return .cursorFiles(shards: shards) }
        let url = URL(fileURLWithPath: path)
        let base = url.lastPathComponent + "."
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.deletingLastPathComponent().path)) ?? []
        let counts = Set(names.filter { $0.hasPrefix(base) }.compactMap { name -> Int? in
            let rest = name.dropFirst(base.count).split(separator: "-")
            guard rest.count == 3, rest[1] == "of", Int(rest[0]) != nil else { return nil }
            return Int(rest[2])
        })
        guard let count = counts.first else {
            throw CursorFailure("no cursor at \(path) (nor \(path).I-of-N shard files; --shards N creates them)")
        }
        guard counts.count == 1 else {
            throw CursorFailure("\(path) has shard files of several counts (\(counts.sorted().map(String.init).joined(separator: ", "))): say which with --shards N")
        }
        return .cursorFiles(shards: count)
    }

    /// Every shard's position in the store.
    package func read(_ store: Store, held: [Int: FileCursor] = [:]) throws -> [Position] {
        switch store {
        case .cursorFiles(let n):
            let files = cursorFiles(n)
            return try files.enumerated().map { i, file in
                // Under the lock, what the held cursor loaded; else the file as it is now.
                Position(shard: i, shards: files.count, name: file, seq: try held[i]?.load() ?? FileCursor.committed(at: file))
            }
        case .fulfilment:
            let rows = try WorkerPositions.fulfilment(databasePath: path)
            return rows.compactMap { row in
                if row.name == "fulfil" { return Position(shard: 0, shards: 1, name: row.name, seq: row.seq) }
                let parts = row.name.dropFirst("fulfil.".count).split(separator: "-")
                guard row.name.hasPrefix("fulfil."), parts.count == 3, parts[1] == "of", let i = Int(parts[0]), let n = Int(parts[2])
                else { return nil }
                return Position(shard: i, shards: n, name: row.name, seq: row.seq)
            }.sorted { ($0.shards, $0.shard) < ($1.shards, $1.shard) }
        case .analytics:
            guard let seqs = try WorkerPositions.analytics(checkpointPath: path) else { throw CursorFailure("no analytics checkpoint at \(path)") }
            return seqs.enumerated().map { Position(shard: $0, shards: seqs.count, name: "shard \($0)", seq: $1) }
        }
    }

    /// The cursor files of `n` shards: PATH itself for one (as both clients name it), else
    /// PATH.I-of-N.
    private func cursorFiles(_ n: Int) -> [String] {
        n == 1 ? [path] : (0..<n).map { "\(path).\($0)-of-\(n)" }
    }

    private func show(_ store: Store, _ positions: [Position]) -> Int32 {
        if json {
            let list: [[String: Any]] = positions.map { ["shard": $0.shard, "shards": $0.shards, "name": $0.name, "seq": $0.seq] }
            let kind = store == .fulfilment ? "fulfilment" : store == .analytics ? "analytics" : "cursor"
            let data = (try? JSONSerialization.data(withJSONObject: ["kind": kind, "path": path, "positions": list], options: [.sortedKeys])) ?? Data()
            FileHandleWriter.standardOutput(String(decoding: data, as: UTF8.self) + "\n")
            return 0
        }
        FileHandleWriter.standardOutput("\(path): \(store.name)\n")
        if positions.isEmpty { FileHandleWriter.standardOutput("  no position yet (the subscriber starts at the oldest retained seq)\n") }
        for p in positions {
            FileHandleWriter.standardOutput("  shard \(p.shard)/\(p.shards)  \(p.name)  seq \(p.seq) (resumes at \(p.seq + 1))\n")
        }
        return 0
    }

    /// The store's lock, or each cursor file (a ``FileCursor`` holds its file's lock).
    private func takeLocks(_ store: Store) throws -> ([PositionLock], [Int: FileCursor]) {
        var cursors: [Int: FileCursor] = [:]
        let lockPath: String
        let what: String
        switch store {
        case .fulfilment: (lockPath, what) = (path, "the fulfilment store")
        case .analytics: (lockPath, what) = (AnalyticsCheckpoint.lockPath(AtomicFile.resolved(path)), "the analytics checkpoint")
        case .cursorFiles(let n):
            for (i, file) in cursorFiles(n).enumerated() where shard == nil || shard == i {
                let result = Result { () throws(SubscriberError) -> FileCursor in try FileCursor(path: file, durable: true) }
                switch result {
                case .success(let cursor): cursors[i] = cursor
                case .failure(let error) where error.code == .cursorInUse:
                    throw CursorFailure("\(error.description): stop it first, then set the cursor")
                case .failure(let error): throw error
                }
            }
            return ([], cursors)
        }
        let result = Result { () throws(PositionLock.Failure) -> PositionLock in try PositionLock(path: lockPath, what: what) }
        switch result {
        case .success(let lock): return ([lock], cursors)
        case .failure(let error): throw CursorFailure(error.description + (error.held ? ": stop the worker first, then set the cursor" : ""))
        }
    }

    private func set(_ store: Store) throws -> Int32 {
        // The position's lock first, held for the whole change: never under a running subscriber,
        // and the positions read under it. A dry run takes none and creates nothing.
        let (locks, cursors) = dryRun ? ([], [:]) : try takeLocks(store)
        defer { withExtendedLifetime(locks) {} }
        var positions = try read(store, held: cursors)
        // A store without rows yet (a worker that never ran): one position per shard, at 0.
        if positions.isEmpty {
            let n = shards ?? controls.count
            positions = (0..<n).map { i in
                Position(shard: i, shards: n, name: store == .fulfilment ? (n == 1 ? "fulfil" : "fulfil.\(i)-of-\(n)") : "shard \(i)", seq: 0)
            }
        }
        if let shard {
            positions = positions.filter { $0.shard == shard }
            if positions.isEmpty { throw CursorFailure("\(path) has no position for shard \(shard)") }
        }
        var targets: [Int64] = []
        for p in positions {
            switch action {
            case .show: return 2
            case .toSeq(let seq): targets.append(seq - 1)
            case .shiftBy(let n):
                let (moved, overflow) = p.seq.addingReportingOverflow(n)
                targets.append(overflow ? (n > 0 ? Int64.max - 1 : 0) : min(Int64.max - 1, max(0, moved)))
            case .toTime(let ms):
                let shardCount = p.shards
                guard controls.count == shardCount else {
                    throw CursorFailure("--to-time asks each shard's daemon: --control must list \(shardCount) endpoint\(shardCount == 1 ? "" : "s"), in shard order")
                }
                let r = try JournalPosition.time(milliseconds: ms).resolve(control: controls[p.shard], curve: curve)
                FileHandleWriter.standardOutput("shard \(p.shard)/\(shardCount): \(Timestamp(milliseconds: ms).rfc3339) is seq \(r.seq)"
                    + (r.beforeRetention ? " (the oldest retained)" : "") + (r.seq > r.lastSeq ? " (nothing received since)" : "") + "\n")
                targets.append(r.seq - 1)
            }
        }
        for (p, target) in zip(positions, targets) {
            let change = target == p.seq ? "unchanged"
                : target < p.seq ? "handles \(p.seq - target) envelope\(p.seq - target == 1 ? "" : "s") again"
                : "skips \(target - p.seq) envelope\(target - p.seq == 1 ? "" : "s")"
            FileHandleWriter.standardOutput("shard \(p.shard)/\(p.shards)  \(p.name)  seq \(p.seq) → \(target) (resumes at \(target + 1); \(change))\n")
        }
        if dryRun {
            FileHandleWriter.standardOutput("dry run: nothing written\n")
            return 0
        }
        switch store {
        case .cursorFiles:
            for (p, target) in zip(positions, targets) { try cursors[p.shard]!.reset(to: target) }
        case .fulfilment:
            for (p, target) in zip(positions, targets) { try WorkerPositions.setFulfilment(databasePath: path, name: p.name, seq: target) }
        case .analytics:
            var seqs = try read(store).map(\.seq)
            for (p, target) in zip(positions, targets) where p.shard < seqs.count { seqs[p.shard] = target }
            try WorkerPositions.setAnalytics(checkpointPath: AtomicFile.resolved(path), shardSeqs: seqs)
        }
        FileHandleWriter.standardOutput("written\n")
        return 0
    }
}
