/// A value inside one of the pipeline's parsed documents.
///
/// Does not keep its document alive (no reference counting as events move through the pipeline):
/// a `JSONRef` is valid while its document is and until the document parses again. The pipeline's
/// documents belong to its processor and decoder; elsewhere, hold the document (or use
/// `withExtendedLifetime`) for as long as its refs are read.
public struct JSONRef {
    public unowned(unsafe) let doc: JSONDocument
    public let token: Int

    public init(_ doc: JSONDocument, _ token: Int) {
        self.doc = doc
        self.token = token
    }
}
