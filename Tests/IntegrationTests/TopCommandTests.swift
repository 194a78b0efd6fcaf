import Foundation
import Testing
import ZeroMQ

#if canImport(Glibc)
import Glibc
#endif

/// A detached tmux session on a server of its own (`tmux -L`), so a test never touches anyone's
/// tmux; killed with its server when the test ends. tmux must be installed (scripts/install-deps).
final class TmuxSession {
    let server = "cb-test-\(UUID().uuidString.prefix(8))"

    init(width: Int = 160, height: Int = 50) throws {
        // A plain shell, with a prompt that cannot be mistaken for top's output.
        try run(["new-session", "-d", "-x", String(width), "-y", String(height), "-s", "top",
                 "env PS1='$ ' TERM=xterm sh"])
    }

    /// Runs `tmux -L SERVER ARGUMENTS` to completion and returns its output.
    ///
    /// Spawned and waited for directly, not with Foundation's `Process`: the server tmux forks
    /// keeps a descriptor the client inherited open, and `Process` then never sees the client end.
    @discardableResult
    func run(_ arguments: [String]) throws -> String {
        let outURL = TestScratch.url("\(server)-\(UUID().uuidString).out")
        defer { try? FileManager.default.removeItem(at: outURL) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outURL.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // A clean signal state: the test runner's threads block signals, and a tmux server that
        // inherited that mask would never see its children end nor exit on kill-server.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = (["tmux", "-L", server] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawnp(&pid, "tmux", &actions, &attributes, argv, environ)
        guard rc == 0 else { throw HarnessError("tmux could not be started (\(String(cString: strerror(rc)))): scripts/install-deps installs it") }
        var status: Int32 = 0
        let deadline = Date().addingTimeInterval(10)
        while waitpid(pid, &status, WNOHANG) == 0 {
            guard Date() < deadline else {
                kill(pid, SIGKILL)
                waitpid(pid, &status, 0)
                throw HarnessError("tmux \(arguments.first ?? "") did not finish in 10 s")
            }
            usleep(5_000)
        }
        let text = (try? String(contentsOf: outURL, encoding: .utf8)) ?? ""
        guard status & 0x7F == 0, (status >> 8) & 0xFF == 0 else {
            throw HarnessError("tmux \(arguments.first ?? "") failed (status \(status)): \(text)")
        }
        return text.hasSuffix("\n") ? String(text.dropLast()) : text
    }

    /// Types `text` literally, then Enter if asked.
    func type(_ text: String, enter: Bool = true) throws {
        try run(["send-keys", "-t", "top", "-l", text])
        if enter { try run(["send-keys", "-t", "top", "Enter"]) }
    }

    func key(_ key: String) throws { try run(["send-keys", "-t", "top", key]) }

    /// What the pane shows now, a line each.
    func capture() throws -> [String] { try run(["capture-pane", "-p", "-t", "top"]).components(separatedBy: "\n") }

    /// Captures until `done` holds, or fails after `timeout` seconds with the last capture.
    @discardableResult
    func waitFor(_ what: String, timeout: Double = 30, _ done: ([String]) -> Bool) throws -> [String] {
        let deadline = Date().addingTimeInterval(timeout)
        var last: [String] = []
        while Date() < deadline {
            last = try capture()
            if done(last) { return last }
            usleep(100_000)
        }
        throw HarnessError("the pane never showed \(what); last capture:\n\(last.joined(separator: "\n"))")
    }

    deinit { _ = try? run(["kill-server"]) }
}

/// `checkoutbus top` against a daemon under a flood: in a real terminal (tmux) and through a pipe.
@Suite("checkoutbus top", .serialized, .timeLimit(.minutes(5)))
struct TopCommandTests {
    /// The number after `label` on the line starting with it (`events in/s   1234.5 …`).
    static func value(_ lines: [String], _ label: String) -> Double? {
        guard let line = lines.first(where: { $0.hasPrefix(label) }) else { return nil }
        return line.dropFirst(label.count).split(separator: " ").first.flatMap { Double($0) }
    }

    /// The `ops-tail` row of the subscribers table, split into columns (name, seen, last seq, lag, …).
    static func subscriberRow(_ lines: [String], _ name: String) -> [String]? {
        guard lines.contains(where: { $0.hasPrefix("SUBSCRIBER") && $0.contains("LAG") }),
            let row = lines.first(where: { $0.hasPrefix("  \(name) ") })
        else { return nil }
        return row.split(separator: " ").map(String.init)
    }

    /// The codes listed in the failures table.
    static func failureCodes(_ lines: [String]) -> [String] {
        guard let header = lines.firstIndex(where: { $0.hasPrefix("FAILURES") }) else { return [] }
        return lines[(header + 1)...].prefix { $0.hasPrefix("  ") && $0 != "  none" }
            .compactMap { $0.split(separator: " ").first.map(String.init) }
    }

