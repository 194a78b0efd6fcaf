#if canImport(Glibc)
import Glibc
#endif
import Foundation
import CheckoutBusRuntime

/// Recovery at open: the newest segments' headers checked, the last segment scanned, a torn last
/// record or a direct write's zero padding cut, intact records past damage set aside, and where
/// numbering goes on decided (``SeqReservation``). What it found is a ``JournalRecovery``; the
/// contract is in docs/durability.md ("Recovery").
extension Journal {

    func recover() throws {
        // A daemon fenced by a failed sync left the last seq it knew to be on disk: what follows
        // it is cut first, then recovered as after any stop.
        let fenced = try fence.read()
        if let fenced { try cutBack(after: fenced) }
        // Drop newest segments whose header never made it to disk.
        while let last = segments.last {
            let header = try JournalFiles.readRange(last.path, from: 0, count: JournalFormat.segmentHeaderSize)
            let read = header.withUnsafeBytes { JournalFormat.readSegmentHeader($0) }
            if let read, read.firstSeq == last.firstSeq { break }
            // A header is written before any record: records after a bad one mean the header was
            // damaged later (a corrupt byte), not torn by a crash. The records are kept.
            if last.size > JournalFormat.segmentHeaderSize {
                try repairHeader(of: segments.count - 1, damaged: header)
                break
            }
            logger.warning("journal: removing a segment with a torn header", ["path": last.path, "bytes": String(last.size)])
            // It holds no record. Left on the disk it could end up between newer segments (when
            // numbering skips ahead), never checked again: a start that cannot remove it stops.
            guard unlink(last.path) == 0 else {
                let code = errno
                throw JournalError(.notWritable, "cannot remove \(last.path), a segment with a torn header: "
                                   + String(cString: strerror(code)))
            }
            segments.removeLast()
        }
        guard let last = segments.last else {
            try openNewSegment(firstSeq: 1)
            return
        }
        let header = try JournalFiles.readRange(last.path, from: 0, count: JournalFormat.segmentHeaderSize)
        let (firstSeq, startKinds) = header.withUnsafeBytes { JournalFormat.readSegmentHeader($0)! }
        kindSeqs = startKinds
        var seq = firstSeq - 1
        var intact = JournalFormat.segmentHeaderSize
        try reader.scanRecords(path: last.path, from: JournalFormat.segmentHeaderSize, size: last.size) { h, offset, _ in
            guard h.seq == seq + 1 else { return false }
            seq = h.seq
            kindSeqs[Int(h.kind)] = max(kindSeqs[Int(h.kind)], h.kindSeq)
            intact = offset + h.recordSize
            return true
        }
        let i = segments.count - 1
        fd = open(last.path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw JournalError(.notReadable, "cannot open journal segment \(last.path): \(String(cString: strerror(errno)))") }
        // Intact records past the damage mean it was no torn append: a corrupt byte, or a hole a
        // power loss left. Their seqs may have been published, so new events must not take them
        // again: numbering goes on after the highest, in a new segment, and the cut bytes are
        // kept beside the segment for inspection.
        var beyond = (count: 0, maxSeq: UInt64(0), kindSeqs: [UInt64](repeating: 0, count: JournalFormat.kindCount))
        let tail = intact < last.size
            ? try JournalFiles.readRange(last.path, from: intact, count: last.size - intact) : []
        if JournalRecovery.isPadding(tail, end: last.size) {
            // The zeros a direct write put after the last record (a stop without ``close()``).
            recovery.paddingBytes = tail.count
        } else if intact < last.size {
            recovery.truncatedBytes = last.size - intact
            beyond = JournalRecovery.intactRecords(in: tail)
            if beyond.count > 0 {
                let aside = last.path + ".damaged-at-\(intact)"
                let kept = JournalRecovery.keepCopy(tail, at: aside)
                logger.error("journal: a damaged record with intact records after it; they are set aside and their seqs not reused", [
                    "segment": last.path, "offset": String(intact), "intact_after": String(beyond.count),
                    "highest_seq_after": String(beyond.maxSeq), "set_aside": kept,
                ])
            }
        }
        // Padding or a torn tail: either way the file ends at the last intact record.
        if intact < last.size {
            guard ftruncate(fd, off_t(intact)) == 0 else {
                throw JournalError(.notWritable, "cannot truncate the tail of \(last.path): \(String(cString: strerror(errno)))")
            }
            guard fdatasync(fd) == 0 else {
                throw JournalError(.notWritable, "cannot sync \(last.path) after cutting its tail: \(String(cString: strerror(errno)))")
            }
        }
        segments[i].size = intact
        var newSegment = false
        if beyond.count > 0 && beyond.maxSeq > seq {
            recovery.skippedRecords = beyond.count
            seq = beyond.maxSeq
            for k in kindSeqs.indices { kindSeqs[k] = max(kindSeqs[k], beyond.kindSeqs[k]) }
            newSegment = true
        }
        // Records past the intact ones that a subscriber may have seen (a cut tail, or unsynced
        // records a crash of the machine took): new events are numbered after every seq that may
        // have been published, and each kind_seq after every one that may have been.
        if reservation.damaged {
            logger.error("journal: a slot of the seq reservation is damaged; the other is used", ["file": directory + "/" + SeqReservation.fileName])
        } else if reservation.previous == nil && seq > 0 {
            logger.warning("journal: no seq reservation beside an existing journal (written before it existed, or deleted); numbering goes on from the last record", [
                "file": directory + "/" + SeqReservation.fileName,
            ])
        }
        var resume = SeqReservation.resumeAfter(intact: seq, cutTail: recovery.truncatedBytes > 0 && beyond.count == 0,
                                                previous: reservation.previous, damaged: reservation.damaged,
                                                boot: reservation.boot)
        if fenced != nil && (recovery.fenceCutBytes > 0 || recovery.fenceCutSegments > 0) {
            // Records cut after the fence may have been published (never acknowledged): their seqs
            // are not given again, whatever boot this is.
            resume = max(resume, reservation.previous?.reserved ?? seq + SeqReservation.block, recovery.fenceCutMaxSeq)
        }
        if resume > seq {
            let skipped = resume - seq
            logger.warning("journal: records after the last intact one may have been published before the stop; their seqs are not reused", [
                "last_intact_seq": String(seq), "resume_after_seq": String(resume), "skipped_seqs": String(skipped),
                "previous_stop": reservation.previous?.clean == true ? "clean" : "unclean",
            ])
            recovery.skippedSeqs = skipped
            for k in kindSeqs.indices { kindSeqs[k] += skipped }
            seq = resume
            newSegment = true
        }
        if newSegment {
            Glibc.close(fd)
            try openNewSegment(firstSeq: seq + 1)
        } else if let e = appender.withValue({ $0.open(path: last.path, fd: fd, size: intact) }) {
            throw JournalError(.notReadable, "cannot read the end of journal segment \(last.path): \(String(cString: strerror(e)))")
        }
        writtenSeq = seq
        // Only now is the numbering after the cut on disk (the new segment's name and header): a
        // crash before this line finds the marker again and cuts nothing more.
        if fenced != nil { try fence.clear() }
        recovery.lastSeq = seq
        recovery.kindSeqs = kindSeqs
        recovery.segments = segments.count
        if recovery.truncatedBytes > 0 {
            logger.warning("journal recovered", ["last_seq": String(seq), "truncated_bytes": String(recovery.truncatedBytes),
                                                 "set_aside_records": String(recovery.skippedRecords),
                                                 "skipped_seqs": String(recovery.skippedSeqs), "segment": last.path])
        }
    }

