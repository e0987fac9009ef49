import Foundation
import Glibc
import Host
import HostTestSupport
import Testing

/// Delivery through the real executable: initial attempts (I-3) and the submission fault
/// points (I-6, D-4) with real SIGKILLs and a real loopback receiver.
@Suite struct DeliveryCommandTests {
    let folder = makeTemporaryDirectory("delivery-cli")

    func config(_ receiver: LocalReceiver) throws -> String {
        let file = folder.appendingPathComponent("c-\(UUID().uuidString).json")
        try #"{"submission": {"url": "\#(receiver.url)", "timeoutMs": 3000}, "retry": {"intervalSeconds": 0}}"#
            .write(to: file, atomically: true, encoding: .utf8)
        return file.path
    }

    func reporthost(_ arguments: [String], repository: String, crashAt: FaultPoint? = nil) throws -> ChildProcess.Result {
        try ChildProcess.reporthost(
            arguments + ["--repository", repository], environment: crashAt.map { ["REPORTHOST_CRASH_AT": $0.rawValue] } ?? [:])
    }

    @Test("I-3: report makes its initial attempt after those of reports recovered in the same launch, oldest first")
    func initialAttemptOrder() throws {
        let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got"))
        defer { receiver.stop() }
        let repository = folder.appendingPathComponent("repo").path
        let configuration = try config(receiver)
        _ = try reporthost(["crash"], repository: repository)
        let result = try reporthost(["report", "error", "--summary", "after the crash", "--config", configuration, "--print"], repository: repository)
        #expect(result.status == 0, "\(result.stderr)")
        let ownID = try JSONValue.parse(result.stdout)["report_id"]?.stringValue
        let types = receiver.received.map { $0.report["attributes"]?["reporthost.trigger"]?.stringValue }
        #expect(types == ["crash", "log_error"])
        #expect(receiver.received.last?.uuid == ownID)
        let records = try Repository.openForReading(folder: URL(fileURLWithPath: repository))?.records() ?? []
        #expect(records.allSatisfy { $0.state == .terminal && $0.outcome == "accepted (HTTP 200)" })
    }

    @Test("I-6, D-4, D-9: a kill during submission or after acceptance loses nothing; only after-accept may send the same id twice")
    func submissionFaultPoints() throws {
        for point in [FaultPoint.duringSubmit, .afterAccept] {
            let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got-\(point.rawValue)"))
            let repository = folder.appendingPathComponent("repo-\(point.rawValue)").path
            let configuration = try config(receiver)
            let killed = try reporthost(["report", "bug", "--config", configuration], repository: repository, crashAt: point)
            #expect(killed.signal == SIGKILL, "\(point)")
            let stored = try Repository.openForReading(folder: URL(fileURLWithPath: repository))?.records() ?? []
            #expect(stored.map(\.state) == [.submitting], "\(point)")
            let launched = try reporthost(["launch", "--config", configuration], repository: repository)
            #expect(launched.status == 0, "\(launched.stderr)")
            let after = try Repository.openForReading(folder: URL(fileURLWithPath: repository))?.records() ?? []
            // The killed session also left an abnormal exit (D-16), delivered once.
            #expect(after.map(\.trigger).sorted { $0.name < $1.name } == [.abnormalExit, .upload], "\(point)")
            #expect(after.allSatisfy { $0.state == .terminal && $0.outcome == "accepted (HTTP 200)" })
            let bug = try #require(after.first { $0.trigger == .upload })
            #expect(bug.attempts == 2, "\(point): the interrupted attempt counts")
            let bugSends = receiver.received.filter { $0.uuid == bug.reportID }.count
            #expect(bugSends == (point == .afterAccept ? 2 : 1), "\(point): the same id sent \(bugSends) times")
            #expect(receiver.received.count == bugSends + 1)
            receiver.stop()
        }
    }

    @Test("I-3: without a submission URL nothing is attempted; records stay awaiting_first_attempt")
    func noURL() throws {
        let repository = folder.appendingPathComponent("repo-none").path
        _ = try reporthost(["report", "bug"], repository: repository)
        _ = try reporthost(["launch"], repository: repository)
        let records = try Repository.openForReading(folder: URL(fileURLWithPath: repository))?.records() ?? []
        #expect(records.map(\.state) == [.awaitingFirstAttempt])
        #expect(records.first?.attempts == 0)
    }
}
