import Foundation
import Glibc
import Host
import HostSupport
import HostTestSupport
import Testing

/// One real Sentry-compatible server for the run: Bugsink (PyPI `bugsink`, a Django app with
/// SQLite) on a loopback port, through `scripts/bugsink`; started at first use, stopped when
/// the test process ends. Each test tells its events apart by a release of its own.
enum Bugsink {
    struct Server: Sendable {
        let dsn: String
        let folder: URL
    }

    static let script = Products.packageRoot.appendingPathComponent("scripts/bugsink").path
    nonisolated(unsafe) private static var startedFolder: String?

    static let shared: Result<Server, CommandFixture.CommandFailed> = {
        let folder = makeTemporaryDirectory("bugsink")
        let started: ChildProcess.Result
        do {
            started = try ChildProcess.run("/bin/bash", [script, "start", folder.path])
        } catch {
            return .failure(CommandFixture.CommandFailed(description: "scripts/bugsink start: \(error)"))
        }
        guard started.status == 0, let dsn = started.stdout.firstMatch(of: /dsn (\S+)/).map({ String($0.1) }) else {
            return .failure(CommandFixture.CommandFailed(description: "scripts/bugsink start exited \(started.status): \(started.stderr)"))
        }
        startedFolder = folder.path
        atexit {
            if let folder = Bugsink.startedFolder { _ = try? ChildProcess.run("/bin/bash", [Bugsink.script, "stop", folder]) }
        }
        return .success(Server(dsn: dsn, folder: folder))
    }()

    /// The events Bugsink stored whose release is `release`, oldest first.
    static func events(release: String) throws -> [JSONValue] {
        let server = try shared.get()
        let listed = try ChildProcess.run("/bin/bash", [script, "events", server.folder.path])
        guard listed.status == 0 else { throw CommandFixture.CommandFailed(description: "scripts/bugsink events: \(listed.stderr)") }
        return (try JSONValue.parse(listed.stdout).arrayValue ?? []).filter { $0["release"]?.stringValue == release }
    }
}

/// SPEC S-1 … S-3 against the real server: what ReportHost sends arrives as Bugsink keeps it.
@Suite struct SentryServerTests {
    let fixture = CommandFixture("sentry-server")

    /// A configuration that sends to Bugsink's DSN with its own release; `extra` keys merged in.
    func configuration(release: String, extra: String = "") throws -> String {
        let server = try Bugsink.shared.get()
        let file = fixture.folder.appendingPathComponent("sentry-\(UUID().uuidString).json")
        try #"{"submission": {"dsn": "\#(server.dsn)", "timeoutMs": 10000}, "release": "\#(release)"\#(extra.isEmpty ? "" : ", " + extra)}"#
            .write(to: file, atomically: true, encoding: .utf8)
        return file.path
    }

