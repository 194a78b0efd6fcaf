/// A daemon failure that is neither a libzmq error (``ZMQError``) nor the journal's
/// (``JournalError``): a key file, a metrics address, a pipe, a stop that could not drain.
///
/// `Sendable`. A struct, so codes can be added without breaking a `switch`: compare ``code``
/// with the `static let`s of ``Code``.
package struct DaemonError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, for code to act on; ``description`` says where, for people.
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        package let description: String
        private init(_ description: String) { self.description = description }

        /// A file or directory the daemon was pointed at could not be read or is not what it
        /// should be (CURVE keys, allowlists).
        package static let notReadable = Code("not_readable")
        /// A setting's value cannot be used (an address that does not resolve, say).
        package static let badSetting = Code("bad_setting")
        /// A socket, pipe or descriptor could not be made or bound.
        package static let noResource = Code("no_resource")
        /// Stopping with events the journal could not take: they were neither published nor
        /// acknowledged.
        package static let notDrained = Code("not_drained")
        /// A tool's or benchmark's own failure (a peer that did not answer, an unexpected reply).
        package static let failed = Code("failed")
    }

    package let code: Code
    package let description: String

    package init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }

    /// A tool's or benchmark's own failure (``Code/failed``).
    package init(_ description: String) { self.init(.failed, description) }
}
