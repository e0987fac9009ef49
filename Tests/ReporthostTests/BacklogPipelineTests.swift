import Foundation
import Glibc
import HostStore
import HostSupport
import HostTestSupport
import Testing

/// A backlog of several batches goes through a pipeline: batch k+1 is read and batch k-1
/// unlinked on threads of their own while batch k is saved, and batch k-1's chains run once
/// its files are purged (SPEC D-1, D-2, H-13). Killed at each fault point, a launch leaves
/// exactly the state the order promises, and the next one finishes it without losing or
/// doubling a crash.
@Suite struct BacklogPipelineTests {
    /// Three batches: two of `Recovery.crashFilesPerBatch` and a short one.
    static let count = 2 * 128 + 44

    /// A fixture with the backlog, after a launch killed at `point`.
    func killedLaunch(at point: FaultPoint) throws -> CommandFixture {
        let fixture = CommandFixture("pipeline-\(point.rawValue)")
        try backlog(fixture)
        let killed = try fixture.run(["launch"], crashAt: point)
        #expect(killed.signal == SIGKILL, "\(killed)")
        return fixture
    }

    func backlog(_ fixture: CommandFixture) throws {
        let crashes = fixture.repository + "/crashes"
        try FileManager.default.createDirectory(atPath: crashes, withIntermediateDirectories: true)
        for index in 0..<Self.count {
            let text = ["reporthost-crash 1", "session backlog", "signal 11", "attribute index=\(index)", "end"].joined(separator: "\n") + "\n"
            try text.write(toFile: crashes + "/backlog-\(index).crash", atomically: false, encoding: .utf8)
        }
    }

    func crashFiles(_ fixture: CommandFixture) -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: fixture.repository + "/crashes")) ?? []).filter { $0.hasSuffix(".crash") }.count
    }

    func crashRecords(_ fixture: CommandFixture) throws -> [ReportRecord] {
        try (Repository.openForReading(folder: URL(fileURLWithPath: fixture.repository))?.records() ?? []).filter { $0.trigger == .crash }
    }

    @Test("D-1, D-2, I-6: killed after the first batch's save, nothing of the backlog is unlinked yet; the next launch saves each crash once")
    func killedAfterTheFirstSave() throws {
        let fixture = try killedLaunch(at: .afterSave)
        let saved = try crashRecords(fixture)
        #expect(saved.count == 128 && saved.allSatisfy { $0.state == .pendingPurge }, "\(saved.map(\.state))")
        #expect(crashFiles(fixture) == Self.count, "no file is unlinked before its batch is saved and the launch goes on")
        try finished(fixture)
    }

    @Test("D-1, D-2, I-6: killed at the first purge's mark, the first batch is marked after the second is saved, whose files are all still there; the next launch finishes both")
    func killedAtTheFirstMark() throws {
        let fixture = try killedLaunch(at: .afterPurge)
        let saved = try crashRecords(fixture)
        #expect(saved.count == 256, "the second batch is saved before the first is marked purged")
        #expect(saved.filter { $0.state == .pendingChain }.count == 128, "the first batch, its files gone, is marked")
        #expect(saved.filter { $0.state == .pendingPurge }.count == 128, "the second waits for its unlinks")
        #expect(crashFiles(fixture) == Self.count - 128, "only the first batch's files are gone")
        try finished(fixture)
    }

    @Test("D-1, H-13: a batch's chains run once its files are purged, before the last batch is saved; killed in the first chain, the next launch finishes every crash once")
    func killedInTheFirstChain() throws {
        let fixture = try killedLaunch(at: .duringHandlers)
        let saved = try crashRecords(fixture)
        #expect(saved.count == 256, "the first batch's chains run after the second batch is saved, never after the last")
        #expect(saved.filter { $0.state == .pendingChain }.count == 128, "the first batch, purged, is in its chains")
        #expect(saved.filter { $0.state == .pendingPurge }.count == 128, "the second waits for its unlinks to be marked")
        // The second batch's files are unlinked on a thread of their own meanwhile.
        #expect((Self.count - 256)...(Self.count - 128) ~= crashFiles(fixture), "the last batch's files are all there")
        try finished(fixture)
    }

    /// The next launch, without faults: every crash once, in order, and no file left.
    func finished(_ fixture: CommandFixture) throws {
        #expect(try fixture.run(["launch"]).status == 0)
        let records = try crashRecords(fixture)
        #expect(records.count == Self.count)
        #expect(records.allSatisfy { $0.state == .awaitingFirstAttempt }, "\(Set(records.map(\.state)))")
        #expect(records.map { $0.document.content.attributes["index"] ?? "" }.sorted() == (0..<Self.count).map { "\($0)" }.sorted())
        #expect(crashFiles(fixture) == 0)
    }
}
