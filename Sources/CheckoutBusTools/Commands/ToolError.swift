/// A tool's or benchmark's own failure: a peer that did not answer, an unexpected reply, a file it
/// could not use. The description says what and where, for people. `Sendable`.
package struct ToolError: Error, CustomStringConvertible, Sendable {
    package let description: String

    package init(_ description: String) { self.description = description }
}
