#if canImport(Glibc)
import Glibc
#endif

/// Which closed journal segments are deleted: the oldest first, while the journal is larger than
/// `--retain-bytes` or the oldest segment's newest record is older than `--retain-hours`. The
/// open segment is never deleted.
///
/// `Sendable`: two limits.
struct JournalRetention: Sendable {
    let retainBytes: Int64
    let retainSeconds: Int

    /// Whether the oldest closed segment at `path` goes, the journal being `journalBytes` long.
    /// - Returns: its age in seconds when it goes (by the file's modification time), nil when it stays.
    func retires(_ path: String, journalBytes: Int64, now: time_t) -> Int? {
        var st = stat()
        let age = stat(path, &st) == 0 ? Int(now - st.st_mtim.tv_sec) : 0
        return journalBytes > retainBytes || age > retainSeconds ? age : nil
    }
}
