import Foundation
import Host
import HostSupport
import HostTestSupport
import Receiver
import Testing

/// SPEC T-1 where a user meets the trail: `show`, `show --json`, and what reaches a server.
@Suite struct ChangeTrailCommandTests {
    let fixture = CommandFixture("reporthost-trail")
    static let scrubber = Products.directory.appendingPathComponent("libscrub-pii.so").path

    /// Raises an error report through scrub-pii, sent to a receiver; returns what the
    /// receiver got and the stored document.
    func send(extra: String = "") throws -> (received: JSONValue?, stored: JSONValue, show: String) {
        let receiver = try LocalReceiver(folder: fixture.folder.appendingPathComponent("got-\(UUID().uuidString)"))
        defer { receiver.stop() }
        let configuration = try fixture.configuration(url: receiver.url, extra: extra)
        let result = try fixture.run([
            "report", "error", "--summary", "mail alice@example.com now", "--handler", Self.scrubber, "--config", configuration,
            "--print",
        ])
        guard result.status == 0 else { throw CommandFixture.CommandFailed(description: result.stderr) }
        let id = try #require(try JSONValue.parse(result.stdout)["report_id"]?.stringValue)
        let stored = try JSONValue.parse(try fixture.run(["show", id, "--json"]).stdout)
        let show = try fixture.run(["show", id]).stdout
        return (receiver.received.first { $0.uuid == id }?.report, stored, show)
    }

    @Test("T-1: show prints the trail an entry a line; the stored document and the server's annotation hold the same list")
    func shownStoredAndSent() async throws {
        try await offPool { [self] in
            let (received, stored, show) = try send()
            #expect(show.contains("changes:\n  scrub-pii (handler.before) replaced 5..12 of the summary (was 26 bytes)\n"), "\(show)")
            let changes = try #require(stored["changes"])
            #expect(changes.arrayValue?.first?["plugin"]?.stringValue == "scrub-pii")
            #expect(received?["annotations"]?["reporthost.changes"] == changes)
            let sent = try #require(received).serialized()
            #expect(!sent.contains("alice@example.com"))
        }
    }

    @Test("T-1: \"privacy\": {\"sendChanges\": false} keeps the trail on the machine, still stored and shown")
    func notSent() async throws {
        try await offPool { [self] in
            let (received, stored, show) = try send(extra: #""privacy": {"sendChanges": false}"#)
            #expect(received != nil)
            #expect(received?["annotations"]?["reporthost.changes"] == nil)
            #expect(stored["changes"]?.arrayValue?.isEmpty == false)
            #expect(show.contains("scrub-pii (handler.before) replaced 5..12 of the summary"))
        }
    }

    @Test("T-1: a privacy key of the wrong type or an unknown one is a configuration error naming it")
    func badPrivacyKey() async throws {
        try await offPool { [self] in
            for (text, named) in [(#"{"privacy": {"sendChanges": "no"}}"#, "privacy.sendChanges"), (#"{"privacy": {"send": true}}"#, "privacy.send")] {
                let file = fixture.folder.appendingPathComponent("p-\(UUID().uuidString).json")
                try text.write(to: file, atomically: true, encoding: .utf8)
                let result = try fixture.run(["report", "error", "--config", file.path])
                #expect(result.status == 2)
                #expect(result.stderr.contains("'\(named)'"), "\(result.stderr)")
            }
        }
    }
}
