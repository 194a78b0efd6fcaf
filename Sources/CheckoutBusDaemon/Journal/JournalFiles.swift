#if canImport(Glibc)
import Glibc
#endif
import CFileIO
import CheckoutBusRuntime

/// The file operations the journal's parts share: making its directory, a file's size, a range
/// of a file's bytes, syncing a directory, and whether direct writes are taken.
///
/// Stateless (no instances); its functions may be called from any thread.
enum JournalFiles {
    /// Creates `path` and any directory above it that is missing.
    static func makeDirectory(_ path: String) throws {
        var current = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            current += "/" + part
            if mkdir(current, 0o750) != 0 && errno != EEXIST {
                throw JournalError(.notWritable, "cannot create directory \(path): \(String(cString: strerror(errno)))")
            }
        }
    }

    /// Whether `directory`'s file system takes a direct write (`O_DIRECT`, 4 KiB aligned), tried
    /// on a scratch file.
    /// - Returns: nil when it does, else why not, and whether that is a refusal: `EINVAL` (no
    ///   `O_DIRECT` there, or not at this alignment), which the page cache answers. Any other
    ///   failure (a full disk, a read-only or immutable directory, `EIO`) would fail a write through
    ///   the page cache too, and says nothing about direct writes once it clears.
    static func probeDirectWrites(in directory: String) -> (refused: Bool, reason: String)? {
        let path = directory + "/.direct-probe"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | cb_o_direct(), 0o600)
        guard fd >= 0 else {
            let code = errno
            return (code == EINVAL, "open: " + String(cString: strerror(code)))
        }
        defer {
            // A scratch file: a failed close or unlink loses nothing (the next start truncates it).
            Glibc.close(fd)
            unlink(path)
        }
        let block = UnsafeMutableRawPointer.allocate(byteCount: SegmentAppender.blockSize, alignment: SegmentAppender.blockSize)
        defer { block.deallocate() }
        block.initializeMemory(as: UInt8.self, repeating: 0, count: SegmentAppender.blockSize)
        // A test seam (docs/durability.md, "Failpoints"): the probe's write fails with an errno.
        if let injected = Failpoints.hit("journal.direct-probe") {
            return (injected == EINVAL, "pwrite: " + String(cString: strerror(injected)))
        }
        let n = pwrite(fd, block, SegmentAppender.blockSize, 0)
        if n == SegmentAppender.blockSize { return nil }
        let code = n < 0 ? errno : 0
        return (code == EINVAL, "pwrite: " + (n < 0 ? String(cString: strerror(code)) : "short write"))
    }

    /// `count` bytes of a file from `from`, fewer only where the file ends.
    /// - Throws: ``JournalError`` (`not_readable`) when the file cannot be opened or read: recovery
    ///   decides what to cut or remove from these bytes, so an error is never taken for a short file.
    static func readRange(_ path: String, from: Int, count: Int) throws -> [UInt8] {
        guard count > 0 else { return [] }
        let rfd = open(path, O_RDONLY | O_CLOEXEC)
        guard rfd >= 0 else { throw notReadable("open", path) }
        defer { Glibc.close(rfd) }  // read-only: nothing of ours is lost if close fails
        return try read(rfd, path: path, from: from, count: count, failpoint: "journal.read-range")
    }

    /// `count` bytes of the open file `fd` (the file at `path`, named in an error) from `from`,
    /// fewer only where the file ends; `EINTR` is retried.
    /// - Throws: ``JournalError`` (`not_readable`) when a read fails, or `failpoint` injects a
    ///   failure (docs/durability.md, "Failpoints").
    static func read(_ fd: Int32, path: String, from: Int, count: Int, failpoint: StaticString) throws -> [UInt8] {
        if let injected = Failpoints.hit(failpoint) { throw notReadable("read", path, injected) }
        var out = [UInt8](repeating: 0, count: count)
        var got = 0
        var failure: Int32 = 0
        out.withUnsafeMutableBytes { b in
            while got < count {
                let r = pread(fd, b.baseAddress! + got, count - got, off_t(from + got))
                if r < 0 && errno == EINTR { continue }
                if r < 0 { failure = errno }
                if r <= 0 { break }
                got += r
            }
        }
        if failure != 0 { throw notReadable("read", path, failure) }
        return Array(out.prefix(got))
    }

    /// The size of the file at `path`.
    /// - Throws: ``JournalError`` (`not_readable`) when `stat` fails: a segment taken for empty
    ///   would be cut or renumbered.
    static func fileSize(_ path: String) throws -> Int {
        var st = stat()
        guard stat(path, &st) == 0 else { throw notReadable("stat", path) }
        return Int(st.st_size)
    }

    /// The names in `directory`.
    /// - Throws: ``JournalError`` (`not_readable`) when it cannot be listed: a listing that failed
    ///   (no descriptors left, say) must not read as a journal with no segments, which would start
    ///   numbering again from 1.
    static func names(in directory: String) throws -> [String] {
        if let injected = Failpoints.hit("journal.list") { throw notReadable("list", directory, injected) }
        guard let dir = opendir(directory) else { throw notReadable("list", directory) }
        defer { closedir(dir) }  // a directory stream read to its end: nothing to lose
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = readdir(dir) else {
                if errno != 0 { throw notReadable("list", directory) }
                return names
            }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
    }

    private static func notReadable(_ call: String, _ path: String, _ code: Int32 = errno) -> JournalError {
        JournalError(.notReadable, "cannot \(call) \(path): \(String(cString: strerror(code)))")
    }
}
