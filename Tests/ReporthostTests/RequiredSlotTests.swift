import Foundation
import Glibc
import Host
import Receiver
import HostTestSupport
import Testing

/// `plugins.required` (SPEC I-7, status `held`): privacy fails closed when a team asks. A
/// report whose required slot was empty, quarantined, crashed, timed out or was cut short by
/// a kill is stored `held`, never sent; its chain runs again once the slot can run. Real
/// child processes, real plugins, real SQLite files and a real loopback receiver.
@Suite struct RequiredSlotTests {
    let folder = makeTemporaryDirectory("required")
    var repository: String { folder.appendingPathComponent("repo").path }

    @discardableResult
    func run(_ arguments: [String], crashAt: FaultPoint? = nil) throws -> ChildProcess.Result {
        var environment: [String: String] = [:]
        if let crashAt { environment["REPORTHOST_CRASH_AT"] = crashAt.rawValue }
        return try ChildProcess.reporthost(arguments + ["--repository", repository], environment: environment, directory: folder)
    }

    func records() throws -> [ReportRecord] {
        try #require(try Repository.openForReading(folder: URL(fileURLWithPath: repository))).records()
    }

    /// A configuration that sends to `receiver` and requires `slots`.
    func config(_ receiver: LocalReceiver, required slots: [String]) throws -> String {
        let file = folder.appendingPathComponent("c-\(UUID().uuidString).json")
        let list = slots.map { "\"\($0)\"" }.joined(separator: ", ")
        try """
            {"submission": {"url": "\(receiver.url)", "timeoutMs": 3000}, "retry": {"intervalSeconds": 0},
             "plugins": {"required": [\(list)]}, "limits": {"callbackTimeoutMs": 300, "recoveredReturnMs": 300}}
            """.write(to: file, atomically: true, encoding: .utf8)
        return file.path
    }

    /// A scrubber that marks each report it saw (`changed.by` = `marker`) and completes.
    static let scrubber = markerHandler

    /// A scrubber that never completes: the host gives up on it after the callback limit.
    static let stalled = fixtureHandler(
        name: "stalled", before: "on_before",
        extra: """
            static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                (void)c; (void)t; (void)done;
                host->set_attribute(r, "half-scrubbed", "yes");
            }
            """)

    @Test("I-7: a report whose required handler slot is empty or timed out is held, not sent; a launch with a handler that runs reruns its chain and sends it scrubbed")
    func emptyAndTimedOut() async throws {
        try await offPool { [self] in
            let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got"))
            defer { receiver.stop() }
            let configuration = try config(receiver, required: ["handler"])
            let stalled = try Fixtures.plugin("stalled", source: Self.stalled)
            let scrubber = try Fixtures.plugin("scrubber", source: Self.scrubber)

            let empty = try run(["report", "error", "--summary", "no scrubber", "--config", configuration])
            #expect(empty.status == 0, "\(empty.stderr)")
            #expect(empty.stderr.contains("held, not sent: the required handler slot did not run fully: the slot is empty"), "\(empty.stderr)")
            let first: [String?] = try records().map { $0.held }
            #expect(first == ["required: the required handler slot did not run fully: the slot is empty"])
            let timedOut = try run(["report", "error", "--summary", "stalled scrubber", "--handler", stalled.path, "--config", configuration])
            #expect(timedOut.status == 0, "\(timedOut.stderr)")
            #expect(receiver.received.isEmpty)

            // That launch could run the handler slot, so the first report's chain ran again: the
            // stalled handler held both.
            let held = try records()
            #expect(held.count == 2 && held.allSatisfy { $0.state == .held })
            let reasons = held.compactMap(\.held)
            #expect(reasons.allSatisfy { $0.hasPrefix("required: ") && $0.contains("stalled.on_before_report_created did not complete") }, "\(reasons)")
            #expect(reasons.contains { $0.contains("within 300 ms") }, "\(reasons)")
            // What the stalled handler did without completing is not kept: the journal is.
            #expect(held.allSatisfy { $0.document.content.attributes["half-scrubbed"] == nil })
            // Delivery passes leave held reports alone.
            #expect(try run(["launch", "--config", configuration]).status == 0)
            #expect(receiver.received.isEmpty)

            let launch = try run(["launch", "--handler", scrubber.path, "--config", configuration])
            #expect(launch.status == 0, "\(launch.stderr)")
            let sent = receiver.received.map(\.report)
            #expect(sent.count == 2, "\(launch.stderr)")
            #expect(sent.allSatisfy { $0["attributes"]?["changed.by"]?.stringValue == "marker" }, "\(sent)")
            #expect(Set(sent.compactMap { $0["attributes"]?["error.message"]?.stringValue }) == ["no scrubber", "stalled scrubber"])
            #expect(try records().allSatisfy { $0.state == .terminal && $0.held == nil })
        }
    }

