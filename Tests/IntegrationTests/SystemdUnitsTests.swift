import Foundation
import Testing

/// The systemd units in deploy/: each passes `systemd-analyze verify` without a word, and
/// `systemd-analyze security` rates it OK (2.0 or less), offline — nothing is started under
/// systemd here (README, "Running it for real").
@Suite("systemd units", .timeLimit(.minutes(4)))
struct SystemdUnitsTests {
    static let analyze = "/usr/bin/systemd-analyze"

    static func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        try runSystemTool(analyze, arguments, package: "systemd")
    }

    @Test("every unit verifies cleanly (its binaries as built) and rates OK, exposure 2.0 or less",
          .enabled(if: FileManager.default.isExecutableFile(atPath: analyze), "systemd-analyze is not installed (scripts/install-deps)"))
    func units() throws {
        let deploy = Products.repositoryRoot.appendingPathComponent("deploy")
        let units = try FileManager.default.contentsOfDirectory(atPath: deploy.path).filter { $0.hasSuffix(".service") }.sorted()
        #expect(units.count >= 6, "\(units)")
        let dir = TestScratch.url("units-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        for target in try FileManager.default.contentsOfDirectory(atPath: deploy.path).filter({ $0.hasSuffix(".target") }) {
            try FileManager.default.copyItem(at: deploy.appendingPathComponent(target), to: dir.appendingPathComponent(target))
        }
        for unit in units {
            // verify checks that ExecStart names an executable: the ones this build made.
            let text = try String(contentsOf: deploy.appendingPathComponent(unit), encoding: .utf8)
                .replacingOccurrences(of: "/usr/local/bin/", with: Products.directory.path + "/")
            let copy = dir.appendingPathComponent(unit)
            try text.write(to: copy, atomically: true, encoding: .utf8)
            let verify = try Self.run(["verify", copy.path])
            #expect(verify.status == 0 && verify.output.isEmpty, "\(unit): \(verify.output)")
            let security = try Self.run(["security", "--offline=true", "--threshold=20", deploy.appendingPathComponent(unit).path])
            let overall = security.output.split(separator: "\n").last.map(String.init) ?? ""
            #expect(security.status == 0 && overall.contains(" OK"), "\(unit): \(overall)")
        }
    }
}
