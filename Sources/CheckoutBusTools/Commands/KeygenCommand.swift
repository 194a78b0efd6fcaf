import CheckoutBusClient
import Foundation
import ZeroMQ
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// `checkoutbus keygen NAME`: writes a CURVE key pair as `NAME.key` (secret, mode 0600) and
/// `NAME.pub` (public, 0644), Z85 text. Not `Sendable`; runs on the calling thread.
package struct KeygenCommand {
    static let force = CommandOption("force", help: "replace existing files")

    package static let spec = CommandSpec(
        "checkoutbus keygen", summary: "write a CURVE key pair for the daemon or a client.",
        operands: "NAME",
        operandHelp: [.init("NAME", "writes NAME.key (the secret key, mode 0600) and NAME.pub (the public key)")],
        options: [force],
        notes: """
            The daemon takes its NAME.key as --curve-secret-key; clients take theirs as --curve-key and the
            daemon's NAME.pub as --curve-server. Put a producer's .pub in the daemon's --curve-producers
            directory, a subscriber's in --curve-subscribers (docs/security.md).
            """)
    package static var help: String { spec.help }

    package let name: String
    package let force: Bool

    package init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try Self.spec.parse(arguments)
        guard args.positionals.count == 1 else { throw .init("keygen needs one NAME") }
        name = args.positionals[0]
        force = args.has(Self.force)
    }

    package func run() -> Int32 {
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
        guard fd >= 0 else { throw CurveKeyFileError(.unwritable, "cannot write \(path): \(String(cString: strerror(errno)))") }
        // `open`'s mode applies only to a file it creates: over an old key file, `fchmod` is what
        // makes the secret 0600, so a failure is refused before a byte of the key is written.
        guard fchmod(fd, mode) == 0 else {
            let code = errno
            close(fd)
            throw CurveKeyFileError(.unwritable, "cannot set the mode of \(path): \(String(cString: strerror(code)))")
        }
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { Foundation.write(fd, $0.baseAddress, $0.count) }
        let code = errno
        // A write error the file system defers (a full disk on some) is reported by `close`.
        guard close(fd) == 0, written == bytes.count else {
            throw CurveKeyFileError(.unwritable, "cannot write \(path): \(String(cString: strerror(written == bytes.count ? errno : code)))")
        }
    }
}
