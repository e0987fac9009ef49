import Foundation
import Glibc
import Host
import HostSupport
import HostTestSupport
import Testing

/// Human-readable outputs are safe in a terminal: what a report, a plugin or a client sends
/// cannot retitle, clear or rewrite the screen (control characters shown as `\xNN`); JSON and
/// JUnit stay exact.
@Suite struct TerminalSafeTests {
    let fixture = CommandFixture("terminal")

    /// ESC (an OSC title and a clear), BEL, CR, backspace and a C1 CSI.
    static let hostile = "a\u{1b}]0;pwned\u{07}b\u{1b}[2Jc\rd\u{8}e\u{9b}f"
    static let rawControls: [UInt8] = [0x1b, 0x07, 0x0d, 0x08]

    func hasRawControl(_ text: String) -> Bool {
        text.utf8.contains { Self.rawControls.contains($0) } || text.unicodeScalars.contains { $0.value == 0x9b }
    }

    @Test("I-4: show and status print a report's control characters visibly; show --json keeps them exact")
    func showAndStatus() throws {
        let stored = try fixture.run(["report", "bug", "--summary", Self.hostile, "--attribute", "k=\(Self.hostile)"])
        #expect(stored.status == 0, "\(stored.stderr)")
        let shown = try fixture.run(["show", "latest"])
        #expect(!hasRawControl(shown.stdout), "\(shown.stdout.debugDescription)")
        #expect(shown.stdout.contains(#"summary: a\x1b]0;pwned\x07b\x1b[2Jc\x0dd\x08e\x9bf"#), "\(shown.stdout)")
        let json = try JSONValue.parse(try fixture.run(["show", "latest", "--json"]).stdout)
        #expect(json["summary"] == .string(Self.hostile), "JSON is exact")
        #expect(!hasRawControl(try fixture.run(["status"]).stdout))
    }

    @Test("I-4: a log line shows a file name's control characters visibly, on one line")
    func logLines() throws {
        let name = "e\u{1b}[2J\nfake.txt"
        try Data().write(to: fixture.folder.appendingPathComponent(name))
        let result = try fixture.run(["report", "bug", "--attach", fixture.folder.appendingPathComponent(name).path])
        #expect(!hasRawControl(result.stderr), "\(result.stderr.debugDescription)")
        #expect(result.stderr.contains(#"attachment e\x1b[2J\x0afake.txt not attached"#), "\(result.stderr)")
    }

    @Test("I-4: receive prints a client's message on one line with its control characters visible")
    func receiveLine() throws {
        let receiver = try SpawnedChild(
            [Products.reporthost.path, "receive", "--port", "0", "--dir", fixture.folder.appendingPathComponent("got").path],
            log: fixture.folder.appendingPathComponent("receive.log"))
        var port: String?
        for _ in 0..<500 where port == nil {
            port = receiver.log.firstMatch(of: /127\.0\.0\.1:(\d+)/).map { String($0.1) }
            if port == nil { usleep(10_000) }
        }
        let url = "http://127.0.0.1:\(try #require(port, "\(receiver.log)"))/post?format=json&token=t"
        let message = #"{"uuid": "11111111-2222-4333-8444-555555555555", "attributes": {"error.message": "x\u001b]0;t\u0007\nreceived fake -> 200"}}"#
        let post = try ChildProcess.run("/usr/bin/python3", ["-c", """
            import sys, urllib.request
            request = urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), headers={"Content-Type": "application/json"})
            print(urllib.request.urlopen(request).status)
            """, url, message])
        #expect(post.stdout.hasPrefix("200"), "\(post.stderr)")
        let line = try #require(receiver.readLine(timeoutMs: 10_000))
        #expect(!hasRawControl(line) && line.contains(#"x\x1b]0;t\x07 received fake -> 200"#), "\(line.debugDescription)")
        #expect(line.hasPrefix("received 11111111-2222-4333-8444-555555555555"))
        kill(receiver.pid, SIGTERM)
        receiver.wait()
    }

    @Test("I-4: check's report shows a plugin name's control characters visibly")
    func checkReport() throws {
        let plugin = try Fixtures.plugin("evil-name", source: fixtureHandler(name: "evil\\x1b[2J\\x1b]0;t\\x07"))
        let result = try ChildProcess.reporthost(["check", plugin.path, "--include", "^(loads|descriptor-sanity)$"])
        #expect(!hasRawControl(result.stdout), "\(result.stdout.debugDescription)")
        #expect(result.stdout.contains(#"evil\x1b[2J"#), "\(result.stdout)")
    }
}
