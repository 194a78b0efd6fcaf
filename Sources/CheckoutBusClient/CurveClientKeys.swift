import Foundation
import ZeroMQ
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// A client's CURVE settings: its own key pair and the daemon's public key, from
/// `--curve-key FILE` (the client's secret key) and `--curve-server FILE` (the daemon's public
/// key), or `CHECKOUTBUS_CURVE_KEY` / `CHECKOUTBUS_CURVE_SERVER`. `Sendable`.
public struct CurveClientKeys: Sendable {
    /// Added to a client's timeout: ZeroMQ gives a refused CURVE handshake no answer, so it looks
    /// like a daemon that is down.
    package static let refusalHint = " (with CURVE, a key the daemon refused looks the same: its log names refused keys)"

    public let keys: ZMQCurveKeyPair
    public let serverKey: String

    /// `--curve-key FILE`: this client's secret key.
    public static let keyOption = CommandOption(
        "curve-key", "FILE", help: "CURVE: this client's secret key (checkoutbus keygen)", environment: "CHECKOUTBUS_CURVE_KEY")
    /// `--curve-server FILE`: the daemon's public key.
    public static let serverOption = CommandOption(
        "curve-server", "FILE", help: "CURVE: the daemon's public key", environment: "CHECKOUTBUS_CURVE_SERVER")
    /// The two flags every client command takes.
    public static let options = [keyOption, serverOption]
    public static let flags = Set(options.map(\.name))

    /// Their lines in `--help`.
    public static var help: String { String(options.map(\.helpEntry).joined().dropLast()) }

    /// Reads the flags (or the environment); nil when neither is set.
    /// - Throws: a usage error when only one is set, or a key file cannot be read.
    public static func parse(_ args: CommandLineArguments) throws(CommandLineArguments.UsageError) -> CurveClientKeys? {
        let keyPath = args.value(keyOption)
        let serverPath = args.value(serverOption)
        switch (keyPath, serverPath) {
        case (nil, nil): return nil
        case (let k?, let s?):
            do {
                return CurveClientKeys(keys: try ZMQCurveKeyPair.readSecretKey(path: k),
                                       serverKey: try ZMQCurveKeyPair.readPublicKey(path: s))
            } catch {
                throw .init(.invalidValue, "\(error)")
            }
        default:
            throw .init("CURVE needs both --curve-key (this client's secret key) and --curve-server (the daemon's public key)")
        }
    }

    /// Makes `socket` a CURVE client; call before `connect`.
    public func apply(to socket: ZMQSocket) throws { try socket.makeCurveClient(keys, serverKey: serverKey) }
}
