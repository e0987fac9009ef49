import Foundation
import Glibc
import Host
import HostRecovery
import HostSupport
import HostTestSupport
import Receiver
import Testing

/// A plugin that crashes the host is named, quarantined and never puts the host into a
/// crash loop (SPEC I: `quarantine`, crashed_in_plugin; D-1, D-16, H-13), with real child
/// processes, real signals, real SQLite files and a real loopback receiver.
@Suite struct QuarantineTests {
    let fixture = CommandFixture("quarantine")
    var folder: URL { fixture.folder }
    var repository: String { fixture.repository }

    @discardableResult
    func run(_ arguments: [String]) throws -> ChildProcess.Result { try fixture.run(arguments) }

    func status() throws -> JSONValue { try fixture.status() }

    func config(_ receiver: LocalReceiver) throws -> String { try fixture.configuration(url: receiver.url) }

    /// A handler whose before-callback runs `fault` when `condition` holds.
    static func crasher(_ name: String, when condition: String, fault: String = "volatile int *p = NULL; *p = 1;") -> String {
        fixtureHandler(
            name: name, before: "on_before",
            extra: """
                static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                    (void)c; (void)t;
                    if (\(condition)) { \(fault) }
                    host->set_attribute(r, "\(name).ran", "yes");
                    done();
                }
                """)
    }

    /// Crashes only on recovered reports (crash or abnormal exit).
    static let onRecovered = crasher("on-recovered", when: "host->report_type(r) == RH_REPORT_CRASH")
    /// Crashes on every report.
    static let onEvery = crasher("on-every", when: "1")

    /// Launches until one exits 0 (at most `limit`); returns every exit.
    func launchUntilClean(_ arguments: [String], limit: Int) throws -> [ChildProcess.Result] {
        var results: [ChildProcess.Result] = []
        for _ in 0..<limit {
            let result = try run(["launch"] + arguments)
            results.append(result)
            if result.status == 0 && result.signal == nil { break }
        }
        return results
    }

    @Test("I: a plugin crashing on recovered reports: within three launches every launch exits 0, reports are delivered, one record per real crash")
    func crashesOnRecovered() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool { [self] in
            let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got"))
            defer { receiver.stop() }
            let configuration = try config(receiver)
            let plugin = try Fixtures.freshCopy(of: Fixtures.plugin("on-recovered", source: Self.onRecovered))
            #expect(try run(["crash"]).signal == SIGSEGV)

            let launches = try launchUntilClean(["--handler", plugin.path, "--config", configuration], limit: 3)
            #expect(launches.count <= 3, "\(launches.map(\.status))")
            #expect(launches.first?.signal == SIGSEGV)  // the first launch dies in the plugin
            #expect(launches.last?.status == 0 && launches.last?.signal == nil, "\(launches.last?.stderr ?? "")")
            // Later launches and new reports all exit 0.
            for _ in 0..<3 { #expect(try run(["launch", "--handler", plugin.path, "--config", configuration]).status == 0) }
            let report = try run(["report", "error", "--summary", "after", "--handler", plugin.path, "--config", configuration, "--print"])
            #expect(report.status == 0, "\(report.stderr)")
            let document = try JSONValue.parse(report.stdout)
            // The slot ran empty, and the report says why.
            #expect(document["attributes"]?["on-recovered.ran"] == nil)
            let notes = document["internal_log"]?.arrayValue ?? []
            #expect(notes.contains { $0["handler"] == .string("on-recovered") && ($0["message"]?.stringValue ?? "").contains("quarantined") })

            // Two real crashes (the one asked for, the one in the plugin) and the error report.
            let records = try status()["records"]?.arrayValue ?? []
            #expect(records.count == 3)
            #expect(records.allSatisfy { $0["state"] == .string("terminal") }, "\(records)")
            #expect(receiver.received.count == 3)
            let crashedInPlugin = receiver.received.filter {
                $0.report["attributes"]?["reporthost.crashed_in_plugin"] == .string("on-recovered")
            }
            #expect(crashedInPlugin.count == 1)
            #expect(crashedInPlugin.first?.report["attributes"]?["reporthost.crashed_in_callback"] == .string("on_before_report_created"))
        }
    }