    @Test("under a flood, top in a terminal shows moving rates and a named subscriber's lag; q and Ctrl-C restore the terminal")
    func liveScreen() throws {
        let daemon = try DaemonProcess()
        let recording = TestScratch.url("top-\(UUID().uuidString).jsonl")
        defer { try? FileManager.default.removeItem(at: recording) }
        let subscriber = try RecorderProcess(publish: daemon.publish, control: daemon.control, file: recording,
                                             name: "ops-tail")
        let flood = try startFlood(daemon, ["--rate", "2000", "--duration", "120", "--checkouts", "100000"])
        defer {
            kill(flood.processIdentifier, SIGKILL)
            reap(flood)
            subscriber.kill9()
        }
        let tmux = try TmuxSession()
        try tmux.waitFor("the shell's prompt") { $0.contains { $0.hasPrefix("$") } }
        let top = "'\(Products.url("checkoutbus").path)' top --control '\(daemon.control)' --interval 1"
        // The shell reports top's status and whether the terminal's settings are back as they were.
        try tmux.type(#"s=$(stty -g); "# + top
            + #"; echo "top-exit=$? restored=$([ "$(stty -g)" = "$s" ] && echo yes || echo no)""#)

        let first = try tmux.waitFor("a non-zero events/s and ops-tail's lag") { lines in
            (Self.value(lines, "events in/s") ?? 0) > 0 && (Self.value(lines, "published/s") ?? 0) > 0
                // ops-tail has reported a seq it handled a moment ago, and its lag is shown.
                && Self.subscriberRow(lines, "ops-tail").map {
                    $0.count >= 5 && $0[1].hasSuffix("s") && (Int($0[2]) ?? 0) > 0 && Int($0[3]) != nil
                } == true
                && Self.failureCodes(lines).count > 0  // the flood's failures, counted by stable code
        }
        #expect(first.contains { $0.hasPrefix("FAILURES") } && first.contains { $0.hasPrefix("DEAD LETTERS") })
        #expect(first.contains { $0.hasPrefix("journal") && $0.contains("fsync p99") })
        let firstSeq = first.first { $0.hasPrefix("seq ") }
        // A refresh later the daemon's seq has moved on, and so has what the view shows.
        let later = try tmux.waitFor("a refresh with another seq") { lines in
            lines.first { $0.hasPrefix("seq ") }.map { $0 != firstSeq } == true
                && (Self.value(lines, "events in/s") ?? 0) > 0
        }
        #expect(Self.subscriberRow(later, "ops-tail") != nil)

        // A tail that exits is gone at once (its final report): hidden until g shows gone ones.
        // (Under the flood it may print its envelope before its subscription is confirmed: no
        // waiting for the subscribed line, only for its exit.)
        let short = try runTool("checkoutbus", ["tail", "--from", daemon.publish, "--control", daemon.control, "--name", "short-tail",
                                                "--count", "1", "--format", "json", "--timeout", "30"], timeout: 40)
        #expect(short.status == 0, "\(short.output)")
        try tmux.waitFor("a refresh without the exited tail") { lines in
            lines.first { $0.hasPrefix("seq ") }.map { $0 != firstSeq } == true && !lines.contains { $0.contains("short-tail") }
                && Self.subscriberRow(lines, "ops-tail") != nil
        }
        try tmux.key("g")
        try tmux.waitFor("the exited tail, marked gone") { $0.contains { $0.hasPrefix("  short-tail (gone)") } }

        // s sorts: the header says by what.
        try tmux.key("s")
        try tmux.waitFor("the sort changed to total") { $0.first?.contains("sort: total") == true }

        try tmux.key("q")
        let after = try tmux.waitFor("top's exit") { $0.contains { $0.hasPrefix("top-exit=") } }
        #expect(after.contains("top-exit=0 restored=yes"), "\(after)")
        // Off the alternate screen: top's tables are gone with it.
        #expect(!after.contains { $0.hasPrefix("SUBSCRIBER") || $0.hasPrefix("events in/s") })

        // Ctrl-C (SIGINT) ends it the same way.
        try tmux.type("clear")
        try tmux.waitFor("a cleared pane") { !$0.contains { $0.hasPrefix("top-exit=") } }
        try tmux.type(#"s=$(stty -g); "# + top
            + #"; echo "top-exit=$? restored=$([ "$(stty -g)" = "$s" ] && echo yes || echo no)""#)
        try tmux.waitFor("top's screen again") { $0.contains { $0.hasPrefix("SUBSCRIBER") } }
        try tmux.key("C-c")
        let interrupted = try tmux.waitFor("top's exit after Ctrl-C") { $0.contains { $0.hasPrefix("top-exit=") } }
        #expect(interrupted.contains("top-exit=0 restored=yes"), "\(interrupted)")
        #expect(!interrupted.contains { $0.hasPrefix("SUBSCRIBER") })
    }

    @Test("without a terminal top writes one line per interval, and a daemon that does not answer shows as no answer")
    func lineFallback() throws {
        let daemon = try DaemonProcess()
        // A control endpoint that accepts connections and never answers.
        let context = try ZMQContext()
        let silent = try ZMQSocket(context: context, type: .router)
        try silent.setLinger(milliseconds: 0)
        try silent.bind("tcp://127.0.0.1:*")
        let silentEndpoint = try silent.lastEndpoint
        let p = Process()
        p.executableURL = Products.url("checkoutbus")
        p.arguments = ["top", "--control", "\(daemon.control),\(silentEndpoint)", "--interval", "0.5"]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.start()
        defer { if p.isRunning { kill(p.processIdentifier, SIGKILL); reap(p) } }
        let reader = PipeLineReader(out.fileHandleForReading)
        var lines: [String] = []
        for _ in 0..<3 {
            lines.append(try #require(reader.readLine(timeout: 20), "a line per interval; got \(lines)"))
        }
        for line in lines {
            #expect(line.hasPrefix("shards=2 answering=1 events_in_per_s="), "\(line)")
            #expect(line.contains("no_answer=\(silentEndpoint)"), "\(line)")
            #expect(!line.contains("\u{1B}"), "no escape sequences in a pipe: \(line)")
        }
        kill(p.processIdentifier, SIGTERM)
        #expect(waitForExit(p, timeout: 10) == 0)

        let once = try runTool("checkoutbus", ["top", "--control", daemon.control, "--interval", "0.2", "--once", "--json"])
        #expect(once.status == 0)
        let report = try #require(try JSONSerialization.jsonObject(with: Data(once.output.utf8)) as? [String: Any])
        #expect(report.int("answering") == 1 && report["events_in_per_s"] is NSNumber)
    }
}
