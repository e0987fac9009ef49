import Foundation
@testable import Host
@testable import HostCapture
@testable import HostModel
@testable import HostSupport
@testable import HostDelivery
@testable import HostPlugins
@testable import HostRecovery
@testable import HostStore
import HostTestSupport
import Testing

/// Storage targets and protected eviction (SPEC D-12) on a real SQLite file.
@Suite struct StorageLimitTests {
    func document(_ trigger: Trigger = .logError, padding: Int = 0, created: Double) -> ReportDocument {
        var content = ReportContent()
        content.summary = "s"
        if padding > 0 { content.attributes["padding"] = String(repeating: "x", count: padding) }
        return ReportDocument(
            id: UUID().uuidString.lowercased(), trigger: trigger, content: content, internalLog: [],
            createdAt: Date(timeIntervalSince1970: created))
    }

    @Test("D-12: over maxRecordCount, terminal records go first, then retry records, oldest first; protected ones never")
    func recordCount() throws {
        let repository = try Repository.open(
            folder: makeTemporaryDirectory("limits").appendingPathComponent("repo"),
            limits: { var l = StorageLimits(); l.maxRecordCount = 3; return l }())
        // Fill without the target first, so the states can be set up.
        let unlimited = try Repository.open(folder: repository.folder)
        let protectedStates: [RecordState] = [.pendingPurge, .pendingChain, .awaitingFirstAttempt, .submitting]
        var protectedIDs: [String] = []
        for (index, state) in protectedStates.enumerated() {
            let doc = document(created: Double(100 + index))
            try unlimited.seedRecord(doc, state: state)
            protectedIDs.append(doc.id)
        }
        let retryOld = document(created: 10), retryNew = document(created: 20), terminalNew = document(created: 30), terminalOld = document(created: 5)
        for (doc, state) in [(retryOld, RecordState.retry), (retryNew, .retry), (terminalNew, .terminal), (terminalOld, .terminal)] {
            try unlimited.seedRecord(doc, state: state)
        }
        let eviction = try repository.enforceLimits()
        #expect(eviction.evicted == [terminalOld.id, terminalNew.id, retryOld.id, retryNew.id])
        // Four protected records stay, above the target of three, and the pass ends.
        #expect(eviction.overTarget)
        #expect(Set(try repository.records().map(\.reportID)) == Set(protectedIDs))
    }

    @Test("D-12: the size target neither loops nor empties the repository; it stops at the protected records")
    func databaseSize() throws {
        let folder = makeTemporaryDirectory("limits").appendingPathComponent("repo")
        let unlimited = try Repository.open(folder: folder)
        for index in 0..<12 { try unlimited.seedRecord(document(padding: 200_000, created: Double(index)), state: .terminal) }
        let awaiting = document(padding: 200_000, created: 100)
        try unlimited.seedRecord(awaiting, state: .awaitingFirstAttempt)
        let before = unlimited.databaseBytes
        #expect(try unlimited.usedBytes() > 2 * 1024 * 1024)
        let limited = try Repository.open(folder: folder, limits: { var l = StorageLimits(); l.maxDatabaseSizeMB = 1; return l }())
        let eviction = try limited.enforceLimits()
        #expect(!eviction.evicted.isEmpty && eviction.evicted.count < 13)
        #expect(try limited.usedBytes() <= 1024 * 1024)
        #expect(try limited.records().contains { $0.reportID == awaiting.id })
        // The file itself does not shrink on delete: the target is measured on pages in use.
        #expect(limited.databaseBytes >= before)
        // A second pass has nothing to do.
        #expect(try limited.enforceLimits().evicted.isEmpty)
    }

    @Test("D-12: 0 disables each target")
    func disabled() throws {
        let repository = try Repository.open(folder: makeTemporaryDirectory("limits").appendingPathComponent("repo"))
        for index in 0..<5 { try repository.seedRecord(document(created: Double(index)), state: .terminal) }
        #expect(try repository.enforceLimits().evicted.isEmpty)
        #expect(try repository.records().count == 5)
    }
}
