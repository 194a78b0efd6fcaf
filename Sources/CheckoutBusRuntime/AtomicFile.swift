#if canImport(Glibc)
import Glibc
#endif

/// Whole-file reads, and replacement by write-to-temporary + rename. `Sendable` (no state).
public enum AtomicFile {
    /// `path` with its symbolic links resolved (`realpath`): the file a link names, or, for a file
    /// not there yet, its directory resolved with its name. As given when neither resolves. A file
    /// kept by replacement (``write(_:to:durable:)``) and locked beside itself (`PATH.lock`) is used
    /// by this name, so a link to it is the same file and the same lock, and stays a link.
    public static func resolved(_ path: String) -> String { resolved(path, links: 8) }

    private static func resolved(_ path: String, links: Int) -> String {
        if let real = realpath(path, nil) {
            defer { free(real) }
            return String(cString: real)
        }
        // A link to a file not there yet: the file it names (so the first write makes it there,
        // leaving the link a link).
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink(path, &buffer, buffer.count - 1)
        if n > 0, links > 0 {
            let target = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let linkDirectory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
            let named = target.hasPrefix("/") ? target : (linkDirectory.isEmpty ? "" : linkDirectory) + "/" + target
            if named != path { return resolved(named, links: links - 1) }
        }
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { path[..<$0].isEmpty ? "/" : String(path[..<$0]) } ?? "."
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        guard let real = realpath(directory, nil) else { return path }
        defer { free(real) }
        let base = String(cString: real)
        return base == "/" ? "/" + name : base + "/" + name
    }

    /// The file's bytes, or nil when it does not exist.
    public static func read(_ path: String) throws(AtomicFileError) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw AtomicFileError(.unreadable, "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw AtomicFileError(.unreadable, "cannot read \(path): \(String(cString: strerror(errno)))")
            }
            if n == 0 { return out }
            out.append(contentsOf: chunk[0..<n])
        }
    }

    /// Writes `bytes` to `path.tmp`, then renames it over `path`. With `durable`, the file is
    /// `fsync`ed before the rename and the directory after it.
    public static func write(_ bytes: [UInt8], to path: String, durable: Bool) throws(AtomicFileError) {
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw AtomicFileError(.unwritable, "cannot create \(temporary): \(String(cString: strerror(errno)))") }
        var failure: String?
        bytes.withUnsafeBytes { buffer in
            var off = 0
            while off < buffer.count {
                let n = Glibc.write(fd, buffer.baseAddress! + off, buffer.count - off)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = "cannot write \(temporary): \(String(cString: strerror(errno)))"
                    return
                }
                off += n
            }
        }
        if failure == nil && durable && fsync(fd) != 0 {
            failure = "cannot sync \(temporary): \(String(cString: strerror(errno)))"
        }
        // A write's error may be reported only by close (NFS, quotas): the file is not known written.
        let closed = close(fd) == 0 ? Failpoints.hit("file.close") : errno
        if let closed, failure == nil {
            failure = "cannot close \(temporary): \(String(cString: strerror(closed)))"
        }
        if let failure {
            unlink(temporary)
            throw AtomicFileError(.unwritable, failure)
        }
        guard rename(temporary, path) == 0 else {
            throw AtomicFileError(.notReplaced, "cannot rename \(temporary) to \(path): \(String(cString: strerror(errno)))")
        }
        if durable {
            let slash = path.lastIndex(of: "/")
            let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
            if let e = syncDirectory(directory) {
                throw AtomicFileError(.notSynced, "renamed \(temporary) to \(path), but cannot sync \(directory): \(String(cString: strerror(e)))")
            }
        }
    }

    /// `fsync`s a directory, so that names created, renamed or removed in it survive a crash.
    /// - Returns: nil, or the `errno` of the failed `open` or `fsync` (failpoint `file.dirsync`).
    public static func syncDirectory(_ directory: String) -> Int32? {
        if let injected = Failpoints.hit("file.dirsync") { return injected }
        let dfd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dfd >= 0 else { return errno }
        defer { close(dfd) }
        return fsync(dfd) == 0 ? nil : errno
    }
}

/// A file that cannot be read or replaced: the path and the system's reason.
///
/// `Sendable`. A struct, so codes can be added without breaking a `switch`: compare ``code`` with
/// the `static let`s of ``Code``.
public struct AtomicFileError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, for code to act on; ``description`` names the file and the system's reason.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// The file exists but cannot be opened or read.
        public static let unreadable = Code("unreadable")
        /// The temporary file cannot be created, written or synced (the file is unchanged).
        public static let unwritable = Code("unwritable")
        /// The temporary file cannot be renamed over the file (the file is unchanged).
        public static let notReplaced = Code("not_replaced")
        /// The file was replaced, but its directory could not be synced: after a crash the old
        /// file may be back. Nothing may be taken as durable on the strength of this write.
        public static let notSynced = Code("not_synced")
    }

    public let code: Code
    public let description: String

    public init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }
}
