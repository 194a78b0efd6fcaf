import Foundation
import Testing
import ZeroMQ

/// Key files that cannot be used say why, with a code and the message the tools print.
@Suite("CURVE key files: error codes")
struct CurveKeyFileErrorTests {
    @Test("a missing file is unreadable; a file without a key is not_a_key")
    func codes() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("cb-key-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect {
            _ = try ZMQCurveKeyPair.readSecretKey(path: path)
        } throws: { error in
            (error as? CurveKeyFileError).map { $0.code == .unreadable && $0.description == "cannot read the CURVE secret key \(path)" } ?? false
        }
        try "# no key here\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect {
            _ = try ZMQCurveKeyPair.readPublicKey(path: path)
        } throws: { error in
            (error as? CurveKeyFileError).map { $0.code == .notAKey && $0.description == "\(path) does not hold a CURVE public key" } ?? false
        }
    }
}
