import Foundation
import Glibc
import Host
import HostStore
import HostSupport
import HostTestSupport
import Receiver
import Testing

/// libreporthost.so (`reporthost/embed.h`) in real programs: the C and Python examples crash
/// for real, start again, and their recovered crash reports reach a loopback receiver changed
/// by a C plugin; the API refuses misuse; a second copy of a program runs as a secondary.
@Suite struct EmbedTests {
    let folder = makeTemporaryDirectory("embed")
    var repository: String { folder.appendingPathComponent("repo").path }

    /// The embedding library as `libreporthost.so` in a folder of its own (a link to the
    /// built `libreporthost-embed.so`: the name the examples link with).
    static let library: URL = {
        let folder = makeTemporaryDirectory("embed-lib")
        let link = folder.appendingPathComponent("libreporthost.so")
        try? FileManager.default.createSymbolicLink(
            at: link, withDestinationURL: Products.directory.appendingPathComponent("libreporthost-embed.so"))
        return link
    }()

    /// A C program linked with libreporthost.so, as docs/embedding.md's build line links it.
    static func linked(_ name: String, source: () throws -> URL, flags: [String] = []) -> Result<URL, Fixtures.CompileError> {
        let output = makeTemporaryDirectory(name).appendingPathComponent(name)
        let lib = library.deletingLastPathComponent().path
        do {
            try Fixtures.compile(
                flags + ["-I", Products.pluginAPIInclude.path, try source().path, "-o", output.path, "-L", lib, "-lreporthost", "-Wl,-rpath,\(lib)"])
            return .success(output)
        } catch let error as Fixtures.CompileError {
            return .failure(error)
        } catch {
            return .failure(Fixtures.CompileError(description: "\(error)"))
        }
    }

    /// Examples/c-app, built with docs/embedding.md's line (once per run).
    static let cApp = linked("c-app") { Products.packageRoot.appendingPathComponent("Examples/c-app/main.c") }

