import Foundation
import Glibc
import Host
import HostRecovery
import HostStore
import HostSupport
import HostTestSupport
import Testing

/// The repository and crash recovery (SPEC D-1, D-2, D-3, D-13, D-16, H-13, I-2, I-6, I-7)
/// with real child processes, real SQLite files and real SIGKILLs.
@Suite struct RecoveryTests {
    let fixture = CommandFixture("recovery")
    var folder: URL { fixture.folder }
    var repository: String { fixture.repository }

    @discardableResult
    func run(_ arguments: [String], crashAt: FaultPoint? = nil, environment: [String: String] = [:]) throws -> ChildProcess.Result {
        try fixture.run(arguments, crashAt: crashAt, environment: environment)
    }

    func status() throws -> JSONValue { try fixture.status() }

    func records() throws -> [JSONValue] { try fixture.records() }

    var crashFiles: [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: repository + "/crashes")) ?? []
    }

    static let recorder = fixtureHandler(
        name: "recorder", before: "on_before",
        extra: """
            #include <sys/syscall.h>
            #include <unistd.h>
            static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                (void)c;
                host->set_attribute(r, "chain.ran", "yes");
                host->set_attribute(r, "chain.thread", syscall(SYS_gettid) == getpid() ? "main" : "background");
                host->set_attribute(r, "chain.terminating", t ? "true" : "false");
                done();
            }
            """)

    @Test("D-1: a real crash becomes a stored, handled report awaiting its first attempt; the crash file is purged")
    func crashThenLaunch() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let plugin = try Fixtures.plugin("recorder", source: Self.recorder)
            let crashed = try run(["crash", "--signal", "SEGV"])
            #expect(crashed.signal == SIGSEGV)
            #expect(crashFiles.count == 1)
            let launched = try run(["launch", "--handler", plugin.path])
            #expect(launched.status == 0, "\(launched.stderr)")
            #expect(crashFiles.isEmpty)
            let all = try records()
            #expect(all.count == 1)
            let record = try #require(all.first)
            #expect(record["trigger"] == .string("crash") && record["type"] == .string("crash"))
            #expect(record["state"] == .string("awaiting_first_attempt"))
            #expect(record["attempts"] == .number(0))
        }
    }

    @Test("D-1: the crash file records signal, code, address, thread, registers, frames with modules, attributes; the process still dies of the signal")
    func crashFileContents() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let config = folder.appendingPathComponent("c.json")
            try #"{"attributes": {"app.version": "7.1"}}"#.write(to: config, atomically: true, encoding: .utf8)
            var signals: Set<Int32> = []
            for (name, number) in [("SEGV", SIGSEGV), ("BUS", SIGBUS), ("ILL", SIGILL), ("FPE", SIGFPE), ("ABRT", SIGABRT), ("TRAP", SIGTRAP)] {
                let result = try run(["crash", "--signal", name, "--config", config.path])
                #expect(result.signal == number, "\(name): \(result)")
                // Each launch recovers the earlier crash file first (I-2): one file is left each time.
                let files = crashFiles.filter { $0.hasSuffix(".crash") }
                #expect(files.count == 1, "\(name): \(files)")
                let crash = try #require(CrashFile(path: repository + "/crashes/" + (files.first ?? ""), modifiedAt: Date(), system: .live))
                #expect(crash.complete)
                #expect(crash.signal == number)
                signals.insert(crash.signal)
                #expect(crash.session?.count == 36)
                #expect(crash.thread > 0)
                #expect(crash.registers.contains { $0.0 == "rip" })
                #expect(crash.frames.count > 3)
                #expect(crash.modules.contains { $0.path == "[main]" || $0.path.hasSuffix("reporthost") })
                #expect(crash.attributes["app.version"] == "7.1")
                #expect(crash.payload()["threads"]?[String(crash.thread)]?["frames"]?.arrayValue?.isEmpty == false)
            }
            #expect(signals == [SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP])
            #expect(try run(["launch"]).status == 0)
            #expect(try records().count == 6)
        }
    }

    @Test("H-9, D-1: the recovered chain runs off the main thread, not terminating, under a fresh report id")
    func recoveredChainRules() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let plugin = try Fixtures.plugin("recorder", source: Self.recorder)
            try run(["crash"])
            try run(["launch", "--handler", plugin.path])
            let database = try #require(try Repository.openForReading(folder: URL(fileURLWithPath: repository)))
            let record = try #require(try database.records().first)
            #expect(record.document.content.attributes["chain.ran"] == "yes")
            #expect(record.document.content.attributes["chain.thread"] == "background")
            #expect(record.document.content.attributes["chain.terminating"] == "false")
            #expect(record.crash?["signal_name"] == .string("SEGV"))
        }
    }

    @Test("D-3: a missing attachment is omitted with a diagnostic; copies do not follow later changes to the originals")
    func attachmentCopies() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let original = folder.appendingPathComponent("app.log")
            try "before the crash".write(to: original, atomically: true, encoding: .utf8)
            try run(["crash", "--attach", original.path, "--attach", folder.appendingPathComponent("missing.log").path])
            try run(["launch"])
            try "changed after the launch".write(to: original, atomically: true, encoding: .utf8)
            let database = try #require(try Repository.openForReading(folder: URL(fileURLWithPath: repository)))
            let record = try #require(try database.records().first)
            let copies = try database.attachments(of: record.rowID)
            #expect(copies.map(\.name) == ["app.log"])
            #expect(copies.first?.data == Data("before the crash".utf8))
            #expect(copies.first?.source == .recovered)
            #expect(record.document.internalLog.contains { $0.message.contains("missing.log is missing") })
        }
    }

    @Test("I-6, D-2, H-13: a SIGKILL at every fault point of a batch of crash files loses nothing and duplicates nothing; no crash file is purged before its save")
    func everyFaultPoint() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool {
            for point in [FaultPoint.afterSave, .afterPurge, .duringHandlers] {
                let scenario = makeTemporaryDirectory("fault-\(point.rawValue)")
                let repository = scenario.appendingPathComponent("repo").path
                func reporthost(_ arguments: [String], crashAt: FaultPoint? = nil) throws -> ChildProcess.Result {
                    try ChildProcess.reporthost(
                        arguments + ["--repository", repository], environment: crashAt.map { ["REPORTHOST_CRASH_AT": $0.rawValue] } ?? [:])
                }
                // Three crash files of programs on other repositories (each `crash` recovers the
                // files before it): the killed launch saves them in one batch.
                let crashes = repository + "/crashes"
                try FileManager.default.createDirectory(atPath: crashes, withIntermediateDirectories: true)
                for index in 0..<3 {
                    let other = scenario.appendingPathComponent("crashed-\(index)").path
                    // Three different crashes (identical ones would be one record, SPEC B-3).
                    _ = try ChildProcess.reporthost(["crash", "--signal", ["SEGV", "BUS", "ILL"][index], "--repository", other])
                    for name in try FileManager.default.contentsOfDirectory(atPath: other + "/crashes") where name.hasSuffix(".crash") {
                        try FileManager.default.moveItem(atPath: other + "/crashes/" + name, toPath: crashes + "/" + name)
                    }
                }
                let killed = try reporthost(["launch"], crashAt: point)
                #expect(killed.signal == SIGKILL, "\(point): \(killed)")
                let files = ((try? FileManager.default.contentsOfDirectory(atPath: crashes)) ?? []).filter { $0.hasSuffix(".crash") }
                let saved = try Repository.openForReading(folder: URL(fileURLWithPath: repository))?.records() ?? []
                // Never purged before saved: each crash is still a file, or a record holds it (or both).
                let savedCrashes = saved.filter { $0.trigger == .crash }
                #expect(files.count + savedCrashes.count >= 3, "\(point): \(files) \(saved.map(\.state))")
                #expect(savedCrashes.count == 3, "\(point): one transaction saves the batch")
                let idsBeforeRecovery = Set(savedCrashes.map(\.reportID))
                #expect(try reporthost(["launch"]).status == 0)
                let all = try Repository.openForReading(folder: URL(fileURLWithPath: repository))?.records() ?? []
                // The killed launch had marked its session first (I-2): it is an abnormal exit too.
                #expect(all.filter { $0.trigger == .abnormalExit }.count == 1, "\(point)")
                let after = all.filter { $0.trigger == .crash }
                #expect(after.count == 3, "\(point): \(after.map(\.reportID))")
                #expect(after.allSatisfy { $0.state == .awaitingFirstAttempt })
                if point == .duringHandlers {
                    // Re-keyed: the interrupted chains' ids are gone (H-13).
                    #expect(idsBeforeRecovery.isDisjoint(with: after.map(\.reportID)))
                }
                #expect(((try? FileManager.default.contentsOfDirectory(atPath: repository + "/crashes")) ?? []).isEmpty)
            }
        }
    }

    @Test("H-13: a running-app report killed during its callbacks is kept without their changes and not called again")
    func journaledReport() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let plugin = try Fixtures.plugin("recorder", source: Self.recorder)
            for point in [FaultPoint.afterJournal, .duringHandlers] {
                let killed = try run(["report", "error", "--summary", "journaled at \(point.rawValue)", "--handler", plugin.path], crashAt: point)
                #expect(killed.signal == SIGKILL)
                // Settle before the next kill: a launch armed at during-handlers would die in recovery.
                #expect(try run(["launch", "--handler", plugin.path]).status == 0)
            }
            let database = try #require(try Repository.openForReading(folder: URL(fileURLWithPath: repository)))
            let all = try database.records()
            let errors = all.filter { $0.trigger == .logError }
            #expect(errors.compactMap(\.document.content.summary).sorted() == ["journaled at after-journal", "journaled at during-handlers"])
            #expect(errors.allSatisfy { $0.state == .awaitingFirstAttempt && $0.document.content.attributes["chain.ran"] == nil })
            #expect(errors.allSatisfy { $0.document.internalLog.contains { $0.message.contains("without the callbacks' changes") } })
            // D-16: each killed session left its mark and no crash file: one abnormal exit each.
            #expect(all.filter { $0.trigger == .abnormalExit }.count == 2)
        }
    }

    @Test("H-13: a dialog report the user had not sent when the process died is dropped")
    func unsentDialogDropped() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let script = try Fixtures.file("send.json", #"{"action": "send"}"#)
            let killed = try run(["report", "bug", "--dialog-script", script.path], crashAt: .duringHandlers)
            #expect(killed.signal == SIGKILL)
            try run(["launch"])
            let all = try records()
            #expect(!all.contains { $0["trigger"] == .string("dialog") })
            #expect(all.count == 1 && all.first?["trigger"] == .string("abnormal_exit"))
        }
    }

    @Test("D-16: a clean stop leaves no mark; a session killed without a crash file yields exactly one abnormal_exit report")
    func abnormalExit() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            try run(["report", "bug"])
            try run(["launch"])
            #expect(try records().count == 1)
            let killed = try run(["report", "bug"], crashAt: .afterJournal)
            #expect(killed.signal == SIGKILL)
            try run(["launch"])
            try run(["launch"])
            let triggers = try records().compactMap { $0["trigger"]?.stringValue }.sorted()
            #expect(triggers == ["abnormal_exit", "upload", "upload"])
        }
    }

    @Test("H-13: a report no callback sees is stored once: killed before that store (during the host's own steps) it is not there, killed after it is there once, and each kill is one abnormal exit")
    func unchainedReportKilled() async throws {
        try await offPool { [self] in
            let before = try run(["report", "error", "--summary", "killed before"], crashAt: .duringHandlers)
            #expect(before.signal == SIGKILL)
            let after = try run(["report", "error", "--summary", "killed after"], crashAt: .afterJournal)
            #expect(after.signal == SIGKILL)
            #expect(try run(["launch"]).status == 0)
            let stored = try #require(try Repository.openForReading(folder: URL(fileURLWithPath: repository))).records()
            let errors = stored.filter { $0.trigger == .logError }
            #expect(errors.map(\.document.content.summary) == ["killed after"])
            #expect(errors.allSatisfy { $0.state == .awaitingFirstAttempt && !$0.document.internalLog.contains { $0.message.contains("without the callbacks' changes") } })
            #expect(stored.filter { $0.trigger == .abnormalExit }.count == 2)
        }
    }

    @Test("I: status on a folder without a repository prints an empty list and creates nothing")
    func statusOfNothing() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let empty = folder.appendingPathComponent("nothing-here")
            try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
            let result = try ChildProcess.reporthost(["status", "--json", "--repository", empty.path])
            #expect(result.status == 0)
            let json = try JSONValue.parse(result.stdout)
            #expect(json["records"] == .array([]))
            #expect(json["totals"]?["records"] == .number(0))
            #expect(json["crash_points"]?.arrayValue?.count == FaultPoint.allCases.count)
            #expect(try FileManager.default.contentsOfDirectory(atPath: empty.path).isEmpty)
        }
    }

    @Test("D-13: a corrupt database is left in place byte for byte; commands exit 1 naming the file")
    func corruptDatabase() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            try FileManager.default.createDirectory(atPath: repository, withIntermediateDirectories: true)
            let database = repository + "/reporthost.sqlite"
            let garbage = Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
            try garbage.write(to: URL(fileURLWithPath: database))
            for arguments in [["report", "bug"], ["launch"], ["status"]] {
                let result = try run(arguments)
                #expect(result.status == 1, "\(arguments): \(result.stderr)")
                #expect(result.stderr.hasPrefix("reporthost: error: \(database)"), "\(arguments): \(result.stderr)")
                #expect(result.stderr.contains("corrupt"))
            }
            #expect(FileManager.default.contents(atPath: database) == garbage)
        }
    }

    @Test("D-13: a read-only repository folder and a full disk exit 1 naming the path; nothing stored is lost")
    func storageFailures() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            try run(["report", "bug", "--summary", "kept"])
            let full = try run(["report", "bug", "--summary", "never stored"], environment: ["REPORTHOST_FAULT": "disk-full"])
            #expect(full.status == 1)
            #expect(full.stderr.contains("disk is full") && full.stderr.contains(repository))
            let summaries = try Repository.openForReading(folder: URL(fileURLWithPath: repository))?.records().map(\.document.content.summary)
            #expect(summaries == ["kept"])

            // A folder that cannot be written: permission bits for ordinary users; for root (who
            // ignores them) a path whose parent is a regular file, which nobody can create.
            let blocker = folder.appendingPathComponent("not-a-folder")
            try "x".write(to: blocker, atomically: true, encoding: .utf8)
            let unwritable = getuid() == 0 ? blocker.appendingPathComponent("repo") : folder.appendingPathComponent("read-only/repo")
            if getuid() != 0 {
                try FileManager.default.createDirectory(at: unwritable.deletingLastPathComponent(), withIntermediateDirectories: true)
                chmod(unwritable.deletingLastPathComponent().path, 0o500)
            }
            defer { chmod(unwritable.deletingLastPathComponent().path, 0o700) }
            let denied = try ChildProcess.reporthost(["report", "bug", "--repository", unwritable.path])
            #expect(denied.status == 1)
            #expect(denied.stderr.hasPrefix("reporthost: error: \(unwritable.path)"), "\(denied.stderr)")
        }
    }

    @Test("H-13: a chain that keeps killing the host on a recovered report runs at most three times; then the report goes without it")
    func poisonedChain() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let killer = try Fixtures.plugin(
                "killer",
                source: fixtureHandler(
                    name: "killer", before: "on_before",
                    extra: "#include <signal.h>\n#include <unistd.h>\nstatic void on_before(void *c, rh_report *r, bool t, rh_completion d) { (void)c; (void)r; (void)t; (void)d; kill(getpid(), SIGKILL); }"))
            try run(["crash"])
            for _ in 0..<3 {
                let killed = try run(["launch", "--handler", killer.path])
                #expect(killed.signal == SIGKILL)
            }
            let final = try run(["launch", "--handler", killer.path])
            #expect(final.status == 0, "\(final.stderr)")
            let database = try #require(try Repository.openForReading(folder: URL(fileURLWithPath: repository)))
            let crash = try #require(try database.records().first { $0.trigger == .crash })
            #expect(crash.state == .awaitingFirstAttempt)
            #expect(crash.document.internalLog.contains { $0.message.contains("the handler chain ended the host 3 times") })
        }
    }

    @Test("R-4, D-1: a host attribute set by a plugin reaches the crash file and the recovered report")
    func hostAttributeInCrash() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let plugin = try Fixtures.plugin(
                "host-attribute",
                source: """
                    #include <reporthost/plugin.h>
                    static rh_handler handler = {RH_ABI_VERSION_MAJOR, RH_ABI_VERSION_MINOR, sizeof(rh_handler), "tagger", NULL, NULL, NULL, NULL, NULL, NULL};
                    const rh_handler *rh_plugin_entry(const rh_host_api *h) { h->set_host_attribute("build.flavour", "nightly"); return &handler; }
                    """)
            try run(["crash", "--handler", plugin.path])
            try run(["launch"])
            let database = try #require(try Repository.openForReading(folder: URL(fileURLWithPath: repository)))
            let crash = try #require(try database.records().first { $0.trigger == .crash })
            #expect(crash.document.content.attributes["build.flavour"] == "nightly")
        }
    }

    @Test("H-13: a sent dialog report whose host dies in the after-callbacks keeps the user's edits, not the callbacks' changes")
    func sentDialogJournal() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let plugin = try Fixtures.plugin(
                "dies-after",
                source: fixtureHandler(
                    name: "dies-after", before: "on_before", after: "on_after",
                    extra: """
                        #include <signal.h>
                        #include <unistd.h>
                        static void on_before(void *c, rh_report *r, bool t, rh_completion d) { (void)c; (void)t; host->set_attribute(r, "before.ran", "yes"); d(); }
                        static void on_after(void *c, rh_report *r, bool t, rh_completion d) { (void)c; (void)r; (void)t; (void)d; kill(getpid(), SIGKILL); }
                        """))
            let script = try Fixtures.file("sent.json", #"{"summary": "typed by the user", "action": "send"}"#)
            let killed = try run(["report", "bug", "--dialog-script", script.path, "--handler", plugin.path])
            #expect(killed.signal == SIGKILL)
            try run(["launch"])
            let database = try #require(try Repository.openForReading(folder: URL(fileURLWithPath: repository)))
            let dialog = try #require(try database.records().first { $0.trigger == .dialog })
            #expect(dialog.state == .awaitingFirstAttempt)
            #expect(dialog.document.content.summary == "typed by the user")
            #expect(dialog.document.content.attributes["before.ran"] == nil)
        }
    }
}
