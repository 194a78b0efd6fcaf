import Foundation

/// Every file and directory the integration tests make lives under one folder per test process,
/// `$TMPDIR/cb-tests-PID`, removed when the process exits. A run that was killed leaves its folder
/// behind; the next run removes folders whose process is gone. (A daemon's data directory holds
/// preallocated journal segments: left in place, a few hundred test daemons fill a disk.)
enum TestScratch {
    static let root: URL = {
        let tmp = FileManager.default.temporaryDirectory
        removeAbandoned(in: tmp)
        let root = tmp.appendingPathComponent("cb-tests-\(getpid())")
        try? FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        atexit { try? FileManager.default.removeItem(at: TestScratch.root) }
        return root
    }()

    /// A path under this process's folder; nothing is created.
    static func url(_ name: String) -> URL { root.appendingPathComponent(name) }

    private static func removeAbandoned(in tmp: URL) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: tmp.path) else { return }
        for name in names where name.hasPrefix("cb-tests-") {
            guard let pid = pid_t(name.dropFirst("cb-tests-".count)), pid != getpid() else { continue }
            if kill(pid, 0) != 0 && errno == ESRCH {
                try? FileManager.default.removeItem(at: tmp.appendingPathComponent(name))
            }
        }
    }
}