    /// A test driver of the embedding API: `embed-driver CONFIG|- REPOSITORY MODE [FOLDER]`.
    /// Prints `started <ms>` (the time rh_embed_start took), then by MODE, then
    /// `stopped <ms>` (the time rh_embed_stop took):
    /// - `hold`: waits for the end of its standard input, then stops;
    /// - `report`: raises an error report and prints `report <result> <id>`;
    /// - `loop`: raises error reports until killed, `report <result> <id>` after each;
    /// - `misuse`: calls the API wrongly, a line `<case> <result>` each (FOLDER holds the files
    ///   a.txt … d.txt to attach);
    /// - `fork`: forks; the child prints `child-report <result>`, `child-attribute <result>`
    ///   and `child-stopped`, then exits; the parent then raises a report
    ///   (`parent-report <result> <id>`) and stops;
    /// - `stdin`: raises a report, then prints `fd0 <what fd 0 is>` (`closed`, or the path).
    static let driver: Result<URL, Fixtures.CompileError> = {
        let source = #"""
            #include <reporthost/embed.h>
            #include <stdint.h>
            #include <sys/wait.h>
            #include <unistd.h>
            #include <stdio.h>
            #include <string.h>
            #include <time.h>

            static double now_ms(void) {
                struct timespec t;
                clock_gettime(CLOCK_MONOTONIC, &t);
                return t.tv_sec * 1000.0 + t.tv_nsec / 1e6;
            }

            static void misuse(rh_embed *h, const char *config, const char *repository, const char *folder) {
                char error[512], id[37], path[4096];
                rh_embed *second = rh_embed_start(config, repository, error, sizeof error);
                printf("second-start %s %s\n", second ? "handle" : "NULL", error);
                printf("attribute-null-key %d\n", rh_embed_set_attribute(h, NULL, "v"));
                printf("attribute-key-with-equals %d\n", rh_embed_set_attribute(h, "a=b", "v"));
                printf("attribute-bad-utf8 %d\n", rh_embed_set_attribute(h, "k", "\xff\xfe"));
                printf("attribute-remove-absent %d\n", rh_embed_set_attribute(h, "never-set", NULL));
                char long_value[600];
                memset(long_value, 'v', sizeof long_value - 1);
                long_value[sizeof long_value - 1] = 0;
                printf("attribute-past-crash-file-limits %d\n", rh_embed_set_attribute(h, "long", long_value));
                rh_embed *stale = (rh_embed *)(uintptr_t)0x1234;
                printf("stale-attribute %d\n", rh_embed_set_attribute(stale, "k", "v"));
                memset(id, 'x', sizeof id);
                printf("stale-report %d [%s]\n", rh_embed_report(stale, "bug", "s", NULL, id), id);
                printf("stale-attachment %d\n", rh_embed_add_attachment(stale, "/etc/hostname"));
                memset(id, 'x', sizeof id);
                printf("unknown-type %d [%s]\n", rh_embed_report(h, "crash", "s", NULL, id), id);
                printf("null-type %d\n", rh_embed_report(h, NULL, "s", NULL, id));
                printf("empty-attachment %d\n", rh_embed_add_attachment(h, ""));
                const char *names[] = {"a.txt", "b.txt", "c.txt", "d.txt"};
                for (int i = 0; i < 4; i++) {
                    snprintf(path, sizeof path, "%s/%s", folder, names[i]);
                    printf("attachment-%d %d\n", i + 1, rh_embed_add_attachment(h, path));
                }
                int status = rh_embed_report(h, "bug", "misuse", NULL, id);
                printf("report %d %s %zu\n", status, id, strlen(id));
                printf("no-id-buffer %d\n", rh_embed_report(h, "exception", "no id", NULL, NULL));
                rh_embed_stop(stale);
                printf("live-after-stale-stop %d\n", rh_embed_set_attribute(h, "still", "live"));
                rh_embed_stop(h);
                printf("stopped-attribute %d\n", rh_embed_set_attribute(h, "k", "v"));
                memset(id, 'x', sizeof id);
                printf("stopped-report %d [%s]\n", rh_embed_report(h, "bug", "s", NULL, id), id);
                rh_embed_stop(h);
                char small[8];
                rh_embed *bad = rh_embed_start("/nonexistent/config.json", repository, small, sizeof small);
                printf("bad-config %s %zu\n", bad ? "handle" : "NULL", strlen(small));
                rh_embed *again = rh_embed_start(config, repository, error, sizeof error);
                printf("restart %s\n", again != NULL && again != h ? "new-handle" : "no-new-handle");
                printf("old-handle-after-restart %d\n", rh_embed_set_attribute(h, "k", "v"));
                rh_embed_stop(again);
            }

            int main(int argc, char **argv) {
                if (argc < 4) return 2;
                const char *config = strcmp(argv[1], "-") == 0 ? NULL : argv[1];
                const char *repository = argv[2], *mode = argv[3];
                char error[512];
                double start = now_ms();
                rh_embed *h = rh_embed_start(config, repository, error, sizeof error);
                double took = now_ms() - start;
                if (h == NULL) {
                    printf("start failed: %s\n", error);
                    return 1;
                }
                printf("started %.0f\n", took);
                fflush(stdout);
                if (strcmp(mode, "hold") == 0) {
                    char buffer[64];
                    while (fread(buffer, 1, sizeof buffer, stdin) > 0) {}
                } else if (strcmp(mode, "loop") == 0) {
                    /* Reports until killed, each id printed once rh_embed_report returned. */
                    char id[37];
                    for (;;) {
                        int status = rh_embed_report(h, "error", "in a loop", NULL, id);
                        printf("report %d %s\n", status, id);
                        fflush(stdout);
                    }
                } else if (strcmp(mode, "report") == 0) {
                    char id[37];
                    int status = rh_embed_report(h, "error", "from the driver", NULL, id);
                    printf("report %d %s\n", status, id);
                } else if (strcmp(mode, "fork") == 0) {
                    char id[37];
                    fflush(stdout);
                    pid_t child = fork();
                    if (child == 0) {
                        printf("child-report %d\n", rh_embed_report(h, "error", "from the forked child", NULL, id));
                        printf("child-attribute %d\n", rh_embed_set_attribute(h, "k", "v"));
                        rh_embed_stop(h);
                        printf("child-stopped\n");
                        fflush(stdout);
                        _exit(0);
                    }
                    int status = 0;
                    waitpid(child, &status, 0);
                    int result = rh_embed_report(h, "error", "from the parent", NULL, id);
                    printf("parent-report %d %s\n", result, id);
                } else if (strcmp(mode, "stdin") == 0) {
                    char id[37], target[4096];
                    printf("report %d\n", rh_embed_report(h, "error", "with stdin closed", NULL, id));
                    ssize_t length = readlink("/proc/self/fd/0", target, sizeof target - 1);
                    if (length < 0) {
                        printf("fd0 closed\n");
                    } else {
                        target[length] = 0;
                        printf("fd0 %s\n", target);
                    }
                } else if (strcmp(mode, "misuse") == 0 && argc > 4) {
                    misuse(h, config, repository, argv[4]);
                    return 0;
                }
                start = now_ms();
                rh_embed_stop(h);
                printf("stopped %.0f\n", now_ms() - start);
                return 0;
            }
            """#
        return linked("embed-driver", source: { try Fixtures.file("embed-driver.c", source) }, flags: ["-std=c11", "-D_GNU_SOURCE", "-Wall", "-Werror"])
    }()

    func config(_ receiver: LocalReceiver, plugin: URL, timeoutMs: Int = 5_000) throws -> String {
        let file = folder.appendingPathComponent("c-\(UUID().uuidString).json")
        try #"{"plugins": {"handler": "\#(plugin.path)"}, "submission": {"url": "\#(receiver.url)", "timeoutMs": \#(timeoutMs)}, "retry": {"intervalSeconds": 0}}"#
            .write(to: file, atomically: true, encoding: .utf8)
        return file.path
    }

    /// Runs an example program (`command`: its words before the mode) with crash capture's
    /// child settings.
    func example(_ command: [String], _ arguments: [String], environment: [String: String] = [:]) throws -> ChildProcess.Result {
        guard let program = command.first else { throw Fixtures.CompileError(description: "no program") }
        return try ChildProcess.run(
            program, Array(command.dropFirst()) + arguments,
            environment: environment, directory: folder)
    }

    /// The example crashes for real, starts again, and the recovered crash report arrives
    /// changed by the plugin, with the report raised by the second start.
    func crashThenReport(_ command: [String], environment: [String: String] = [:], attribute: String) throws {
        let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got"))
        defer { receiver.stop() }
        let plugin = try Fixtures.freshCopy(of: Fixtures.plugin("marker", source: markerHandler))
        let common = ["--config", try config(receiver, plugin: plugin), "--repository", repository]
        let crashed = try example(command, common + ["crash"], environment: environment)
        #expect(crashed.signal == SIGSEGV, "status \(crashed.status): \(crashed.stderr)")
        #expect(crashed.stdout.contains("crashing"))
        // No second crash log: the Swift runtime's backtracer never gets the crash.
        #expect(!crashed.stderr.contains("Program crashed") && !crashed.stderr.contains("Backtrace took"), "\(crashed.stderr)")

        let again = try example(command, common + ["report"], environment: environment)
        #expect(again.status == 0 && again.signal == nil, "\(again.stderr)")
        let id = again.stdout.split(separator: "\n").first { $0.hasPrefix("report ") }.map { String($0.dropFirst(7)) }
        let received = receiver.received.map(\.report)
        let crash = received.first { $0["attributes"]?["error.type"] == .string("Crash") }
        #expect(crash?["attributes"]?["changed.by"] == .string("marker"), "\(received)")
        #expect(crash?["attributes"]?["example"] == .string(attribute), "the attribute set before the crash is in its crash file")
        let error = received.first { $0["uuid"]?.stringValue == id }
        #expect(error?["attributes"]?["changed.by"] == .string("marker"), "\(id ?? "no id"): \(received)")
        let status = try ChildProcess.reporthost(["status", "--json", "--repository", repository], directory: folder)
        let states = try JSONValue.parse(status.stdout)["records"]?.arrayValue?.map { $0["state"] } ?? []
        #expect(states == [.string("terminal"), .string("terminal")], "both delivered and settled: \(states)")
    }

    @Test("D-1, embed: Examples/c-app crashes with SIGSEGV; started again, its recovered crash report, changed by a C plugin, is stored and delivered")
    func cAppCrashAndRecovery() async throws {
        try await offPool { [self] in
            let app = try Self.cApp.get()
            try crashThenReport([app.path], attribute: "c-app")
        }
    }

    @Test("B-2, run: Examples/c-app, which embeds ReportHost, crashing under `reporthost run`: one crash report, its own host's, and one crashed session, never two")
    func embeddedProgramUnderRun() async throws {
        try await offPool {
            let app = try Self.cApp.get()
            let folder = makeTemporaryDirectory("embed-under-run")
            let ran = try ChildProcess.run(Products.reporthost.path, ["run", "--", app.path, "crash"], directory: folder)
            #expect(ran.status == 139, "\(ran.stderr)")
            let status = try JSONValue.parse(try ChildProcess.reporthost(["status", "--json"], directory: folder).stdout)
            let records = status["records"]?.arrayValue ?? []
            #expect(records.map { $0["trigger"]?.stringValue } == ["crash"], "the preload handed the signal to the program's host: \(records)")
            let releases = status["sessions"]?["releases"]?.arrayValue ?? []
            #expect(releases.map { [$0["sessions"]?.intValue, $0["crashed"]?.intValue] } == [[1, 1]], "\(releases)")
            let id = try #require(records.first?["report_id"]?.stringValue)
            let shown = try JSONValue.parse(try ChildProcess.reporthost(["show", id, "--json"], directory: folder).stdout)
            #expect(shown["attributes"]?["example"]?.stringValue == "c-app", "written by the program's own host: \(shown)")
            let left = try FileManager.default.contentsOfDirectory(atPath: folder.appendingPathComponent(".reporthost/crashes").path)
            #expect(left.isEmpty, "the crash file and the preload's marker are gone: \(left)")
        }
    }

    @Test("D-1, embed: Examples/python (ctypes) crashes with SIGSEGV; started again, its recovered crash report is changed by a C plugin and delivered")
    func pythonCrashAndRecovery() async throws {
        try await offPool { [self] in
            let script = Products.packageRoot.appendingPathComponent("Examples/python/app.py").path
            try crashThenReport(["/usr/bin/env", "python3", script], environment: ["REPORTHOST_LIB": Self.library.path], attribute: "python")
        }
    }

    /// The records of the shared repository: report id → trigger.
    func storedTriggers() throws -> [String: String] {
        guard let stored = try Repository.openForReading(folder: URL(fileURLWithPath: repository)) else { return [:] }
        return Dictionary(try stored.records().map { ($0.reportID, $0.trigger.name) }) { a, _ in a }
    }

    func launch() throws -> ChildProcess.Result {
        try ChildProcess.reporthost(["launch", "--repository", repository], directory: folder)
    }

    @Test("embed: a forked child's calls return -2 at once and store nothing; its rh_embed_stop returns at once and leaves the parent's host running")
    func forkedChild() async throws {
        try await offPool { [self] in
            let driver = try Self.driver.get().path
            let result = try ChildProcess.run(driver, ["-", repository, "fork"], directory: folder)
            #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
            let lines = result.stdout.split(separator: "\n").map(String.init)
            #expect(lines.contains("child-report -2"), "\(result.stdout)")
            #expect(lines.contains("child-attribute -2"), "\(result.stdout)")
            #expect(lines.contains("child-stopped"), "\(result.stdout)")
            let parent = try #require(lines.first { $0.hasPrefix("parent-report ") }, "\(result.stdout)")
            #expect(parent.hasPrefix("parent-report 0 "), "the parent's host still runs: \(parent)")
            let stored = try storedTriggers()
            #expect(stored.count == 1, "only the parent's report is stored: \(stored)")
            #expect(stored[String(parent.dropFirst("parent-report 0 ".count))] == "log_error")
        }
    }

    @Test("embed: a program that closed its standard input never finds the host's lock file, database or a socket on fd 0")
    func closedStandardInput() async throws {
        try await offPool { [self] in
            let driver = try Self.driver.get().path
            let result = try ChildProcess.run("/bin/sh", ["-c", "exec 0<&-; exec '\(driver)' - '\(repository)' stdin"], directory: folder)
            #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
            let lines = result.stdout.split(separator: "\n").map(String.init)
            #expect(lines.contains("report 0"), "\(result.stdout)")
            let fd0 = try #require(lines.first { $0.hasPrefix("fd0 ") }, "\(result.stdout)")
            #expect(fd0 == "fd0 closed" || fd0 == "fd0 /dev/null", "\(fd0)")
        }
    }

    @Test("H-13, D-2, embed: SIGKILL while reports are raised in a loop: every report rh_embed_report returned is stored with its handler's changes (its final update commits without a flush of its own)")
    func killedWhileReporting() async throws {
        try await offPool { [self] in
            let driver = try Self.driver.get().path
            let plugin = try Fixtures.plugin("embed-marks", source: fixtureHandler(
                name: "marks", before: "on_before",
                extra: "static void on_before(void *c, rh_report *r, bool t, rh_completion d) { (void)c; (void)t; host->set_attribute(r, \"chain.ran\", \"yes\"); d(); }"))
            let config = folder.appendingPathComponent("marks.json")
            try #"{"plugins": {"handler": "\#(plugin.path)"}, "logging": []}"#.write(to: config, atomically: true, encoding: .utf8)
            for round in 0..<3 {
                let child = try SpawnedChild([driver, config.path, repository, "loop"], log: folder.appendingPathComponent("loop-\(round).log"))
                #expect(child.readLine()?.hasPrefix("started ") == true, "\(child.log)")
                var returned: [String] = []
                while returned.count < 20 + round * 7, let line = child.readLine() {
                    let fields = line.split(separator: " ")
                    #expect(fields.count == 3 && fields[1] == "0", "\(line)")
                    returned.append(String(fields[2]))
                }
                kill(child.pid, SIGKILL)
                #expect(child.wait() == 137)
                let records = try #require(try Repository.openForReading(folder: URL(fileURLWithPath: repository))).records()
                let stored = Dictionary(records.map { ($0.reportID, $0) }, uniquingKeysWith: { first, _ in first })
                for id in returned {
                    let record = try #require(stored[id], "round \(round): report \(id) returned but is not stored")
                    #expect(record.state == .awaitingFirstAttempt && record.document.content.attributes["chain.ran"] == "yes", "\(id)")
                }
            }
        }
    }

    @Test("I-2, D-16, embed: a second process starts at once as a secondary and stores its report; a running secondary is never an abnormal exit, a killed one is")
    func secondaryProcess() async throws {
        try await offPool { [self] in
            let driver = try Self.driver.get().path
            let primary = try SpawnedChild([driver, "-", repository, "hold"], log: folder.appendingPathComponent("primary.log"))
            #expect(primary.readLine()?.hasPrefix("started ") == true, "\(primary.log)")

            // Another copy of the program while the first holds the repository lock.
            let second = try ChildProcess.run(driver, ["-", repository, "report"], directory: folder)
            let lines = second.stdout.split(separator: "\n").map(String.init)
            // It does not wait for the lock (SPEC I-2): it starts as a secondary.
            #expect(lines.contains { $0.hasPrefix("started ") }, "\(second.stdout) \(second.stderr)")
            let report = try #require(lines.first { $0.hasPrefix("report 0 ") }, "\(second.stdout) \(second.stderr)")
            #expect(try storedTriggers()[String(report.dropFirst(9))] == "log_error", "the secondary's report is stored in the shared repository")

            // Two secondaries hold their sessions; the primary stops, `launch` takes the lock.
            let running = try SpawnedChild([driver, "-", repository, "hold"], log: folder.appendingPathComponent("running.log"))
            let killed = try SpawnedChild([driver, "-", repository, "hold"], log: folder.appendingPathComponent("killed.log"))
            #expect(running.readLine()?.hasPrefix("started ") == true, "\(running.log)")
            #expect(killed.readLine()?.hasPrefix("started ") == true, "\(killed.log)")
            primary.closeInput()
            #expect(primary.wait() == 0, "\(primary.log)")
            kill(killed.pid, SIGKILL)
            #expect(killed.wait() == 137)
            let launched = try launch()
            #expect(launched.status == 0, "\(launched.stderr)")
            let abnormal = try storedTriggers().filter { $0.value == "abnormal_exit" }
            #expect(abnormal.count == 1, "only the killed secondary is an abnormal exit: \(launched.stderr)")

            // The running one stops cleanly: it leaves no mark, so nothing new is reported.
            running.closeInput()
            #expect(running.wait() == 0, "\(running.log)")
            #expect(try launch().status == 0)
            #expect(try storedTriggers().filter { $0.value == "abnormal_exit" }.count == 1)
        }
    }
}
