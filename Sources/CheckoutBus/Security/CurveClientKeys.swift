import Foundation
import ZeroMQ

/// A client's CURVE settings: its own key pair and the daemon's public key, from
/// `--curve-key FILE` (the client's secret key) and `--curve-server FILE` (the daemon's public
/// key), or `CHECKOUTBUS_CURVE_KEY` / `CHECKOUTBUS_CURVE_SERVER`. `Sendable`.
public struct CurveClientKeys: Sendable {
    /// Added to a client's timeout: ZeroMQ gives a refused CURVE handshake no answer, so it looks
    /// like a daemon that is down.
    static let refusalHint = " (with CURVE, a key the daemon refused looks the same: its log names refused keys)"

    public let keys: ZMQCurveKeyPair
    public let serverKey: String

    /// The two flags every client command takes.
    public static let flags: Set<String> = ["curve-key", "curve-server"]

    public static let help = """
          --curve-key FILE     CURVE: this client's secret key (checkoutbus keygen); also $CHECKOUTBUS_CURVE_KEY
          --curve-server FILE  CURVE: the daemon's public key; also $CHECKOUTBUS_CURVE_SERVER
        """

    /// Reads the flags (or the environment); nil when neither is set.
    /// - Throws: a usage error when only one is set, or a key file cannot be read.
    public static func parse(_ args: CommandLineArguments) throws(CommandLineArguments.UsageError) -> CurveClientKeys? {
        let env = ProcessInfo.processInfo.environment
        let keyPath = args.value("curve-key") ?? env["CHECKOUTBUS_CURVE_KEY"]
        let serverPath = args.value("curve-server") ?? env["CHECKOUTBUS_CURVE_SERVER"]
        switch (keyPath, serverPath) {
        case (nil, nil): return nil
        case (let k?, let s?):
            do {
                return CurveClientKeys(keys: try CurveAllowlists.readSecretKey(path: k),
                                       serverKey: try CurveAllowlists.readPublicKey(path: s))
            } catch {
                throw .init("\(error)")
            }
        default:
            throw .init("CURVE needs both --curve-key (this client's secret key) and --curve-server (the daemon's public key)")
        }
    }

    /// Makes `socket` a CURVE client; call before `connect`.
    public func apply(to socket: ZMQSocket) throws { try socket.makeCurveClient(keys, serverKey: serverKey) }
}

/// `checkoutbus keygen NAME`: writes a CURVE key pair as `NAME.key` (secret, mode 0600) and
/// `NAME.pub` (public, 0644), Z85 text. Not `Sendable`; runs on the calling thread.
public struct KeygenCommand {
    public static let help = """
        checkoutbus keygen — write a CURVE key pair for the daemon or a client.

        USAGE: checkoutbus keygen [--force] NAME

          NAME      writes NAME.key (the secret key, mode 0600) and NAME.pub (the public key)
          --force   replace existing files

        The daemon takes its NAME.key as --curve-secret-key; clients take theirs as --curve-key and the
        daemon's NAME.pub as --curve-server. Put a producer's .pub in the daemon's --curve-producers
        directory, a subscriber's in --curve-subscribers (docs/security.md).
        """

    let name: String
    let force: Bool

    public init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try CommandLineArguments(arguments, valued: [], switches: ["force"])
        guard args.positionals.count == 1 else { throw .init("keygen needs one NAME") }
        name = args.positionals[0]
        force = args.has("force")
    }

    public func run() -> Int32 {
        let secretPath = name + ".key"
        let publicPath = name + ".pub"
        if !force, FileManager.default.fileExists(atPath: secretPath) || FileManager.default.fileExists(atPath: publicPath) {
            FileHandleWriter.standardError("checkoutbus keygen: \(secretPath) or \(publicPath) exists; --force replaces them\n")
            return 1
        }
        do {
            let pair = try ZMQCurveKeyPair.generate()
            try write(secretPath, "# CheckoutBus CURVE secret key: keep private\n\(pair.secretKey)\n", mode: 0o600)
            try write(publicPath, "# CheckoutBus CURVE public key\n\(pair.publicKey)\n", mode: 0o644)
            FileHandleWriter.standardOutput("\(pair.publicKey)\n")
            FileHandleWriter.standardError("wrote \(secretPath) (secret, 0600) and \(publicPath)\n")
            return 0
        } catch {
            FileHandleWriter.standardError("checkoutbus keygen: \(error)\n")
            return 1
        }
    }

    private func write(_ path: String, _ text: String, mode: mode_t) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        guard fd >= 0 else { throw DaemonError("cannot write \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        _ = fchmod(fd, mode)
        let bytes = Array(text.utf8)
        guard bytes.withUnsafeBytes({ Foundation.write(fd, $0.baseAddress, $0.count) }) == bytes.count else {
            throw DaemonError("cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }
}