    /// Makes the journal after a fenced run trustworthy again, from `marker`'s durable seq `D` on.
    ///
    /// The records after `D` in the segment holding it were written and published, but their sync
    /// failed: whether they are on the disk is unknown. What this start reads back is checked
    /// (each record's checksum and `seq` one more than the one before): the intact run after `D`
    /// is written again at the same offsets and synced, so it is on the disk now or the start fails
    /// with the reason; it is exactly what subscribers saw. Bytes after that run that are not
    /// intact records (pages the kernel dropped and the disk never got) are cut, copied beside the
    /// segment first (`….fenced-after-OFFSET`) when the disk takes them, and so are segments wholly
    /// after `D` (renamed `….seg.fenced`); their seqs may have been published, so numbering then
    /// goes on after the seq reservation (``recover()``).
    func cutBack(after marker: JournalFence.Marker) throws {
        let d = marker.durableSeq
        var cutSegments = 0
        var cutBytes = 0
        var cutMaxSeq: UInt64 = 0
        // Keep one segment, cut to its header at least: its header carries the kind_seqs.
        while segments.count > 1, let last = segments.last, last.firstSeq > d + 1 {
            try reader.scanRecords(path: last.path, from: JournalFormat.segmentHeaderSize, size: last.size) { h, _, _ in
                cutMaxSeq = max(cutMaxSeq, h.seq)
                return true
            }
            guard rename(last.path, last.path + ".fenced") == 0 else {
                throw JournalError(.notWritable, "cannot set aside \(last.path) after a fence: \(String(cString: strerror(errno)))")
            }
            cutSegments += 1
            cutBytes += last.size
            segments.removeLast()
        }
        var redriven = 0
        var redrivenBytes = 0
        if let last = segments.last {
            // The synced records, then the intact run after them.
            var durableEnd = JournalFormat.segmentHeaderSize
            var intactEnd = JournalFormat.segmentHeaderSize
            var seq = last.firstSeq - 1
            try reader.scanRecords(path: last.path, from: JournalFormat.segmentHeaderSize, size: last.size) { h, offset, _ in
                guard h.seq == seq + 1 else { return false }
                seq = h.seq
                intactEnd = offset + h.recordSize
                if h.seq <= d { durableEnd = intactEnd } else { redriven += 1 }
                return true
            }
            let tail = intactEnd < last.size
                ? try JournalFiles.readRange(last.path, from: intactEnd, count: last.size - intactEnd) : []
            let garbage = !tail.isEmpty && !JournalRecovery.isPadding(tail, end: last.size)
            if garbage {
                let kept = JournalRecovery.keepCopy(tail, at: last.path + ".fenced-after-\(intactEnd)")
                logger.error("journal: bytes after the fenced run's intact records are cut", [
                    "segment": last.path, "offset": String(intactEnd), "bytes": String(tail.count), "set_aside": kept,
                ])
                cutBytes += tail.count
                cutMaxSeq = max(cutMaxSeq, JournalRecovery.intactRecords(in: tail).maxSeq)
            }
            let run = try JournalFiles.readRange(last.path, from: durableEnd, count: intactEnd - durableEnd)
            guard run.count == intactEnd - durableEnd else {
                throw JournalError(.notReadable, "cannot read back \(last.path) after a fence")
            }
            let cfd = open(last.path, O_RDWR | O_CLOEXEC)
            guard cfd >= 0 else { throw JournalError(.notReadable, "cannot open \(last.path): \(String(cString: strerror(errno)))") }
            defer { Glibc.close(cfd) }
            // Cut what is not intact, write the intact run again (its pages dirty once more), sync.
            let written = run.withUnsafeBytes { b in b.count == 0 ? 0 : pwrite(cfd, b.baseAddress, b.count, off_t(durableEnd)) }
            guard ftruncate(cfd, off_t(intactEnd)) == 0, written == run.count, fdatasync(cfd) == 0 else {
                throw JournalError(.notWritable, "cannot write \(last.path) again after a fence: \(String(cString: strerror(errno)))")
            }
            redrivenBytes = run.count
            segments[segments.count - 1].size = intactEnd
        }
        if let e = AtomicFile.syncDirectory(directory) {
            throw JournalError(.notWritable, "cannot sync \(directory) after cutting the journal back: \(String(cString: strerror(e)))")
        }
        recovery.fence = marker
        recovery.fenceRedrivenRecords = redriven
        recovery.fenceCutBytes = cutBytes
        recovery.fenceCutSegments = cutSegments
        recovery.fenceCutMaxSeq = cutMaxSeq
        logger.error("journal: the last run was fenced by a failed durability call; the records after its last synced seq "
                     + "were read back, checked and written again (what is not intact is cut)", [
            "reason": marker.reason, "fenced_at": marker.at, "durable_seq": String(d),
            "rewritten_records": String(redriven), "rewritten_bytes": String(redrivenBytes), "cut_bytes": String(cutBytes),
            "set_aside_segments": String(cutSegments), "highest_cut_seq": String(cutMaxSeq),
        ])
    }

