#if canImport(Glibc)
import Glibc
#endif
import CFileIO

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
    /// - Returns: nil when it does, else why not.
    static func probeDirectWrites(in directory: String) -> String? {
        let path = directory + "/.direct-probe"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | cb_o_direct(), 0o600)
        guard fd >= 0 else { return "open: " + String(cString: strerror(errno)) }
        defer {
            Glibc.close(fd)
            unlink(path)
        }
        let block = UnsafeMutableRawPointer.allocate(byteCount: SegmentAppender.blockSize, alignment: SegmentAppender.blockSize)
        defer { block.deallocate() }
        block.initializeMemory(as: UInt8.self, repeating: 0, count: SegmentAppender.blockSize)
        let n = pwrite(fd, block, SegmentAppender.blockSize, 0)
        return n == SegmentAppender.blockSize ? nil : "pwrite: " + (n < 0 ? String(cString: strerror(errno)) : "short write")
    }

    /// `count` bytes of a file from `from` (fewer at its end or on an error).
    static func readRange(_ path: String, from: Int, count: Int) -> [UInt8] {
        let rfd = open(path, O_RDONLY | O_CLOEXEC)
        guard rfd >= 0, count > 0 else {
            if rfd >= 0 { Glibc.close(rfd) }
            return []
        }
        defer { Glibc.close(rfd) }
        var out = [UInt8](repeating: 0, count: count)
        var got = 0
        out.withUnsafeMutableBytes { b in
            while got < count {
                let r = pread(rfd, b.baseAddress! + got, count - got, off_t(from + got))
                if r < 0 && errno == EINTR { continue }
                if r <= 0 { break }
                got += r
            }
        }
        return Array(out.prefix(got))
    }

    static func fileSize(_ path: String) -> Int {
        var st = stat()
        return stat(path, &st) == 0 ? Int(st.st_size) : 0
    }
}
