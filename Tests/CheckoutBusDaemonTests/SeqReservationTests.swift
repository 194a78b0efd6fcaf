import Foundation
import Testing

@testable import CheckoutBusDaemon

/// Where a recovered journal goes on (``SeqReservation/resumeAfter(intact:cutTail:previous:boot:)``),
/// for the stops a test cannot stage with real processes: a crash of the machine is a new boot id.
@Suite("seq reservation: where numbering goes on after a stop")
struct SeqReservationTests {
    static func state(_ reserved: UInt64, clean: Bool, boot: String = "boot-a") -> SeqReservation.State {
        SeqReservation.State(counter: 7, reserved: reserved, clean: clean, boot: boot)
    }

    @Test("a clean stop: straight on, unless records were lost since (then after the last seq, exactly, however they were cut)")
    func clean() {
        let s = Self.state(50, clean: true)
        #expect(SeqReservation.resumeAfter(intact: 50, cutTail: false, previous: s, boot: "boot-b") == 50)
        #expect(SeqReservation.resumeAfter(intact: 49, cutTail: true, previous: s, boot: "boot-a") == 50)
        #expect(SeqReservation.resumeAfter(intact: 49, cutTail: true, previous: s, boot: "boot-b") == 50)
        // Cut at a record's boundary: nothing torn, yet the last seqs are gone.
        #expect(SeqReservation.resumeAfter(intact: 47, cutTail: false, previous: s, boot: "boot-a") == 50)
    }

    @Test("a damaged slot and a cut tail: a whole block past the surviving slot; a damaged slot alone changes nothing")
    func damagedSlot() {
        let s = Self.state(100_040, clean: false)
        #expect(SeqReservation.resumeAfter(intact: 59, cutTail: true, previous: s, damaged: true, boot: "boot-a")
            == 100_040 + SeqReservation.block)
        #expect(SeqReservation.resumeAfter(intact: 60, cutTail: false, previous: s, damaged: true, boot: "boot-a") == 60)
    }

    @Test("kill -9 on this boot: straight on — the kernel kept every written record, and a torn tail is a write the kill cut short, never published")
    func killedThisBoot() {
        let s = Self.state(100_040, clean: false)
        #expect(SeqReservation.resumeAfter(intact: 60, cutTail: false, previous: s, boot: "boot-a") == 60)
        #expect(SeqReservation.resumeAfter(intact: 59, cutTail: true, previous: s, boot: "boot-a") == 59)
    }

    @Test("an unclean stop on an earlier boot (power loss, kernel crash): after the reservation, cut tail or not")
    func machineCrash() {
        let s = Self.state(100_040, clean: false, boot: "boot-a")
        #expect(SeqReservation.resumeAfter(intact: 60, cutTail: false, previous: s, boot: "boot-b") == 100_040)
        #expect(SeqReservation.resumeAfter(intact: 12, cutTail: true, previous: s, boot: "boot-b") == 100_040)
    }

    @Test("no reservation yet (a journal from before it), or one behind the journal: straight on")
    func noReservation() {
        #expect(SeqReservation.resumeAfter(intact: 60, cutTail: true, previous: nil, boot: "boot-b") == 60)
        #expect(SeqReservation.resumeAfter(intact: 60, cutTail: true, previous: Self.state(40, clean: false), boot: "b") == 60)
    }

    @Test("the file: reserved ahead by a block, slots alternate, a torn slot leaves the other")
    func file() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("seqres-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        do {
            let r = try SeqReservation(directory: dir)
            #expect(r.previous == nil)
            try r.reserve(through: 5)
            #expect(r.reserved == 5 + SeqReservation.block)
        }
        do {
            // One commit: the other slot was never written (zeros), which is no damage.
            let once = try SeqReservation(directory: dir)
            #expect(once.previous?.reserved == 5 + SeqReservation.block)
            #expect(!once.damaged)
        }
        do {
            let r = try SeqReservation(directory: dir)
            try r.reserve(through: 6)  // inside the reservation: nothing written
            try r.reserve(through: SeqReservation.block + 10)
            #expect(r.reserved == 2 * SeqReservation.block + 10)
        }
        let reopened = try SeqReservation(directory: dir)
        #expect(reopened.previous?.reserved == 2 * SeqReservation.block + 10)
        #expect(reopened.previous?.clean == false)
        #expect(reopened.previous?.boot == SeqReservation.currentBoot())
        try reopened.markClean(lastSeq: 99)
        // Tear the newest slot (counter 3, in slot 1): the older one is read.
        let path = dir + "/" + SeqReservation.fileName
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        bytes[SeqReservation.slotSize + 20] ^= 0xFF
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let torn = try SeqReservation(directory: dir)
        #expect(torn.previous?.reserved == 2 * SeqReservation.block + 10)
        #expect(torn.previous?.clean == false)
        #expect(torn.damaged)
        #expect(!reopened.damaged)
    }
}
