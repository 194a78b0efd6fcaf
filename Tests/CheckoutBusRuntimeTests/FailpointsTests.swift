#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import CheckoutBusRuntime

/// The failpoint rules' syntax (`CHECKOUTBUS_FAILPOINTS`); the points themselves are exercised by
/// the integration tests that set the variable on a real daemon.
@Suite("Failpoints")
struct FailpointsTests {
    @Test func rulesParseWithTheirActionFirstHitAndCount() throws {
        let table = Failpoints.parse("journal.fdatasync=eio@3; control.replay=kill@2,journal.write=enospc@1x2")
        #expect(table.count == 3)
        let sync = try #require(table["journal.fdatasync"])
        #expect(sync.from == 3 && sync.times == nil)
        guard case .fail(let code) = sync.action else { Issue.record("eio is an errno action"); return }
        #expect(code == EIO)
        let replay = try #require(table["control.replay"])
        #expect(replay.from == 2)
        guard case .kill = replay.action else { Issue.record("kill"); return }
        let write = try #require(table["journal.write"])
        #expect(write.from == 1 && write.times == 2)
    }

    @Test func unknownActionsAndMalformedEntriesAreIgnored() {
        #expect(Failpoints.parse("a=explode@1;b;=eio").isEmpty)
    }

    @Test func aProcessWithoutTheVariableHasNone() {
        // The test runner is started without CHECKOUTBUS_FAILPOINTS.
        #expect(!Failpoints.isActive)
        #expect(Failpoints.hit("journal.fdatasync") == nil)
    }
}
