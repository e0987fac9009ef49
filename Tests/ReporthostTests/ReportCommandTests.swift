import Foundation
import Host
import HostStore
import HostSupport
import HostTestSupport
import Testing

/// `reporthost report` as a user runs it: a real child process, real plugins.
@Suite struct ReportCommandTests {
    /// A plugin that prints to stdout (which must not reach the document) and records
    /// whether its callbacks ran on the process's main thread.
    static let noisy = fixtureHandler(
        name: "noisy", before: "on_before",
        extra: """
            #include <sys/syscall.h>
            #include <unistd.h>
            static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                (void)c; (void)t;
                printf("plugin chatter on stdout\\n");
                fflush(stdout);
                bool main_thread = syscall(SYS_gettid) == getpid();
                host->set_attribute(r, "on_main_thread", main_thread ? "yes" : "no");
                done();
            }
            __attribute__((constructor)) static void loaded(void) { printf("constructor chatter\\n"); fflush(stdout); }
            """)

    func run(_ arguments: [String], environment: [String: String] = [:]) throws -> ChildProcess.Result {
        try ChildProcess.reporthost(arguments, environment: environment)
    }

    func document(_ result: ChildProcess.Result) throws -> JSONValue {
        try JSONValue.parse(result.stdout)
    }

    @Test("I-4: stdout carries only the document; plugin output goes to stderr; H-8: callbacks run on the main thread")
    func documentOnlyOnStdout() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let plugin = try Fixtures.plugin("noisy", source: Self.noisy)
            let result = try run(["report", "bug", "--handler", plugin.path, "--summary", "s", "--print"])
            #expect(result.status == 0, "\(result.stderr)")
            let json = try document(result)
            #expect(json["attributes"]?["on_main_thread"] == .string("yes"))
            #expect(!result.stdout.contains("chatter"))
            #expect(result.stderr.contains("plugin chatter on stdout"))
            #expect(result.stderr.contains("constructor chatter"))
            let keys = json.objectValue?.map(\.0)
            #expect(keys == [
                "report_id", "type", "trigger", "summary", "description", "email", "severity", "attributes", "labels",
                "attachments", "internal_log", "changes", "breadcrumbs", "duplicates", "created_at",
            ])
        }
    }

    @Test("I-7: ids shown are ids stored: after a killed chain and its recovery, `show latest` is the record `status --limit 1` lists")
    func latestIsListed() throws {
        let fixture = CommandFixture("latest-listed")
        #expect(try fixture.run(["report", "error", "--summary", "killed"], crashAt: .afterJournal).signal == SIGKILL)
        // The abnormal exit is stored after the journaled report, and dated before it.
        #expect(try fixture.run(["launch"]).status == 0)
        let shown = try JSONValue.parse(try fixture.run(["show", "latest", "--json"]).stdout)["report_id"]?.stringValue
        let listed = try JSONValue.parse(try fixture.run(["status", "--json", "--limit", "1"]).stdout)["records"]?.arrayValue
        #expect(shown != nil && listed?.count == 1 && listed?.first?["report_id"]?.stringValue == shown, "\(shown ?? "") \(listed ?? [])")
    }

    @Test("R-2: bug, error and exception map to their trigger and type; absent strings are null")
    func kinds() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            for (kind, type, trigger) in [("bug", "bug", "upload"), ("error", "error", "log_error"), ("exception", "error", "log_exception")] {
                let result = try run(["report", kind, "--print"])
                #expect(result.status == 0)
                let json = try document(result)
                #expect(json["type"] == .string(type))
                #expect(json["trigger"] == .string(trigger))
                #expect(json["summary"] == .null)
                #expect(json["severity"] == .number(0))
            }
        }
    }

    @Test("I-1: options follow the subcommand; command-line options override the configuration file")
    func optionsAndOverrides() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let folder = makeTemporaryDirectory()
            let config = folder.appendingPathComponent("c.json")
            try #"{"attributes": {"from": "config", "keep": "config"}, "plugins": {"handler": "missing.so"}}"#
                .write(to: config, atomically: true, encoding: .utf8)
            // The config's handler does not exist, so only the override can make this succeed.
            let plugin = try Fixtures.plugin("noisy", source: Self.noisy)
            let result = try run([
                "report", "error", "--config", config.path, "--handler", plugin.path, "--attribute", "from=flag", "--print",
                "--severity", "2", "--label", "a", "--label", "a", "--email", "e@x", "--description", "d",
            ])
            #expect(result.status == 0, "\(result.stderr)")
            let json = try document(result)
            #expect(json["attributes"]?["from"] == .string("flag"))
            #expect(json["attributes"]?["keep"] == .string("config"))
            #expect(json["labels"] == .array([.string("a"), .string("a")]))
            #expect(json["severity"] == .number(2))
            #expect(json["email"] == .string("e@x"))
        }
    }

    @Test("I-7: plugin paths inside a configuration file resolve against the file's folder")
    func configRelativePaths() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let plugin = try Fixtures.plugin("noisy", source: Self.noisy)
            let folder = plugin.deletingLastPathComponent()
            let config = folder.appendingPathComponent("relative-\(UUID().uuidString).json")
            try #"{"plugins": {"handler": "\#(plugin.lastPathComponent)"}}"#.write(to: config, atomically: true, encoding: .utf8)
            let result = try ChildProcess.reporthost(["report", "bug", "--config", config.path, "--print"], directory: makeTemporaryDirectory())
            #expect(result.status == 0, "\(result.stderr)")
            #expect(try document(result)["attributes"]?["on_main_thread"] == .string("yes"))
        }
    }

    @Test("I-4: usage and configuration errors exit 2 with one 'reporthost: error:' line naming the value")
    func usageErrors() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let folder = makeTemporaryDirectory()
            let unknownKey = folder.appendingPathComponent("unknown.json")
            try #"{"limits": {"callbackTimeoutMS": 5}}"#.write(to: unknownKey, atomically: true, encoding: .utf8)
            let wrongType = folder.appendingPathComponent("wrong.json")
            try #"{"reportsPerMin": "thirty"}"#.write(to: wrongType, atomically: true, encoding: .utf8)
            let notJSON = folder.appendingPathComponent("broken.json")
            try "{".write(to: notJSON, atomically: true, encoding: .utf8)
            let cases: [([String], String)] = [
                (["report", "bug", "--frobnicate"], "--frobnicate"),
                (["report", "bug", "--severity", "9"], "'9'"),
                (["report", "bug", "--severity", "0"], "'0'"),
                (["report", "crash"], "'crash'"),
                (["report"], "exactly one kind"),
                (["report", "bug", "--attribute", "novalue"], "'novalue'"),
                (["report", "bug", "--attach", "/nonexistent/file.txt"], "/nonexistent/file.txt"),
                (["report", "bug", "--config", "/nonexistent/c.json"], "/nonexistent/c.json"),
                (["report", "bug", "--config", unknownKey.path], "'limits.callbackTimeoutMS'"),
                (["report", "bug", "--config", wrongType.path], "'reportsPerMin'"),
                (["report", "bug", "--config", notJSON.path], notJSON.path),
                (["report", "bug", "--handler", "/nonexistent/p.so"], "/nonexistent/p.so"),
                (["report", "bug", "--log-level", "loud"], "'loud'"),
                (["report", "bug", "--print=yes"], "--print"),
                (["nonsense"], "'nonsense'"),
            ]
            for (arguments, named) in cases {
                let result = try run(arguments)
                #expect(result.status == 2, "\(arguments): \(result.stderr)")
                let lines = result.stderr.split(separator: "\n")
                #expect(lines.count == 1, "\(arguments): \(result.stderr)")
                #expect(lines.first?.hasPrefix("reporthost: error: ") == true)
                #expect(result.stderr.contains(named), "\(arguments): \(result.stderr)")
                #expect(result.stdout.isEmpty)
            }
        }
    }

    @Test("I-4: a plugin that refuses to load exits 2 naming the plugin")
    func refusingPlugin() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let library = try Fixtures.plugin(
                "refuses",
                source: "#include <reporthost/plugin.h>\nconst rh_handler *rh_plugin_entry(const rh_host_api *h) { (void)h; return 0; }\n")
            let result = try run(["report", "bug", "--wrapper", library.path])
            #expect(result.status == 2)
            #expect(result.stderr.contains("plugin \(library.path): rh_plugin_entry returned NULL"))
        }
    }

    @Test("ABI: when libffi closures cannot be allocated the host fails to start: exit 1 with a clear message")
    func closuresDenied() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let result = try run(["report", "bug"], environment: ["REPORTHOST_DENY_CLOSURES": "1"])
            #expect(result.status == 1)
            #expect(result.stderr.hasPrefix("reporthost: error: libffi cannot allocate closures"))
        }
    }

    @Test("R-7: --attach files form the extended source: three are kept, the fourth dropped and noted")
    func extendedAttachments() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let folder = makeTemporaryDirectory()
            var arguments = ["report", "bug", "--print"]
            for i in 0..<4 {
                let file = folder.appendingPathComponent("file\(i).txt")
                try "content \(i)".write(to: file, atomically: true, encoding: .utf8)
                arguments += ["--attach", file.path]
            }
            let result = try run(arguments)
            #expect(result.status == 0, "\(result.stderr)")
            let json = try document(result)
            let attachments = try #require(json["attachments"]?.arrayValue)
            #expect(attachments.map { $0["name"] } == (0..<3).map { .string("file\($0).txt") })
            #expect(attachments.allSatisfy { $0["source"] == .string("extended") })
            #expect(attachments.first?["sha256"] == .string(SHA256.hex(Data("content 0".utf8))))
            let log = try #require(json["internal_log"]?.arrayValue)
            #expect(log.contains { $0["message"]?.stringValue?.contains("'file3.txt' dropped") == true })
        }
    }

    @Test("I-4: a closed stdout does not kill the host (SIGPIPE is ignored): the report is stored, the lost document is exit 1")
    func closedPipe() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool {
            let directory = makeTemporaryDirectory("cwd")
            let pipe = try ChildProcess.closeOnExecPair()
            try pipe.ours.close()  // every write to stdout now fails with EPIPE
            let process = try StartedChild.start(
                Products.reporthost.path, ["report", "bug", "--print"], directory: directory, output: pipe.child.fileDescriptor)
            try pipe.child.close()
            #expect(process.wait() == .exited(1))
            let stored = try Repository.openForReading(folder: directory.appendingPathComponent(".reporthost"))?.records() ?? []
            #expect(stored.count == 1)
        }
    }
}
