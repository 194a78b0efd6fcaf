/// Why the journal or its data directory refused: a file it could not write or read, or a
/// directory another daemon holds or another shard owns.
///
/// `Sendable`. A struct, so codes can be added without breaking a `switch`: compare ``code``
/// with the `static let`s of ``Code``.
package struct JournalError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, for code to act on; ``description`` says where, for people.
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        package let description: String
        private init(_ description: String) { self.description = description }

        /// A record, segment, header or the seq reservation could not be written (a full disk,
        /// say). A failed batch write is retried; nothing of it was published.
        package static let notWritable = Code("not_writable")
        /// A segment or file could not be opened or read back.
        package static let notReadable = Code("not_readable")
        /// Another process holds the data directory's `LOCK`.
        package static let locked = Code("locked")
        /// The data directory belongs to another shard (`<data-dir>/shard`).
        package static let otherShard = Code("other_shard")
    }

    package let code: Code
    package let description: String

    package init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }
}
