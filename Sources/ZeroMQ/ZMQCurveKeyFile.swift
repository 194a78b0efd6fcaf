import Foundation

/// A CURVE key file that cannot be read or holds no key. `Sendable`.
public struct CurveKeyFileError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Key files as `checkoutbus keygen` writes them: Z85 text, one key on the first line that is not a
/// `#` comment. The daemon and clients read them the same way.
extension ZMQCurveKeyPair {
    /// Reads a secret key file (`checkoutbus keygen`'s `.key`) and derives its public key.
    /// - Throws: ``CurveKeyFileError`` when the file cannot be read or holds no secret key.
    public static func readSecretKey(path: String) throws(CurveKeyFileError) -> ZMQCurveKeyPair {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw CurveKeyFileError("cannot read the CURVE secret key \(path)")
        }
        guard let keys = try? ZMQCurveKeyPair(secretKey: readKey(text)) else {
            throw CurveKeyFileError("\(path) does not hold a CURVE secret key (40 characters of Z85)")
        }
        return keys
    }

    /// Reads a public key file (`.pub`).
    /// - Throws: ``CurveKeyFileError`` when the file cannot be read or holds no public key.
    public static func readPublicKey(path: String) throws(CurveKeyFileError) -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw CurveKeyFileError("cannot read the CURVE public key \(path)")
        }
        let key = readKey(text)
        guard ZMQCurveKeyPair.isZ85Key(key) else { throw CurveKeyFileError("\(path) does not hold a CURVE public key") }
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
