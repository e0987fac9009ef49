import Foundation
@testable import HostModel
@testable import HostStore
import HostSupport
import HostTestSupport
import Testing

/// A report's breadcrumbs are stored apart from its row (schema 16): written with its journal,
/// written again only when a chain changed them, read back with it, deleted with it.
@Suite struct StoredBreadcrumbsTests {
    let folder = makeTemporaryDirectory("stored-breadcrumbs")
    let repository: Repository

    init() throws {
        repository = try Repository.open(folder: folder.appendingPathComponent("repo"))
    }

    /// A report whose document carries `count` breadcrumbs (a full ring is 100).
    static func document(_ summary: String, breadcrumbs count: Int) -> ReportDocument {
        var document = ReportDocument.summarised(summary)
        document.content.breadcrumbs = (1...count).map { index in
            Breadcrumb(
                sequence: UInt64(index), timestamp: Date(timeIntervalSince1970: 1_796_400_000 + Double(index)), level: .info,
                category: "checkout", message: "step \(index) of the order")
        }
        return document
    }

    func count(_ sql: String, _ rowID: Int64) throws -> Int64? {
        try repository.database.query(sql, [.integer(rowID)]).first?.first?.int
    }

    func stored(_ rowID: Int64) throws -> ReportDocument {
        try #require(try repository.record(rowID)).document
    }

    @Test("B-1: given the journaled document, a chain that left the breadcrumbs as they were neither writes nor reads them back (the record keeps what it holds) and counts the whole document; one that changed a breadcrumb or emptied them writes them")
    func journaledBreadcrumbsKept() throws {
        let journal = Self.document("journaled", breadcrumbs: 100)
        let rowID = try repository.journal(journal, session: "s", dialogPending: false)
        // What the record holds, changed behind the repository's back: a chainFinished that
        // compared them with what it holds would write them again.
        try repository.database.query(
            "UPDATE report_breadcrumbs SET breadcrumbs = json_set(breadcrumbs, '$[0].message', 'planted') WHERE record = ?", [.integer(rowID)])
        var chained = journal
        chained.content.summary = "chained"
        try repository.chainFinished(rowID, document: chained, journaled: journal)
        #expect(try stored(rowID).content.breadcrumbs[0].message == "planted")
        #expect(try stored(rowID).content.summary == "chained")
        #expect(try repository.record(rowID)?.bytes == chained.serialized().utf8.count)

        var masked = chained
        masked.content.breadcrumbs[41].message = "step [email] of the order"
        try repository.chainFinished(rowID, document: masked, journaled: chained)
        #expect(try stored(rowID).json == masked.json)

        var emptied = masked
        emptied.content.breadcrumbs = []
        try repository.chainFinished(rowID, document: emptied, journaled: masked)
        #expect(try count("SELECT COUNT(*) FROM report_breadcrumbs WHERE record = ?", rowID) == 0)
        #expect(try stored(rowID).json == emptied.json)
    }

    @Test("B-1: a report's breadcrumbs are written with its journal, not again when its chain left them as they were, again when it changed one, and read back whole each time")
    func writtenOnceUnlessChanged() throws {
        // Updates of the table, counted by a trigger of the test's own.
        try repository.database.execute("""
            CREATE TABLE breadcrumb_writes(record INTEGER);
            CREATE TRIGGER counted AFTER UPDATE ON report_breadcrumbs BEGIN INSERT INTO breadcrumb_writes VALUES(new.record); END;
            """)
        let journal = Self.document("journaled", breadcrumbs: 100)
        let rowID = try repository.journal(journal, session: "s", dialogPending: false)
        #expect(try count("SELECT COUNT(*) FROM reports WHERE rowid = ? AND json_type(document, '$.breadcrumbs') IS NULL", rowID) == 1)
        #expect(try stored(rowID).json == journal.json)

        var chained = journal
        chained.content.summary = "chained"
        try repository.chainFinished(rowID, document: chained)
        #expect(try count("SELECT COUNT(*) FROM breadcrumb_writes WHERE record = ?", rowID) == 0)
        #expect(try stored(rowID).json == chained.json)
        // The record counts the whole document, as when its breadcrumbs were in its row.
        #expect(try repository.record(rowID)?.bytes == chained.serialized().utf8.count)

        var masked = chained
        masked.content.breadcrumbs[41].message = "step [email] of the order"
        try repository.chainFinished(rowID, document: masked)
        #expect(try count("SELECT COUNT(*) FROM breadcrumb_writes WHERE record = ?", rowID) == 1)
        #expect(try stored(rowID).content.breadcrumbs[41].message == "step [email] of the order")
        #expect(try stored(rowID).json == masked.json)

        var emptied = masked
        emptied.content.breadcrumbs = []
        try repository.chainFinished(rowID, document: emptied)
        #expect(try count("SELECT COUNT(*) FROM report_breadcrumbs WHERE record = ?", rowID) == 0)
        #expect(try stored(rowID).json == emptied.json)
    }

