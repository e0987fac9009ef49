import Foundation
@testable import HostModel
@testable import HostStore
import HostSupport
import HostTestSupport
import Testing

/// What a recovered crash's record is written as: its payload apart from its row (schema 15),
/// and its chain's end and the next one's start in one commit (SPEC H-13).
@Suite struct RecoveredRecordTests {
    let folder = makeTemporaryDirectory("recovered-records")
    let repository: Repository

    init() throws {
        repository = try Repository.open(folder: folder.appendingPathComponent("repo"))
    }

    /// A payload the size of a real crash's (5 KB of frames).
    static let payload: JSONValue = {
        let frames: [JSONValue] = (0..<80).map { (index: Int) -> JSONValue in
            let address = "0x" + String(0x4000_0000 + index * 16, radix: 16)
            return .object([("address", .string(address)), ("symbol", .string("function_\(index)"))])
        }
        return .object([("signal", .string("SIGSEGV")), ("frames", .array(frames))])
    }()

    /// A crash file's record saved in `target` (this suite's repository when nil): its row id.
    func saveCrash(_ summary: String, in target: Repository? = nil) throws -> Int64 {
        let file = folder.appendingPathComponent("\(summary).crash").path
        let save = Repository.CrashSave(document: .summarised(summary, trigger: .crash), serializedCrash: Self.payload.serialized(), crashFile: file, session: nil)
        return try #require(try (target ?? repository).saveCrashes([save]).first?.rowID)
    }

    func count(_ sql: String, _ rowID: Int64) throws -> Int64? {
        try repository.database.query(sql, [.integer(rowID)]).first?.first?.int
    }

    @Test("D-1: a crash's payload is stored once apart from its record's row, read back whole through every state change, and deleted with the record")
    func payloadApart() throws {
        let finished = try saveCrash("finished")
        let discarded = try saveCrash("discarded")
        // Not in the row, which each state change writes again.
        #expect(try count("SELECT COUNT(*) FROM reports WHERE rowid = ? AND crash IS NULL", finished) == 1)
        #expect(try count("SELECT COUNT(*) FROM crash_payloads WHERE record = ?", finished) == 1)
        try repository.crashFilesPurged([finished, discarded])
        try repository.chainFinished(finished, document: ReportDocument.summarised("finished", trigger: .crash))
        #expect(try repository.record(finished)?.crash == Self.payload)
        #expect(try repository.records(in: [.awaitingFirstAttempt]).map(\.crash) == [Self.payload])
        // Sent: the payload goes with the record's content; discarded: with the record.
        try repository.finish(finished, outcome: "sent")
        try repository.discard(discarded)
        #expect(try repository.record(finished)?.crash == nil)
        #expect(try repository.database.query("SELECT COUNT(*) FROM crash_payloads").first?.first?.int == 0)
    }

    @Test("D-1: a record kept from schema 14 keeps its payload in its row, read as before the upgrade")
    func payloadFromSchema14() throws {
        let kept = try saveCrash("kept")
        try repository.database.execute("""
            UPDATE reports SET crash = (SELECT payload FROM crash_payloads WHERE record = reports.rowid);
            DROP TRIGGER crash_payload_with_record; DROP TABLE crash_payloads; PRAGMA user_version = 14;
            """)
        // A reader (`status`, `show`) does not migrate: it reads the column.
        let reader = try #require(try Repository.openForReading(folder: folder.appendingPathComponent("repo")))
        #expect(try reader.record(kept)?.crash == Self.payload)
        let reopened = try Repository.open(folder: folder.appendingPathComponent("repo"))
        #expect(try reopened.database.query("PRAGMA user_version").first?.first?.int == Int64(Repository.schemaVersion))
        #expect(try reopened.record(kept)?.crash == Self.payload)
        #expect(try reopened.record(try saveCrash("new", in: reopened))?.crash == Self.payload)
    }

    @Test("H-13: a recovered report's chain ends in the commit that reopens the next one's: its run counted, its record named; both or neither")
    func chainEndReopensNext() throws {
        let first = try saveCrash("first")
        let second = try saveCrash("second")
        try repository.crashFilesPurged([first, second])
        try repository.markSession("s", phase: .recovering)
        let running = try repository.reopenChain(.init(first, newID: "first-run", session: "s"))
        #expect(running.runs == 1 && running.id == "first-run")
        #expect(try repository.sessionState("s")?.chainRecord == first)

        let next = try #require(try repository.chainFinished(
            first, document: ReportDocument.summarised("first", trigger: .crash), session: "s", flush: false, reopening: .init(second, newID: "second-run", session: "s")))
        #expect(next.id == "second-run" && next.runs == 1 && next.skipReason == nil)
        #expect(try repository.record(first)?.state == .awaitingFirstAttempt)
        #expect(try repository.database.query("SELECT report_id FROM reports WHERE rowid = ?", [.integer(second)]).first?.first?.string == "second-run")
        #expect(try repository.sessionState("s")?.chainRecord == second)

        // The next reopening fails (SQLite aborts it): the first chain's end is taken back too.
        let third = try saveCrash("third")
        let fourth = try saveCrash("fourth")
        try repository.crashFilesPurged([third, fourth])
        _ = try repository.reopenChain(.init(third, newID: "third-run", session: "s"))
        try repository.database.execute("""
            CREATE TRIGGER refuse_reopening BEFORE UPDATE OF chain_runs ON reports WHEN old.rowid = \(fourth)
                BEGIN SELECT RAISE(ABORT, 'refused'); END;
            """)
        #expect(throws: StorageError.self) {
            try repository.chainFinished(third, document: ReportDocument.summarised("third", trigger: .crash), session: "s", reopening: .init(fourth, newID: "fourth-run", session: "s"))
        }
        #expect(try repository.record(third)?.state == .pendingChain)
        #expect(try repository.sessionState("s")?.chainRecord == third)
        #expect(try count("SELECT chain_runs FROM reports WHERE rowid = ?", fourth) == 0)
    }
}
