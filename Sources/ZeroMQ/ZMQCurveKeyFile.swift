import Foundation

/// A CURVE key file that cannot be read or written, or holds no key.
///
/// `Sendable`. A struct, so codes can be added without breaking a `switch`: compare ``code`` with
/// the `static let`s of ``Code``; ``description`` names the file.
public struct CurveKeyFileError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, for code to act on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// The file cannot be read.
        public static let unreadable = Code("unreadable")
        /// The file holds no key of the kind asked for.
        public static let notAKey = Code("not_a_key")
        /// A key file cannot be written (`checkoutbus keygen`).
        public static let unwritable = Code("unwritable")
    }

    public let code: Code
    public let description: String

    public init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }
}

/// Key files as `checkoutbus keygen` writes them: Z85 text, one key on the first line that is not a
/// `#` comment. The daemon and clients read them the same way.
extension ZMQCurveKeyPair {
    /// Reads a secret key file (`checkoutbus keygen`'s `.key`) and derives its public key.
    /// - Throws: ``CurveKeyFileError`` when the file cannot be read or holds no secret key.
    public static func readSecretKey(path: String) throws(CurveKeyFileError) -> ZMQCurveKeyPair {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw CurveKeyFileError(.unreadable, "cannot read the CURVE secret key \(path)")
        }
        guard let keys = try? ZMQCurveKeyPair(secretKey: readKey(text)) else {
            throw CurveKeyFileError(.notAKey, "\(path) does not hold a CURVE secret key (40 characters of Z85)")
        }
        return keys
    }

    /// Reads a public key file (`.pub`).
    /// - Throws: ``CurveKeyFileError`` when the file cannot be read or holds no public key.
    public static func readPublicKey(path: String) throws(CurveKeyFileError) -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw CurveKeyFileError(.unreadable, "cannot read the CURVE public key \(path)")
        }
        let key = readKey(text)
        guard ZMQCurveKeyPair.isZ85Key(key) else { throw CurveKeyFileError(.notAKey, "\(path) does not hold a CURVE public key") }
        return key
    }

    /// The key in a key file: its first line that is not a `#` comment, trimmed.
    public static func readKey(_ text: String) -> String {
        for line in text.split(separator: "\n") {
            let t = line.trimmingCharacters(in: .whitespaces)
            if !t.isEmpty && !t.hasPrefix("#") { return t }
        }
        return ""
    }
}
