import Foundation
@testable import HostModel
@testable import HostStore
import HostTestSupport
import Testing

/// The index of readable records (`readable_by_state`, SPEC I-7): SQLite checks a document as
/// it is written, except while the host is still writing the row (`pending_purge`,
/// `pending_chain`), which it rewrites at least once more. What the index holds unchecked is
/// read by nothing when it is damaged, and named.
@Suite struct ReadableIndexTests {
    let folder = makeTemporaryDirectory("readable-index")
    let repository: Repository

    init() throws {
        repository = try Repository.open(folder: folder.appendingPathComponent("repo"))
    }

    func indexed(_ repository: Repository) throws -> Int64? {
        try repository.database.query("SELECT COUNT(*) FROM reports INDEXED BY readable_by_state WHERE \(Repository.readable)").first?.first?.int
    }

    func damage(_ rowID: Int64, in repository: Repository) throws {
        try repository.database.query("UPDATE reports SET document = '{not json' WHERE rowid = ?", [.integer(rowID)])
    }

    @Test("I-7: a row the host is still writing is indexed unchecked; damaged, it is read by nothing, named, and leaves the index once written on")
    func writingRowsUnchecked() throws {
        let stored = try repository.seedRecord(ReportDocument.summarised("stored"), state: .awaitingFirstAttempt)
        let journaled = try repository.journal(ReportDocument.summarised("journaled"), session: "s", dialogPending: false)
        let purging = try repository.seedRecord(ReportDocument.summarised("purging"), state: .pendingPurge)
        try damage(journaled, in: repository)
        try damage(purging, in: repository)
        // Both damaged rows are still in the index: SQLite did not look at their documents.
        #expect(try indexed(repository) == 3)
        #expect(try repository.records(in: [.pendingChain, .pendingPurge]).isEmpty)
        #expect(try repository.summaries().map(\.rowID) == [stored])
        #expect(try repository.summaries(in: [.pendingChain]).isEmpty)
        let unreadable = try repository.unreadableRecords()
        #expect(unreadable.map(\.rowID) == [journaled, purging], "\(unreadable)")
        #expect(unreadable.allSatisfy { $0.reason.hasSuffix("holds an unreadable document") })
        // The chain's write replaces the journal: checked, read, listed.
        try repository.chainFinished(journaled, document: ReportDocument.summarised("chained"))
        #expect(try repository.records(in: [.awaitingFirstAttempt]).map(\.document.content.summary) == ["stored", "chained"])
        #expect(try repository.unreadableRecords().map(\.rowID) == [purging])
        // A damaged row that leaves the writing states by its state alone is checked then.
        try repository.database.query("UPDATE reports SET state = 'awaiting_first_attempt' WHERE rowid = ?", [.integer(purging)])
        #expect(try indexed(repository) == 2)
        #expect(try repository.unreadableRecords().map(\.rowID) == [purging])
        #expect(try repository.summaries().count == 2)
    }

    @Test("I-7: a schema 13 repository (every document checked) opens at schema 14, its index made again from its rows as they are")
    func schemaThirteenMigrates() throws {
        let stored = try repository.seedRecord(ReportDocument.summarised("stored"), state: .awaitingFirstAttempt)
        let journaled = try repository.journal(ReportDocument.summarised("journaled"), session: "s", dialogPending: false)
        let damaged = try repository.seedRecord(ReportDocument.summarised("damaged"), state: .retry)
        let older = "\(Repository.knownTrigger) AND \(Repository.readableDocument)"
        try repository.database.execute("""
            DROP INDEX readable_by_state; CREATE INDEX readable_by_state ON reports(state, created_at) WHERE \(older);
            PRAGMA user_version = 13;
            """)
        try damage(journaled, in: repository)
        try damage(damaged, in: repository)
        let reopened = try Repository.open(folder: folder.appendingPathComponent("repo"))
        #expect(try reopened.database.query("PRAGMA user_version").first?.first?.int == Int64(Repository.schemaVersion))
        let definition = try reopened.database.query("SELECT sql FROM sqlite_master WHERE name = 'readable_by_state'").first?.first?.string
        #expect(definition?.contains(Repository.writing) == true, "\(definition ?? "none")")
        // The damaged journal is in the new index (unchecked), the damaged retry is not.
        #expect(try indexed(reopened) == 2)
        #expect(try reopened.summaries().map(\.rowID) == [stored])
        #expect(try reopened.unreadableRecords().map(\.rowID) == [journaled, damaged])
    }

    @Test("I-7: an upgrade is whole or not at all: a step that fails leaves the repository at the schema it had, the steps before it taken back")
    func failedUpgradeTakenBack() throws {
        // Schema 12 (step 13 only sets its version when `seq` is there), with a table where
        // step 14 makes its index: step 13 succeeds, step 14 fails.
        try repository.database.execute("""
            DROP INDEX readable_by_state; CREATE TABLE readable_by_state(x);
            PRAGMA user_version = 12;
            """)
        #expect(throws: StorageError.self) { try Repository.open(folder: folder.appendingPathComponent("repo")) }
        #expect(try repository.database.query("PRAGMA user_version").first?.first?.int == 12)
    }
}