    @Test("I-7, H-13: a report killed during its required handler is held, and the next launch runs its chain again instead of sending the journal")
    func killedDuringChain() async throws {
        try await offPool { [self] in
            let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got"))
            defer { receiver.stop() }
            let configuration = try config(receiver, required: ["handler"])
            let scrubber = try Fixtures.plugin("scrubber", source: Self.scrubber)
            let killed = try run(
                ["report", "error", "--summary", "killed", "--handler", scrubber.path, "--config", configuration], crashAt: .duringHandlers)
            #expect(killed.signal == SIGKILL)

            // The next launch has no handler: the journal is held, not sent without its changes.
            let bare = try run(["launch", "--config", configuration])
            #expect(bare.status == 0, "\(bare.stderr)")
            #expect(bare.stderr.contains("held, not sent: the host stopped during the handler chain"), "\(bare.stderr)")
            #expect(receiver.received.compactMap { $0.report["attributes"]?["error.message"]?.stringValue }.contains("killed") == false)

            #expect(try run(["launch", "--handler", scrubber.path, "--config", configuration]).status == 0)
            let sent = try #require(receiver.received.first { $0.report["attributes"]?["error.message"]?.stringValue == "killed" })
            #expect(sent.report["attributes"]?["changed.by"]?.stringValue == "marker")
        }
    }

    @Test("I-7: with the required handler quarantined, reports are held; a rebuilt plugin runs their chains and sends them")
    func quarantinedThenRebuilt() async throws {
        try await offPool { [self] in
            let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got"))
            defer { receiver.stop() }
            let configuration = try config(receiver, required: ["handler"])
            let crasher = try Fixtures.freshCopy(of: Fixtures.plugin("crasher", source: QuarantineTests.onEvery))
            let crashed = try run(["report", "error", "--summary", "crashed", "--handler", crasher.path, "--config", configuration])
            #expect(crashed.signal == SIGSEGV)

            let quarantined = try run(["report", "error", "--summary", "after", "--handler", crasher.path, "--config", configuration])
            #expect(quarantined.status == 0, "\(quarantined.stderr)")
            #expect(quarantined.stderr.contains("quarantined"), "\(quarantined.stderr)")
            #expect(receiver.received.isEmpty)
            // The journal, the crash the plugin caused, and the report raised with the slot empty.
            let held = try records()
            #expect(held.count == 3 && held.allSatisfy { $0.state == .held }, "\(held.map { "\($0.state) \($0.held ?? "")" })")

            // The team ships a fixed build at a new path: not quarantined, so the chains run.
            let rebuilt = try Fixtures.plugin("scrubber", source: Self.scrubber)
            let launch = try run(["launch", "--handler", rebuilt.path, "--config", configuration])
            #expect(launch.status == 0, "\(launch.stderr)")
            let sent = receiver.received.map(\.report)
            #expect(sent.count == 3, "\(launch.stderr)")
            #expect(sent.allSatisfy { $0["attributes"]?["changed.by"]?.stringValue == "marker" })
            #expect(Set(sent.compactMap { $0["attributes"]?["reporthost.trigger"]?.stringValue }) == ["log_error", "crash"])
        }
    }

    @Test("I-7: a required delegate slot left empty holds the report; with the requirement removed (the default is none) it is sent")
    func requiredDelegate() async throws {
        try await offPool { [self] in
            let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got"))
            defer { receiver.stop() }
            let scrubber = try Fixtures.plugin("scrubber", source: Self.scrubber)
            let strict = try config(receiver, required: ["handler", "delegate"])
            let result = try run(["report", "error", "--summary", "strict", "--handler", scrubber.path, "--config", strict])
            #expect(result.stderr.contains("the required delegate slot did not run fully: the slot is empty"), "\(result.stderr)")
            let states: [RecordState] = try records().map { $0.state }
            #expect(states == [.held])
            #expect(receiver.received.isEmpty)
            // Without the requirement the held report's chain runs again, and both are sent.
            let open = try config(receiver, required: [])
            #expect(try run(["report", "error", "--summary", "open", "--config", open]).status == 0)
            #expect(Set(receiver.received.compactMap { $0.report["attributes"]?["error.message"]?.stringValue }) == ["strict", "open"])
        }
    }
}