    @Test("I: a plugin crashing on every report is quarantined with path, name, digest, signal, callback, time and count; a rebuilt file gets a fresh chance")
    func crashesOnEvery() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool { [self] in
            let plugin = try Fixtures.freshCopy(of: Fixtures.plugin("on-every", source: Self.onEvery))
            let first = try run(["report", "error", "--handler", plugin.path])
            #expect(first.signal == SIGSEGV)
            // The next command quarantines it, stores and delivers everything, exits 0.
            let second = try run(["report", "bug", "--summary", "still works", "--handler", plugin.path, "--print"])
            #expect(second.status == 0, "\(second.stderr)")
            #expect(second.stderr.contains("quarantined"))
            let entries = try status()["quarantine"]?.arrayValue ?? []
            #expect(entries.count == 1)
            let entry = try #require(entries.first)
            #expect(entry["path"] == .string(PluginIdentity(path: plugin.path, system: .live).realPath))
            #expect(entry["name"] == .string("on-every"))
            #expect(entry["digest"] == .string(SHA256.hex(try Data(contentsOf: plugin))))
            #expect(entry["signal"] == .string("SEGV"))
            #expect(entry["callback"] == .string("on_before_report_created"))
            #expect(entry["crashes"] == .number(1))
            #expect(entry["at"]?.stringValue?.hasSuffix("Z") == true)

            let listed = try run(["quarantine"])
            #expect(listed.status == 0 && listed.stdout.contains("on-every") && listed.stdout.contains("SIGSEGV in on_before_report_created"))

            // The content is quarantined, not the path: a copy elsewhere and a hard link are
            // not loaded either (before: each crashed the host once more).
            let copy = plugin.deletingLastPathComponent().appendingPathComponent("reinstalled-\(UUID().uuidString).so")
            try FileManager.default.copyItem(at: plugin, to: copy)
            let hardLink = plugin.deletingLastPathComponent().appendingPathComponent("linked-\(UUID().uuidString).so")
            #expect(link(plugin.path, hardLink.path) == 0)
            for other in [copy, hardLink] {
                let result = try run(["report", "bug", "--summary", "elsewhere", "--handler", other.path])
                #expect(result.status == 0 && result.signal == nil, "\(other.lastPathComponent): \(result.stderr)")
                #expect(result.stderr.contains("has the same content"), "\(result.stderr)")
            }
            #expect((try status()["quarantine"]?.arrayValue ?? []).count == 1)

            // A rebuilt plugin (another file at the same path) is loaded again, and crashes again.
            var bytes = try Data(contentsOf: plugin)
            bytes.append(contentsOf: [0])  // trailing bytes: still a valid ELF file, another digest
            try bytes.write(to: plugin)
            #expect(try run(["report", "error", "--handler", plugin.path]).signal == SIGSEGV)
            #expect(try run(["launch", "--handler", plugin.path]).status == 0)
            #expect((try status()["quarantine"]?.arrayValue ?? []).count == 2)

            // --clear PATH lifts both entries of that path: the next run loads it (and it crashes).
            let cleared = try run(["quarantine", "--clear", plugin.path])
            #expect(cleared.status == 0 && cleared.stdout.contains("cleared 2"), "\(cleared)")
            #expect((try status()["quarantine"]?.arrayValue ?? []).isEmpty)
            #expect(try run(["report", "error", "--handler", plugin.path]).signal == SIGSEGV)
        }
    }

    @Test("I: a plugin whose entry crashes is quarantined and not even opened on the next launch")
    func crashesWhileLoading() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool { [self] in
            let source = """
                \(fixturePrelude)
                static int opened;
                __attribute__((constructor)) static void count_open(void) {
                    FILE *f = fopen(getenv("OPENED_MARK"), "a");
                    if (f) { fputs("opened\\n", f); fclose(f); }
                }
                const rh_handler *rh_plugin_entry(const rh_host_api *h) {
                    host = h;
                    (void)opened;
                    volatile int *p = NULL; *p = 1;
                    return NULL;
                }
                """
            let plugin = try Fixtures.freshCopy(of: Fixtures.plugin("entry-crash", source: source))
            let mark = folder.appendingPathComponent("opened.txt")
            let environment = ["OPENED_MARK": mark.path]
            let first = try ChildProcess.reporthost(
                ["launch", "--handler", plugin.path, "--repository", repository], environment: environment, directory: folder)
            #expect(first.signal == SIGSEGV)
            let second = try ChildProcess.reporthost(
                ["launch", "--handler", plugin.path, "--repository", repository], environment: environment, directory: folder)
            #expect(second.status == 0, "\(second.stderr)")
            let entry = try #require(try status()["quarantine"]?.arrayValue?.first)
            #expect(entry["callback"] == .string("rh_plugin_entry"))
            #expect(entry["name"] == .string(plugin.lastPathComponent))  // it crashed before it had a name
            // Opened once (the crash), not by the second launch.
            #expect(try String(contentsOf: mark, encoding: .utf8) == "opened\n")
        }
    }

    @Test("I: a plugin whose constructor crashes, loaded through a symbolic link, is quarantined by its real path")
    func constructorCrashThroughALink() async throws {
        try await offPool { [self] in
            let source = """
                \(fixturePrelude)
                __attribute__((constructor)) static void boom(void) { volatile int *p = NULL; *p = 1; }
                const rh_handler *rh_plugin_entry(const rh_host_api *h) { host = h; return NULL; }
                """
            let plugin = try Fixtures.freshCopy(of: Fixtures.plugin("constructor-crash", source: source))
            let link = folder.appendingPathComponent("linked")
            try FileManager.default.createSymbolicLink(at: link, withDestinationURL: plugin.deletingLastPathComponent())
            let linked = link.appendingPathComponent(plugin.lastPathComponent).path
            #expect(try run(["launch", "--handler", linked]).signal == SIGSEGV)
            let next = try run(["launch", "--handler", linked])
            #expect(next.status == 0, "\(next.stderr)")
            let entry = try #require(try status()["quarantine"]?.arrayValue?.first)
            #expect(entry["callback"] == .string("dlopen"))
            #expect(entry["path"] == .string(PluginIdentity(path: plugin.path, system: .live).realPath))
        }
    }

    @Test("D-16: a plugin that fails to load (exit 2) is a clean failure: the next launch reports no abnormal exit")
    func loadFailureIsNotAnAbnormalExit() async throws {
        try await offPool { [self] in
            let missing = try run(["report", "error", "--handler", folder.appendingPathComponent("typo.so").path])
            #expect(missing.status == 2, "\(missing)")
            #expect(try run(["launch"]).status == 0)
            #expect(try status()["records"] == .array([]))
        }
    }

    @Test("I: a crash while the host itself runs never quarantines a plugin")
    func hostCrashQuarantinesNothing() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool { [self] in
            let plugin = try Fixtures.plugin("on-recovered", source: Self.onRecovered)
            #expect(try run(["crash", "--handler", plugin.path]).signal == SIGSEGV)
            // The second crash's launch runs the first crash through a calm plugin first.
            let calm = try Fixtures.plugin("calm", source: Self.crasher("calm", when: "0"))
            #expect(try run(["crash", "--handler", calm.path, "--signal", "ABRT"]).signal == SIGABRT)
            let launched = try run(["launch"])
            #expect(launched.status == 0, "\(launched.stderr)")
            #expect(try status()["quarantine"] == .array([]))
        }
    }

    @Test("I: the crash attribution is written at crash time: plugin path, digest, name and ABI member, and the faulting module")
    func crashFileNamesThePluginCall() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool { [self] in
            let plugin = try Fixtures.freshCopy(of: Fixtures.plugin("on-every", source: Self.onEvery))
            #expect(try run(["report", "exception", "--handler", plugin.path]).signal == SIGSEGV)
            let crashes = folder.appendingPathComponent("repo/crashes")
            let name = try #require(try FileManager.default.contentsOfDirectory(atPath: crashes.path).first { $0.hasSuffix(".crash") })
            let crash = try #require(CrashFile(path: crashes.appendingPathComponent(name).path, modifiedAt: Date(), system: .live))
            #expect(crash.complete)
            #expect(crash.plugin?.path == PluginIdentity(path: plugin.path, system: .live).realPath)
            #expect(crash.plugin?.digest == SHA256.hex(try Data(contentsOf: plugin)))
            #expect(crash.plugin?.name == "on-every")
            #expect(crash.plugin?.callback == "on_before_report_created")
            #expect(crash.faultModule == crash.plugin?.path)
            #expect(crash.blamesPlugin(hostModules: [crash.modules.first?.path ?? ""]))
        }
    }

    @Test("I: a plugin that overflows its stack on a recovered report (a thread of the host's own) is captured and quarantined")
    func stackOverflowOnRecoveredThread() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool { [self] in
            let source = fixtureHandler(
                name: "deep", before: "on_before",
                extra: """
                    static int deeper(volatile char *previous, int depth) {
                        volatile char frame[4096];
                        frame[0] = previous ? previous[0] + 1 : 0;
                        if (depth > (1 << 30)) return 0;  /* never: the stack ends long before */
                        return depth + deeper(frame, depth + 1) + frame[0];
                    }
                    static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                        (void)c; (void)t;
                        if (host->report_type(r) == RH_REPORT_CRASH) deeper(NULL, 0);
                        done();
                    }
                    """)
            let plugin = try Fixtures.freshCopy(of: Fixtures.plugin("deep", source: source, flags: ["-O0"]))
            #expect(try run(["crash"]).signal == SIGSEGV)
            let overflowed = try run(["launch", "--handler", plugin.path])
            #expect(overflowed.signal == SIGSEGV)
            let next = try run(["launch", "--handler", plugin.path])
            #expect(next.status == 0, "\(next.stderr)")
            let entry = try #require(try status()["quarantine"]?.arrayValue?.first)
            #expect(entry["name"] == .string("deep"))
            #expect(entry["callback"] == .string("on_before_report_created"))
        }
    }

    @Test("I: a plugin that smashes its stack pointer on the main thread is captured, attributed and quarantined; the host dies, never hangs")
    func smashedStackPointer() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool { [self] in
            let plugin = try Fixtures.freshCopy(of: Fixtures.plugin(
                "smash", source: Self.crasher("smash", when: "1", fault: #"__asm__ volatile("xor %%rsp, %%rsp\n\tpush %%rax" ::: "memory");"#)))
            let smashed = try run(["report", "error", "--handler", plugin.path])
            #expect(smashed.signal == SIGSEGV)
            let next = try run(["report", "error", "--handler", plugin.path])
            #expect(next.status == 0, "\(next.stderr)")
            let entry = try #require(try status()["quarantine"]?.arrayValue?.first)
            #expect(entry["name"] == .string("smash") && entry["signal"] == .string("SEGV"))
        }
    }

    @Test("I: reporthost check names the plugin and callback a crashed check died in")
    func checkNamesTheCrash() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool {
            let plugin = try Fixtures.plugin("on-every", source: Self.onEvery)
            let result = try ChildProcess.reporthost(["check", plugin.path, "--include", "^completes-once-running-app$"])
            #expect(result.status == 1)
            #expect(result.stdout.contains("crashed the check process with SIGSEGV in on-every.on_before_report_created"), "\(result.stdout)")
        }
    }
}
