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
        // Not truncated at `open`: an old key file is emptied only once it is private.
        let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, mode)
        guard fd >= 0 else { throw CurveKeyFileError(.unwritable, "cannot write \(path): \(String(cString: strerror(errno)))") }
        // `open`'s mode applies only to a file it creates: over an old key file, `fchmod` is what
        // makes the secret 0600, so a failure is refused before the file is touched.
        guard fchmod(fd, mode) == 0, ftruncate(fd, 0) == 0 else {
            let code = errno
            close(fd)
            let reason = String(cString: strerror(code))
            throw CurveKeyFileError(.unwritable, "cannot make \(path) private and empty: \(reason)")
        }
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { Foundation.write(fd, $0.baseAddress, $0.count) }
        let writeError = written < 0 ? String(cString: strerror(errno)) : written < bytes.count ? "short write" : nil
        // A write error the file system defers (a full disk on some) is reported by `close`.
        let closed = close(fd) == 0
        let closeError = closed ? nil : String(cString: strerror(errno))
        if let reason = writeError ?? closeError {
            throw CurveKeyFileError(.unwritable, "cannot write \(path): \(reason)")
        }
    }
}