    /// Rewrites the damaged header of segment `i` (which holds records): its first seq from the
    /// file name, each `kind_seq` before it from the segment's own records (the first of a kind,
    /// less one) or, for a kind it lacks, from the segment before it. The damaged bytes are kept
    /// beside it.
    func repairHeader(of i: Int, damaged: [UInt8]) throws {
        let seg = segments[i]
        var before = [UInt64](repeating: 0, count: JournalFormat.kindCount)
        if i > 0 {
            let prev = segments[i - 1]
            let h = try JournalFiles.readRange(prev.path, from: 0, count: JournalFormat.segmentHeaderSize)
            if let (_, kinds) = h.withUnsafeBytes({ JournalFormat.readSegmentHeader($0) }) { before = kinds }
            try reader.scanRecords(path: prev.path, from: JournalFormat.segmentHeaderSize, size: prev.size) { r, _, _ in
                before[Int(r.kind)] = max(before[Int(r.kind)], r.kindSeq)
                return true
            }
        }
        var seen = [Bool](repeating: false, count: JournalFormat.kindCount)
        try reader.scanRecords(path: seg.path, from: JournalFormat.segmentHeaderSize, size: seg.size) { r, _, _ in
            let k = Int(r.kind)
            if !seen[k] {
                seen[k] = true
                before[k] = r.kindSeq &- 1
            }
            return true
        }
        let kept = JournalRecovery.keepCopy(damaged, at: seg.path + ".damaged-header")
        let header = JournalFormat.segmentHeader(firstSeq: seg.firstSeq, kindSeqs: before)
        let rfd = open(seg.path, O_RDWR | O_CLOEXEC)
        guard rfd >= 0 else { throw JournalError(.notReadable, "cannot open journal segment \(seg.path): \(String(cString: strerror(errno)))") }
        defer { Glibc.close(rfd) }
        let n = header.withUnsafeBytes { pwrite(rfd, $0.baseAddress, $0.count, 0) }
        guard n == header.count, fdatasync(rfd) == 0 else {
            throw JournalError(.notWritable, "cannot rewrite the header of \(seg.path): \(String(cString: strerror(errno)))")
        }
        logger.error("journal: the newest segment's header was damaged; rebuilt from its name and records", [
            "segment": seg.path, "first_seq": String(seg.firstSeq), "damaged_header": kept,
        ])
    }
}
