import Foundation
import Glibc
@testable import Host
@testable import HostModel
@testable import HostSupport
@testable import HostStore
import HostTestSupport
import Receiver
import Testing

/// What used to happen without a word (issue 31's "nothing silent"): each case says so now,
/// through the real executable.
@Suite struct NothingSilentTests {
    let fixture = CommandFixture("silent")

    @Test("I-6: a mistyped REPORTHOST_CRASH_AT is a usage error (exit 2) listing the points, never ignored")
    func unknownCrashPoint() throws {
        let result = try fixture.run(["report", "bug"], environment: ["REPORTHOST_CRASH_AT": "after-jornal"])
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stderr.contains("'after-jornal' is not a fault point") && result.stderr.contains("after-journal"), "\(result.stderr)")
    }

    @Test("R-7: an --attach file the report cannot take is a warning on stderr naming the file; the report is stored (exit 0)")
    func droppedAttachmentIsSaid() throws {
        let big = fixture.folder.appendingPathComponent("big.bin")
        try Data(count: 4_000_000).write(to: big)
        let result = try fixture.run(["report", "bug", "--attach", big.path])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("attachment big.bin not attached: it is 4000000 bytes, over the 3145728-byte limit"), "\(result.stderr)")
    }

    /// Two stored reports whose ids share the prefix `abcdef`.
    func seedTwo() throws -> (String, String) {
        #expect(try fixture.run(["launch"]).status == 0)
        let repository = try Repository.open(folder: URL(fileURLWithPath: fixture.repository))
        let ids = ["abcdef01-0000-4000-8000-000000000001", "abcdef02-0000-4000-8000-000000000002"]
        for id in ids {
            var content = ReportContent()
            content.summary = "seeded \(id.prefix(8))"
            try repository.seedRecord(
                ReportDocument(id: id, trigger: .logError, content: content, internalLog: [], createdAt: Date()), state: .awaitingFirstAttempt)
        }
        return (ids[0], ids[1])
    }

    @Test("I: show takes a unique id prefix as git does, says when one is ambiguous, and lists how many reports there are when none matches")
    func showByPrefix() throws {
        let (first, _) = try seedTwo()
        let unique = try fixture.run(["show", String(first.prefix(8))])
        #expect(unique.status == 0 && unique.stdout.contains("report \(first)") && unique.stdout.contains("summary: seeded abcdef01"), "\(unique.stderr)")
        let ambiguous = try fixture.run(["show", "abcdef"])
        #expect(ambiguous.status == 2 && ambiguous.stderr.contains("'abcdef' is ambiguous: 2 reports begin with it"), "\(ambiguous.stderr)")
        let none = try fixture.run(["show", "ffff"])
        #expect(none.status == 1 && none.stderr.contains("no report ffff is stored (2 report(s) are"), "\(none.stderr)")
    }

    @Test("D-9: show of a delivered report says its content was removed when it became terminal, and when")
    func showDelivered() async throws {
        try await offPool { [self] in
            let receiver = try LocalReceiver(folder: fixture.folder.appendingPathComponent("got"))
            defer { receiver.stop() }
            let sent = try fixture.run(["report", "error", "--summary", "gone", "--config", try fixture.configuration(url: receiver.url)])
            #expect(sent.status == 0 && receiver.received.count == 1, "\(sent.stderr)")
            let shown = try fixture.run(["show", "latest"])
            #expect(shown.stdout.contains("state terminal") && shown.stdout.contains("its content was removed when it became terminal ("), "\(shown.stdout)")
        }
    }

    @Test("I-7: a launch that recovers a crash straight into held says so, not only \"0 recovered\"")
    func launchSaysHeld() throws {
        let config = try fixture.configuration(url: "http://127.0.0.1:9/post", extra: #""plugins": {"required": ["handler"]}"#)
        _ = try fixture.run(["crash", "--config", config])
        let launch = try fixture.run(["launch", "--config", config])
        #expect(launch.status == 0, "\(launch.stderr)")
        #expect(launch.stderr.contains("launch: 0 recovered, 1 held for a required slot"), "\(launch.stderr)")
    }

    @Test("H-10: a callback still running after 5 s logs one line naming the plugin's call and its limit")
    func slowCallbackIsSaid() async throws {
        try await offPool { [self] in
            let stalled = try Fixtures.plugin("stalled", source: RequiredSlotTests.stalled)
            let config = fixture.folder.appendingPathComponent("slow.json")
            try #"{"limits": {"callbackTimeoutMs": 6000}}"#.write(to: config, atomically: true, encoding: .utf8)
            let result = try fixture.run(["report", "error", "--handler", stalled.path, "--config", config.path])
            #expect(result.status == 0, "\(result.stderr)")
            let notices = result.stderr.components(separatedBy: "stalled.on_before_report_created is still running after 5 s; its limit is 6000 ms")
            #expect(notices.count == 2, "one notice: \(result.stderr)")
        }
    }
}
