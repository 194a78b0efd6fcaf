import Foundation

/// The files of `Tests/Golden`, read by the codec tests (the Python client reads the same files).
enum GoldenFile {
    /// The file's text; empty when it cannot be read (a test that expects its lines then fails).
    static func text(_ name: String) -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return (try? String(contentsOf: root.appendingPathComponent("Tests/Golden/" + name), encoding: .utf8)) ?? ""
    }

    /// A `name<TAB>bytes` file as a dictionary.
    static func tsv(_ name: String) -> [String: String] {
        var out: [String: String] = [:]
        for line in text(name).split(separator: "\n") {
            let parts = line.split(separator: "\t", maxSplits: 1).map(String.init)
            if parts.count == 2 { out[parts[0]] = parts[1] }
        }
        return out
    }
}
