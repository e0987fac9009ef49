import Foundation
import Glibc
import Host
import HostStore
import HostSupport
import HostTestSupport
import Receiver
import Testing

/// `plugins.required` (SPEC I-7, status `held`): privacy fails closed when a team asks. A
/// report whose required slot was empty, quarantined, crashed, timed out or was cut short by
/// a kill is stored `held`, never sent; its chain runs again once the slot can run. Real
/// child processes, real plugins, real SQLite files and a real loopback receiver.
@Suite struct RequiredSlotTests {
    let fixture = CommandFixture("required")
    var folder: URL { fixture.folder }
    var repository: String { fixture.repository }

    @discardableResult
    func run(_ arguments: [String], crashAt: FaultPoint? = nil) throws -> ChildProcess.Result {
        try fixture.run(arguments, crashAt: crashAt)
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

            // `report` never reruns a held chain ahead of its own report: the first stays held
            // for its empty slot, the second for its stalled handler.
            let held = try records()
            #expect(held.count == 2 && held.allSatisfy { $0.state == .held })
            let reasons = held.compactMap(\.held)
            #expect(reasons.first == "required: the required handler slot did not run fully: the slot is empty", "\(reasons)")
            #expect(reasons.last?.contains("stalled.on_before_report_created did not complete") == true, "\(reasons)")
            #expect(reasons.last?.contains("within 300 ms") == true, "\(reasons)")
            #expect(!timedOut.stderr.contains("the chain runs again"), "\(timedOut.stderr)")
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
            // Without the requirement the held report's chain runs again at the next launch (a
            // report raised meanwhile is sent first), and both are sent.
            let open = try config(receiver, required: [])
            #expect(try run(["report", "error", "--summary", "open", "--config", open]).status == 0)
            #expect(receiver.received.compactMap { $0.report["attributes"]?["error.message"]?.stringValue } == ["open"])
            #expect(try run(["launch", "--config", open]).status == 0)
            #expect(Set(receiver.received.compactMap { $0.report["attributes"]?["error.message"]?.stringValue }) == ["strict", "open"])
        }
    }

    /// Completes from a thread of its own 50 ms after returning (the seed's attachment
    /// example does so), marking the report.
    static let late = fixtureHandler(
        name: "late", before: "on_before",
        extra: """
            #include <pthread.h>
            #include <unistd.h>
            static rh_completion pending;
            static void *finish(void *arg) { (void)arg; usleep(50 * 1000); pending(); return NULL; }
            static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                (void)c; (void)t;
                host->set_attribute(r, "changed.by", "late");
                pending = done;
                pthread_t thread;
                pthread_create(&thread, NULL, finish, NULL);
                pthread_detach(thread);
            }
            """)

    @Test("I-7: a held running-app report is rerun as a running-app report: a handler completing from its own thread after returning releases it")
    func heldRunningAppReportRerunAsOne() async throws {
        try await offPool { [self] in
            let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got"))
            defer { receiver.stop() }
            let configuration = try config(receiver, required: ["handler"])
            #expect(try run(["report", "error", "--summary", "held first", "--config", configuration]).status == 0)
            #expect(try records().map(\.state) == [.held])
            let late = try Fixtures.plugin("late", source: Self.late, flags: ["-pthread"])
            let launch = try run(["launch", "--handler", late.path, "--config", configuration])
            #expect(launch.status == 0, "\(launch.stderr)")
            let sent = try #require(receiver.received.first, "still held: \(launch.stderr)")
            #expect(sent.report["attributes"]?["changed.by"]?.stringValue == "late")
            #expect(try records().map(\.state) == [.terminal])
        }
    }

    /// A delegate with only the asynchronous attachments form, which recovered and terminating
    /// reports never call.
    static let asyncDelegate = fixturePrelude + """
        static void decide_later(void *c, rh_report *r, rh_attachments_decision decide) { (void)c; (void)r; decide(NULL, 0); }
        static rh_delegate delegate;
        static rh_handler handler;
        const rh_handler *rh_plugin_entry(const rh_host_api *h) {
            host = h;
            delegate.abi_major = RH_ABI_VERSION_MAJOR;
            delegate.abi_minor = RH_ABI_VERSION_MINOR;
            delegate.struct_size = sizeof delegate;
            delegate.attachments_for_report_async = decide_later;
            handler.abi_major = RH_ABI_VERSION_MAJOR;
            handler.abi_minor = RH_ABI_VERSION_MINOR;
            handler.struct_size = sizeof handler;
            handler.name = "async-only";
            handler.delegate = &delegate;
            return &handler;
        }
        """

    @Test("I-7, A-3: a required delegate that has only the asynchronous form holds crash and terminating reports (fail closed); a held terminating report is sent once a launch reruns it as a running-app report")
    func requiredAsyncDelegateFailsClosed() async throws {
        try await offPool { [self] in
            let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got"))
            defer { receiver.stop() }
            let configuration = try config(receiver, required: ["delegate"])
            let delegate = try Fixtures.plugin("async-only", source: Self.asyncDelegate)
            let common = ["--delegate", delegate.path, "--config", configuration]
            let terminating = try run(["report", "exception", "--summary", "fatal", "--terminating"] + common)
            #expect(terminating.status == 0, "\(terminating.stderr)")
            #expect(terminating.stderr.contains("held, not sent"), "\(terminating.stderr)")
            #expect(try records().map(\.state) == [.held])
            #expect(receiver.received.isEmpty)
            _ = try run(["crash"] + common)
            // The launch reruns the held report as the running-app report it is (no longer
            // terminating): the delegate runs, and it is sent. The crash stays held.
            #expect(try run(["launch"] + common).status == 0)
            #expect(try run(["report", "error", "--summary", "live"] + common).status == 0)
            #expect(receiver.received.compactMap { $0.report["attributes"]?["error.message"]?.stringValue } == ["fatal", "live"])
            let all = try records()
            let held = all.filter { $0.state == .held }
            #expect(held.map(\.trigger) == [.crash], "\(all.map { "\($0.trigger) \($0.state)" })")
            #expect(held.allSatisfy { $0.held?.contains("attachments_for_report_async not called") == true }, "\(held.map(\.held))")
        }
    }

    @Test("I-7: reruns of held reports are a launch's, at most four a launch, oldest first; one that ends held again waits its back-off; `report` never waits for one")
    func reruns() async throws {
        try await offPool { [self] in
            let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got"))
            defer { receiver.stop() }
            let configuration = try config(receiver, required: ["handler"])
            for number in 1...6 { #expect(try run(["report", "error", "--summary", "held \(number)", "--config", configuration]).status == 0) }
            let stalled = try Fixtures.plugin("stalled", source: Self.stalled)
            // The user's own report is stored and sent; no held chain runs first.
            let own = try run(["report", "error", "--summary", "own", "--handler", try Fixtures.plugin("scrubber", source: Self.scrubber).path, "--config", configuration])
            #expect(own.status == 0 && !own.stderr.contains("the chain runs again"), "\(own.stderr)")
            #expect(receiver.received.compactMap { $0.report["attributes"]?["error.message"]?.stringValue } == ["own"])
            // A stalled handler: the four oldest rerun, and end held again with a back-off.
            let first = try run(["launch", "--handler", stalled.path, "--config", configuration])
            #expect(first.stderr.components(separatedBy: "the chain runs again").count - 1 == 4, "\(first.stderr)")
            #expect(first.stderr.contains("rerun not before"), "\(first.stderr)")
            // The next launch reruns only the two not yet tried.
            let second = try run(["launch", "--handler", stalled.path, "--config", configuration])
            #expect(second.stderr.components(separatedBy: "the chain runs again").count - 1 == 2, "\(second.stderr)")
            #expect(second.stderr.contains("held 5") == false)
            let third = try run(["launch", "--handler", stalled.path, "--config", configuration])
            #expect(!third.stderr.contains("the chain runs again"), "every held report waits its back-off: \(third.stderr)")
            #expect(try records().filter { $0.state == .held }.count == 6)
        }
    }
}