    /// The DSN's key: it must appear in no output.
    var key: String { get throws { try #require(try Bugsink.shared.get().dsn.firstMatch(of: /\/\/([0-9a-f]+)@/).map { String($0.1) }) } }

    @Test("S-2 against Bugsink: a native crash recovered from a crash file arrives as one event, with its signal, frames by function name and debug images whose code_id is each module's build id; nothing waits; the key is in no output")
    func crash() async throws {
        try await offPool { [self] in
            let release = "crash-\(UUID().uuidString.prefix(8))"
            let config = try configuration(release: release)
            let crashed = try fixture.run(["crash", "--signal", "SEGV"])
            #expect(crashed.signal == SIGSEGV || crashed.status != 0, "\(crashed.stderr)")
            // Recovered first without a destination, so `show` still has the crash's modules
            // (a delivered crash keeps only its document).
            #expect(try fixture.run(["launch"]).status == 0)
            let shown = try JSONValue.parse(try fixture.run(["show", "latest", "--json"]).stdout)
            let launched = try fixture.run(["launch", "--config", config])
            #expect(launched.status == 0, "\(launched.stderr)")
            let events = try Bugsink.events(release: release)
            #expect(events.count == 1, "\(events.count) events")
            let event = try #require(events.first)
            #expect(event["event_id"]?.stringValue == shown["report_id"]?.stringValue?.replacing("-", with: ""))
            let exception = try #require(event["exception"]?["values"]?.arrayValue?.first)
            #expect(exception["type"]?.stringValue == "SIGSEGV")
            #expect(exception["mechanism"]?["type"]?.stringValue == "signalhandler")
            #expect(exception["mechanism"]?["meta"]?["signal"]?["number"]?.intValue == Int(SIGSEGV))
            let functions = exception["stacktrace"]?["frames"]?.arrayValue?.compactMap { $0["function"]?.stringValue } ?? []
            #expect(functions.contains { $0.contains("crash") || $0.contains("Crash") }, "\(functions)")
            let modules = shown["crash"]?["modules"]?.arrayValue?.compactMap { $0["build_id"]?.stringValue } ?? []
            let images = event["debug_meta"]?["images"]?.arrayValue?.compactMap { $0["code_id"]?.stringValue } ?? []
            #expect(!modules.isEmpty && Set(images) == Set(modules), "images \(images.count), modules \(modules.count)")
            let records = try fixture.records()
            #expect(records.allSatisfy { $0["state"]?.stringValue == "terminal" || $0["state"]?.stringValue == "delivered" },
                    "nothing waits: \(records.map { $0["state"] ?? .null })")
            let key = try key
            for output in [crashed.stdout, crashed.stderr, launched.stdout, launched.stderr] { #expect(!output.contains(key)) }
        }
    }

    @Test("S-2 against Bugsink: a bug report through scrub-pii arrives scrubbed, with its tags, release, breadcrumbs and change trail")
    func scrubbedBug() async throws {
        try await offPool { [self] in
            let release = "bug-\(UUID().uuidString.prefix(8))"
            let scrubPII = Products.directory.appendingPathComponent("libscrub-pii.so").path
            let config = try configuration(release: release, extra: #""plugins": {"handler": "\#(scrubPII)"}"#)
            let reported = try fixture.run(["report", "bug", "--summary", "checkout failed for alice@example.com", "--attribute", "region=eu",
                                            "--config", config])
            #expect(reported.status == 0, "\(reported.stderr)")
            let event = try #require(try Bugsink.events(release: release).first)
            let message = event["logentry"]?["formatted"]?.stringValue ?? ""
            #expect(message.contains("[email]") && !message.contains("alice"), "\(message)")
            #expect(event["tags"]?["region"]?.stringValue == "eu")
            #expect(event["release"]?.stringValue == release)
            let breadcrumbs = event["breadcrumbs"]?["values"]?.arrayValue ?? []
            #expect(!breadcrumbs.isEmpty, "the host's breadcrumbs go too")
            let changes = event["contexts"]?["reporthost"]?["changes"]?.arrayValue ?? []
            #expect(changes.contains { $0["field"]?.stringValue == "summary" }, "\(changes)")
        }
    }

    @Test("S-2 against Bugsink: an abnormal exit and an app hang arrive with their cause")
    func exitAndHang() async throws {
        try await offPool { [self] in
            let release = "exit-\(UUID().uuidString.prefix(8))"
            let config = try configuration(release: release)
            _ = try ChildProcess.reporthost(["run", "--repository", fixture.repository, "--", "/bin/sh", "-c", "kill -9 $$"])
            let hang = try AppHangTests.program.get()
            let hung = try ChildProcess.run(hang.path, [fixture.repository, "300", "900"])
            #expect(hung.stdout.contains("done"), "\(hung.stdout) \(hung.stderr)")
            let launched = try fixture.run(["launch", "--config", config])
            #expect(launched.status == 0, "\(launched.stderr)")
            let events = try Bugsink.events(release: release)
            let types = events.compactMap { $0["exception"]?["values"]?.arrayValue?.first?["type"]?.stringValue }
            #expect(Set(types) == ["AbnormalExit", "AppHang"], "\(types)")
            let hangEvent = try #require(events.first { $0["exception"]?["values"]?.arrayValue?.first?["type"]?.stringValue == "AppHang" })
            let hangFrames = hangEvent["exception"]?["values"]?.arrayValue?.first?["stacktrace"]?["frames"]?.arrayValue ?? []
            #expect(hangFrames.contains { $0["function"]?.stringValue == "wait_for_the_lock" }, "the hung thread's stack")
            let exitEvent = try #require(events.first { $0["exception"]?["values"]?.arrayValue?.first?["type"]?.stringValue == "AbnormalExit" })
            #expect(exitEvent["exception"]?["values"]?.arrayValue?.first?["value"]?.stringValue?.contains("SIGKILL") == true,
                    "\(exitEvent["exception"] ?? .null)")
        }
    }
}