    @Test("B-1: breadcrumbs kept apart stay with their record through an attribute set later and a hold, and go with its content when it is sent and with it when it is deleted")
    func followTheirRecord() throws {
        let document = Self.document("held", breadcrumbs: 10)
        let held = try repository.journal(document, session: "s", dialogPending: false)
        #expect(try repository.setAttribute("hang.duration_ms", "3200", onWaiting: document.id))
        try repository.holdForRequired(held, reason: "scrubber", notes: [], chainEnded: true)
        let read = try stored(held)
        #expect(read.content.attributes["hang.duration_ms"] == "3200")
        #expect(read.content.breadcrumbs.map(\.json) == document.content.breadcrumbs.map(\.json))
        try repository.finish(held, outcome: "sent")
        #expect(try count("SELECT COUNT(*) FROM report_breadcrumbs WHERE record = ?", held) == 0)

        let discarded = try repository.journal(Self.document("discarded", breadcrumbs: 10), session: "s", dialogPending: false)
        #expect(try count("SELECT COUNT(*) FROM report_breadcrumbs WHERE record = ?", discarded) == 1)
        try repository.discard(discarded)
        #expect(try count("SELECT COUNT(*) FROM report_breadcrumbs WHERE record = ?", discarded) == 0)
    }

    @Test("B-1: a record kept from schema 15 keeps its breadcrumbs in its document, read as before by a reader that does not migrate and after the upgrade")
    func fromSchema15() throws {
        let document = Self.document("kept", breadcrumbs: 5)
        let kept = try repository.journal(document, session: "s", dialogPending: false)
        try repository.database.execute("""
            UPDATE reports SET document = json_set(document, '$.breadcrumbs',
                json((SELECT breadcrumbs FROM report_breadcrumbs WHERE record = reports.rowid)));
            DROP TRIGGER breadcrumbs_with_record; DROP TABLE report_breadcrumbs; PRAGMA user_version = 15;
            """)
        let reader = try #require(try Repository.openForReading(folder: folder.appendingPathComponent("repo")))
        #expect(try reader.record(kept)?.document.content.breadcrumbs.map(\.json) == document.content.breadcrumbs.map(\.json))
        let reopened = try Repository.open(folder: folder.appendingPathComponent("repo"))
        #expect(try reopened.database.query("PRAGMA user_version").first?.first?.int == 16)
        #expect(try reopened.record(kept)?.document.json == document.json)
        // Written again (its chain's end), it is stored the new way.
        try reopened.chainFinished(kept, document: document)
        #expect(try reopened.database.query("SELECT COUNT(*) FROM report_breadcrumbs WHERE record = ?", [.integer(kept)]).first?.first?.int == 1)
        #expect(try reopened.record(kept)?.document.json == document.json)
    }

    @Test("I-7: breadcrumbs kept apart that cannot be read leave their report readable and listed, without them, its log saying so")
    func damagedBreadcrumbs() throws {
        let rowID = try repository.journal(Self.document("damaged", breadcrumbs: 3), session: "s", dialogPending: false)
        try repository.chainFinished(rowID, document: Self.document("damaged", breadcrumbs: 3))
        try repository.database.query("UPDATE report_breadcrumbs SET breadcrumbs = '[{\"timest' WHERE record = ?", [.integer(rowID)])
        let read = try stored(rowID)
        #expect(read.content.summary == "damaged")
        #expect(read.content.breadcrumbs.isEmpty)
        #expect(read.internalLog.map(\.message) == ["the stored breadcrumbs could not be read: left out"])
        #expect(try repository.summaries().map(\.rowID) == [rowID])
        #expect(try repository.unreadableRecords().isEmpty)
    }
}
