#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// The highest `seq` the daemon may publish, made durable before any envelope past it is published
/// (`reserved-seq` in the journal directory), so that a journal which lost records a subscriber
/// had already seen never numbers a new event with one of their seqs (`docs/durability.md`).
///
/// Envelopes are published once written, before their `fdatasync`. A power loss (or a disk that
/// tears the journal's tail) can therefore take records some subscriber has seen; were their seqs
/// given to new events, a subscriber resuming after them would take each new one for the one it
/// saw, and skip it. At start the journal goes on after the reservation instead when it cannot
/// know the file holds every published record: after an unclean stop on an earlier boot, and after
/// a clean stop whose tail was cut since. The seqs in between are a hole, answered `not_retained`
/// like set-aside records.
///
/// The file holds two 128-byte slots written in turn, each with a counter and a checksum: a write
/// torn by a crash leaves the other intact. Not `Sendable`: the pipeline thread's (through
/// ``Journal``).
package final class SeqReservation {
    package static let fileName = "reserved-seq"
    /// Seqs reserved at a time: one small `fdatasync` per this many records; after a power loss,
    /// at most this many seqs are skipped.
    package static let block: UInt64 = 100_000
    package static let slotSize = 128
    package static let magic: UInt32 = 0x5352_4243  // "CBRS" read little-endian

    /// What a slot says.
    package struct State: Equatable {
        var counter: UInt64
        /// Every seq ever published is at most this.
        var reserved: UInt64
        /// The daemon stopped cleanly: every record up to `reserved` was synced, and `reserved` is
        /// exactly the last seq.
        var clean: Bool
        /// The boot the slot was written in (`/proc/sys/kernel/random/boot_id`).
        var boot: String
    }

    /// What the file said when the journal was opened (nil: no file, a journal from before it).
    package let previous: State?
    /// A slot the file holds failed its checksum: the newest commit may be the damaged one.
    package let damaged: Bool
    /// The current boot's id.
    package let boot: String
    private(set) var reserved: UInt64
    private var counter: UInt64
    private let fd: Int32
    private let path: String

    package init(directory: String) throws {
        let path = directory + "/" + SeqReservation.fileName
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o640)
        guard fd >= 0 else { throw JournalError(.notReadable, "cannot open \(path): \(String(cString: strerror(errno)))") }
        self.path = path
        self.fd = fd
        boot = SeqReservation.currentBoot()
        // A read that fails is not a new file: taken for one, numbering would go on from the last
        // record and the counter start again at 0 (the old slot then winning at the next start).
        let bytes: [UInt8]
        do {
            bytes = try JournalFiles.read(fd, path: path, from: 0, count: 2 * SeqReservation.slotSize,
                                          failpoint: "journal.seq-read")
        } catch {
            close(fd)
            throw error
        }
        let n = bytes.count
        // A slot never written is zeros (the first commit goes to the second slot): only one with
        // bytes that fail their checksum is damaged.
        var slots: [State] = []
        var damaged = false
        for i in 0..<2 {
            let range = i * SeqReservation.slotSize..<(i + 1) * SeqReservation.slotSize
            guard n >= range.upperBound, bytes[range].contains(where: { $0 != 0 }) else { continue }
            if let s = bytes.withUnsafeBytes({ SeqReservation.decode($0.baseAddress! + range.lowerBound) }) {
                slots.append(s)
            } else {
                damaged = true
            }
        }
        self.damaged = damaged
        previous = slots.max { $0.counter < $1.counter }
        reserved = previous?.reserved ?? 0
        counter = previous?.counter ?? 0
    }

    deinit { close(fd) }

    /// The seq a recovered journal goes on after.
    /// - Parameters:
    ///   - intact: the last intact record's seq (after any records set aside past damage).
    ///   - cutTail: the newest segment's end was cut off (a torn or damaged tail, nothing intact after it).
    ///   - previous: what the reservation said (nil: no reservation yet).
    ///   - damaged: a slot of the reservation failed its checksum (the newest may be lost).
    ///   - boot: this boot's id.
    package static func resumeAfter(intact: UInt64, cutTail: Bool, previous: State?, damaged: Bool = false,
                            boot: String) -> UInt64 {
        guard let p = previous else { return intact }
        // A damaged slot may have been the newest: with records lost too, the surviving one is
        // not to be trusted to cover them, so numbering goes a whole block past it.
        if damaged && cutTail { return max(intact, p.reserved) + block }
        guard p.reserved > intact else { return intact }
        // After a clean stop the reservation is the last seq exactly, and everything up to it was
        // synced: any record missing below it was lost after the fact (a disk's fault, a file cut
        // by hand, at a record's boundary or inside one).
        if p.clean { return p.reserved }
        // After a crash of the machine, unsynced records may be gone, whole or torn.
        if p.boot != boot { return p.reserved }
        // After `kill -9` on this boot the kernel still holds every written record; a torn tail is
        // a write the kill cut short (Linux stops a write between pages for a fatal signal),
        // whose records were never published: numbering goes straight on.
        return intact
    }

    /// Makes every seq up to `seq` publishable: when `seq` is past the reservation, reserves
    /// ``block`` more and syncs the file before returning.
    /// - Throws: ``JournalError`` when the file cannot be written; nothing past the old reservation may be published.
    @inline(__always)
    package func reserve(through seq: UInt64) throws {
        if seq <= reserved { return }
        try write(State(counter: counter + 1, reserved: seq + SeqReservation.block, clean: false, boot: boot))
    }

    /// Records a clean stop: every record up to `lastSeq` is synced, and nothing after it was published.
    /// - Throws: ``JournalError`` when the file cannot be written. Safe to go on from: the next
    ///   start then takes the stop for an unclean one and skips the reserved seqs.
    package func markClean(lastSeq: UInt64) throws {
        try write(State(counter: counter + 1, reserved: lastSeq, clean: true, boot: boot))
    }

    private func write(_ state: State) throws {
        var slot = [UInt8](repeating: 0, count: SeqReservation.slotSize)
        slot.withUnsafeMutableBytes { SeqReservation.encode(state, $0.baseAddress!) }
        let offset = off_t(Int(state.counter % 2) * SeqReservation.slotSize)
        let n = slot.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, offset) }
        guard n == SeqReservation.slotSize, fdatasync(fd) == 0 else {
            throw JournalError(.notWritable, "cannot write \(path): \(String(cString: strerror(errno)))")
        }
        counter = state.counter
        reserved = state.reserved
    }

    package static func encode(_ s: State, _ p: UnsafeMutableRawPointer) {
        JournalFormat.store(magic, p, 0)
        JournalFormat.store(UInt32(1), p, 4)
        JournalFormat.store(s.counter, p, 8)
        JournalFormat.store(s.reserved, p, 16)
        JournalFormat.store(UInt8(s.clean ? 1 : 0), p, 24)
        let boot = Array(s.boot.utf8.prefix(64))
        JournalFormat.store(UInt8(boot.count), p, 25)
        (p + 32).copyMemory(from: boot, byteCount: boot.count)
        JournalFormat.store(JournalFormat.checksumV1(p, slotSize - 8), p, slotSize - 8)
    }

    package static func decode(_ p: UnsafeRawPointer) -> State? {
        guard JournalFormat.load(p, 0, as: UInt32.self) == magic, JournalFormat.load(p, 4, as: UInt32.self) == 1,
            JournalFormat.load(p, slotSize - 8, as: UInt64.self) == JournalFormat.checksumV1(p, slotSize - 8)
        else { return nil }
        let bootCount = min(Int(JournalFormat.load(p, 25, as: UInt8.self)), 64)
        let boot = String(decoding: UnsafeRawBufferPointer(start: p + 32, count: bootCount), as: UTF8.self)
        return State(counter: JournalFormat.load(p, 8, as: UInt64.self), reserved: JournalFormat.load(p, 16, as: UInt64.self),
                     clean: JournalFormat.load(p, 24, as: UInt8.self) == 1, boot: boot)
    }

    /// This boot's id; empty where the kernel has none (then every unclean stop counts as a crash
    /// of the machine only if the previous slot's id differs, which an empty one never does).
    package static func currentBoot() -> String {
        guard let bytes = try? AtomicFile.read("/proc/sys/kernel/random/boot_id") else { return "" }
        return String(decoding: bytes.filter { $0 > 0x20 }, as: UTF8.self)
    }
}
