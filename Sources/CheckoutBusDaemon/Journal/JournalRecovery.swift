#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusRuntime

/// What opening a journal found and did about it: the last seq and kind_seqs it goes on from, a
/// damaged or torn tail of the newest segment cut (and intact records past the damage set aside),
/// the seqs skipped because they may have been published before the stop; and the scans that
/// tell a torn write's padding from damage (``Journal`` opens, scans and cuts; `docs/durability.md`).
///
/// `Sendable`: a value, filled in on the thread that opens the journal.
package struct JournalRecovery: Sendable {
    package var lastSeq: UInt64 = 0
    /// The last kind_seq of each kind (start, update, complete, fail, dismiss, deadletter).
    package var kindSeqs = [UInt64](repeating: 0, count: JournalFormat.kindCount)
    package var segments = 0
    package var truncatedBytes = 0
    /// Zeros cut after the last record: the padding of a direct write, left by a stop without
    /// a clean close (kill -9, a crash). Not damage.
    package var paddingBytes = 0
    /// Intact records found past damage in the last segment, set aside (their seqs not reused).
    package var skippedRecords = 0
    /// Seqs skipped after the last intact record because they may have been published before
    /// the stop (``SeqReservation``): 0 unless the tail was cut or the machine crashed.
    package var skippedSeqs: UInt64 = 0
    /// The marker of a run fenced by a failed durability call (``JournalFence``), when this start
    /// cut the journal back to its durable seq.
    package var fence: JournalFence.Marker?
    /// Records after that seq read back intact and written again (now synced).
    package var fenceRedrivenRecords = 0
    /// What that cut removed: bytes, whole segments set aside, and the highest seq among them.
    package var fenceCutBytes = 0
    package var fenceCutSegments = 0
    package var fenceCutMaxSeq: UInt64 = 0

    /// Whether `tail`, the bytes after a segment's last intact record up to the file's `end`, is
    /// only the zero padding of a direct write: fewer than a block of zeros, ending on a block.
    package static func isPadding(_ tail: [UInt8], end: Int) -> Bool {
        !tail.isEmpty && tail.count < SegmentAppender.blockSize && end % SegmentAppender.blockSize == 0
            && !tail.contains { $0 != 0 }
    }

    /// The intact records anywhere in `bytes` (a segment's tail from a damaged record on), found
    /// by their magic and checksum, not by walking from record to record: how many, the highest
    /// seq, and each kind's highest `kind_seq`.
    package static func intactRecords(in bytes: [UInt8]) -> (count: Int, maxSeq: UInt64, kindSeqs: [UInt64]) {
        var result = (count: 0, maxSeq: UInt64(0), kindSeqs: [UInt64](repeating: 0, count: JournalFormat.kindCount))
        bytes.withUnsafeBytes { raw in
            guard let p = raw.baseAddress else { return }
            var offset = 1  // the damaged record itself does not count
            while offset + JournalFormat.recordHeaderSize + JournalFormat.checksumSize <= raw.count {
                if JournalFormat.isRecordMagic(JournalFormat.load(p, offset, as: UInt32.self)),
                    let h = JournalFormat.readRecord(p + offset, available: raw.count - offset)
                {
                    result.count += 1
                    result.maxSeq = max(result.maxSeq, h.seq)
                    result.kindSeqs[Int(h.kind)] = max(result.kindSeqs[Int(h.kind)], h.kindSeq)
                    offset += h.recordSize
                } else {
                    offset += 1
                }
            }
        }
        return result
    }

    /// Writes the copy of bytes recovery is about to cut (or rewrite) beside the segment, synced.
    /// - Returns: the copy's path, or why it could not be written, for the log line that reports
    ///   the cut: the cut goes ahead either way (its seqs are not reused), but never silently
    ///   without its copy.
    static func keepCopy(_ bytes: [UInt8], at path: String) -> String {
        do {
            try AtomicFile.write(bytes, to: path, durable: true)
            return path
        } catch {
            return "not kept (\(error.description))"
        }
    }
}
