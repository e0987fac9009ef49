import Foundation
import Glibc
import Host
import HostSupport
import HostTestSupport
import Receiver
import Testing

/// Breadcrumbs, sessions and crash loops as a program that embeds the host meets them (SPEC
/// B-1 … B-3): real C programs linked with libreporthost.so, killed with SIGKILL or crashing
/// for real, then the real `reporthost` recovering what they left.
@Suite struct BreadcrumbCommandTests {
    let fixture = CommandFixture("breadcrumbs")

    /// `crumbs CONFIG|- REPOSITORY MODE [N]`: starts the host, prints `consecutive <n>`, then by
    /// MODE: `kill`, `segv` or `stop` leave N breadcrumbs `step 1` … `step N` (category `app`)
    /// and then SIGKILL themselves, fault, or stop cleanly; `report` leaves N and raises an
    /// error report; `soak` prints `writing` and has four threads write breadcrumbs whose
    /// text their number determines until the process is killed; `misuse` prints a line
    /// `<case> <result>` per wrong call; `quiet` writes N from a thread any system call kills
    /// (N = -1: a getpid() instead, the control).
    static let driver: Result<URL, Fixtures.CompileError> = EmbedTests.linked("crumbs-driver", source: {
        try Fixtures.file("crumbs-driver.c", #"""
            #include <reporthost/embed.h>
            #include <linux/audit.h>
            #include <linux/filter.h>
            #include <linux/seccomp.h>
            #include <pthread.h>
            #include <stddef.h>
            #include <sys/prctl.h>
            #include <sys/syscall.h>
            #include <signal.h>
            #include <stdint.h>
            #include <stdio.h>
            #include <stdlib.h>
            #include <string.h>
            #include <unistd.h>

            static rh_embed *host;

            /* What breadcrumb n of thread t says: the test checks every one it reads back. */
            static void soak_text(char *out, size_t cap, int thread, long n) {
                int length = snprintf(out, cap, "t%d n%ld ", thread, n);
                int fill = (int)((n * 7) % 300);
                for (int i = 0; i < fill && length + i < (int)cap - 1; i++) out[length + i] = (char)('a' + (thread + n) % 26);
                out[length + fill < (int)cap ? length + fill : (int)cap - 1] = 0;
            }

            static void *soak(void *arg) {
                int thread = (int)(intptr_t)arg;
                char text[400], category[8];
                snprintf(category, sizeof category, "t%d", thread);
                for (long n = 0;; n++) {
                    soak_text(text, sizeof text, thread, n);
                    rh_embed_breadcrumb(host, RH_LOG_INFO, category, text);
                    /* The ring has been lapped many times over: a kill lands among writes. */
                    if (thread == 0 && n == 5000) {
                        printf("writing\n");
                        fflush(stdout);
                    }
                }
                return NULL;
            }

            /* Breadcrumbs from a thread that any system call but exit kills (the whole process,
             * by SIGSYS): plain, UTF-8, without a category, longer than a slot. */
            static int quiet_count, quiet_recorded;
            static void *quiet(void *unused) {
            #if defined(__x86_64__)
                const unsigned arch = AUDIT_ARCH_X86_64;
            #else
                const unsigned arch = AUDIT_ARCH_AARCH64;
            #endif
                struct sock_filter filter[] = {
                    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
                    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
                    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
                    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
                    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_exit, 0, 1),
                    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
                    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
                };
                struct sock_fprog program = {sizeof filter / sizeof filter[0], filter};
                static char long_text[3000];
                memset(long_text, 'x', sizeof long_text - 1);
                const char *texts[] = {"request finished with status 200", "caf\xc3\xa9 \xe2\x9c\x93", long_text};
                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) return NULL;
                if (quiet_count < 0) syscall(SYS_getpid); /* the control: this is killed */
                for (int i = 0; i < quiet_count; i++)
                    quiet_recorded += rh_embed_breadcrumb(host, RH_LOG_INFO, i % 4 == 3 ? NULL : "app", texts[i % 3]) == RH_EMBED_OK;
                syscall(SYS_exit, 0); /* pthread_exit would unmap and wake: system calls */
                return NULL;
            }

            int main(int argc, char **argv) {
                if (argc < 4) return 2;
                char error[512];
                host = rh_embed_start(strcmp(argv[1], "-") == 0 ? NULL : argv[1], argv[2], error, sizeof error);
                if (host == NULL) {
                    printf("start failed: %s\n", error);
                    return 1;
                }
                printf("consecutive %d\n", rh_embed_consecutive_crashes(host));
                fflush(stdout);
                const char *mode = argv[3];
                int count = argc > 4 ? atoi(argv[4]) : 0;
                if (strcmp(mode, "soak") == 0) {
                    pthread_t threads[4];
                    for (int t = 0; t < 4; t++) pthread_create(&threads[t], NULL, soak, (void *)(intptr_t)t);
                    for (;;) pause();
                }
                if (strcmp(mode, "quiet") == 0) {
                    pthread_t thread;
                    quiet_count = count;
                    pthread_create(&thread, NULL, quiet, NULL);
                    pthread_join(thread, NULL);
                    printf("quiet %d of %d\n", quiet_recorded, count);
                    rh_embed_stop(host);
                    return 0;
                }
                if (strcmp(mode, "misuse") == 0) {
                    printf("level-7 %d\n", rh_embed_breadcrumb(host, 7, "app", "x"));
                    printf("level-negative %d\n", rh_embed_breadcrumb(host, -1, "app", "x"));
                    printf("null-message %d\n", rh_embed_breadcrumb(host, RH_LOG_INFO, "app", NULL));
                    printf("bad-utf8 %d\n", rh_embed_breadcrumb(host, RH_LOG_INFO, "app", "\xff\xfe"));
                    printf("bad-utf8-category %d\n", rh_embed_breadcrumb(host, RH_LOG_INFO, "\xc3", "x"));
                    printf("null-category %d\n", rh_embed_breadcrumb(host, RH_LOG_DEBUG, NULL, "no category"));
                    printf("stale %d\n", rh_embed_breadcrumb((rh_embed *)(uintptr_t)0x1234, RH_LOG_INFO, "app", "x"));
                    printf("stale-consecutive %d\n", rh_embed_consecutive_crashes((rh_embed *)(uintptr_t)0x1234));
                    char id[37];
                    printf("report %d\n", rh_embed_report(host, "error", "after misuse", NULL, id));
                    rh_embed_stop(host);
                    printf("stopped %d\n", rh_embed_breadcrumb(host, RH_LOG_INFO, "app", "x"));
                    printf("stopped-consecutive %d\n", rh_embed_consecutive_crashes(host));
                    return 0;
                }
                char text[64];
                for (int i = 1; i <= count; i++) {
                    snprintf(text, sizeof text, "step %d", i);
                    if (rh_embed_breadcrumb(host, i % 10 == 0 ? RH_LOG_WARN : RH_LOG_INFO, "app", text) != RH_EMBED_OK) return 3;
                }
                if (strcmp(mode, "kill") == 0) raise(SIGKILL);
                if (strcmp(mode, "segv") == 0) {
                    volatile int *nowhere = NULL;
                    *nowhere = 1;
                }
                if (strcmp(mode, "report") == 0) {
                    char id[37];
                    printf("report %d %s\n", rh_embed_report(host, "error", "with breadcrumbs", NULL, id), id);
                }
                rh_embed_stop(host);
                printf("stopped\n");
                return 0;
            }
            """#)
    }, flags: ["-std=c11", "-D_GNU_SOURCE", "-pthread", "-Wall", "-Werror"])

    func crumbs(_ arguments: [String], config: String = "-") throws -> ChildProcess.Result {
        try ChildProcess.run(try Self.driver.get().path, [config, fixture.repository] + arguments, directory: fixture.folder)
    }

    /// The newest stored report's document (`show latest --json`).
    func latest() throws -> JSONValue {
        let shown = try fixture.run(["show", "latest", "--json"])
        guard shown.status == 0 else { throw CommandFixture.CommandFailed(description: "show exited \(shown.status): \(shown.stderr)") }
        return try JSONValue.parse(shown.stdout)
    }

    func messages(_ document: JSONValue, category: String = "app") -> [String] {
        (document["breadcrumbs"]?.arrayValue ?? []).filter { $0["category"]?.stringValue == category }.compactMap { $0["message"]?.stringValue }
    }

    @Test("B-1: a program that leaves 150 breadcrumbs and SIGKILLs itself: its abnormal exit carries the last 100 in order; its ring and .alive files go")
    func breadcrumbsSurviveSIGKILL() throws {
        let killed = try crumbs(["kill", "150"])
        #expect(killed.status == SIGKILL, "\(killed.stdout) \(killed.stderr.suffix(1_000))")
        let launched = try fixture.run(["launch"])
        #expect(launched.status == 0, "\(launched.stderr.suffix(2_000))")
        let document = try latest()
        #expect(document["trigger"]?.stringValue == "abnormal_exit")
        #expect(messages(document) == (51...150).map { "step \($0)" })
        let crumbs = document["breadcrumbs"]?.arrayValue ?? []
        #expect(crumbs.count == 100)
        #expect(crumbs.compactMap { $0["level"]?.stringValue }.filter { $0 == "warn" }.count == 10)
        #expect(crumbs.allSatisfy { ($0["timestamp"]?.stringValue ?? "").hasSuffix("Z") })
        let rings = (try? FileManager.default.contentsOfDirectory(atPath: fixture.folder.appendingPathComponent("repo/breadcrumbs").path)) ?? []
        #expect(rings.isEmpty, "the ring file goes once its report carries it: \(rings)")
        let alive = (try? FileManager.default.contentsOfDirectory(atPath: fixture.folder.appendingPathComponent("repo/sessions").path)) ?? []
        #expect(alive.isEmpty, "the killed session's .alive file goes with its session: \(alive)")
    }

    @Test("B-1: the same after a SIGSEGV: the crash report carries the last 100 in order; show prints them")
    func breadcrumbsSurviveSIGSEGV() throws {
        let crashed = try crumbs(["segv", "150"])
        #expect(crashed.status == SIGSEGV, "\(crashed.stderr.suffix(1_000))")
        #expect(try fixture.run(["launch"]).status == 0)
        let document = try latest()
        #expect(document["trigger"]?.stringValue == "crash")
        #expect(messages(document) == (51...150).map { "step \($0)" })
        let shown = try fixture.run(["show", "latest"])
        #expect(shown.stdout.contains("breadcrumbs (100, oldest first):"))
        #expect(shown.stdout.contains("[app] step 150"))
    }

    @Test("B-1: a soak of kills during writes: every breadcrumb read back is one that was written, whole")
    func noTornBreadcrumb() throws {
        let kills = 25
        for _ in 0..<kills {
            let log = fixture.folder.appendingPathComponent("soak-\(UUID().uuidString).log")
            let child = try SpawnedChild([try Self.driver.get().path, "-", fixture.repository, "soak"], log: log)
            #expect(child.readLine()?.hasPrefix("consecutive") == true)
            #expect(child.readLine() == "writing")
            child.kill()
            _ = child.wait()
            let launched = try fixture.run(["launch"])
            #expect(launched.status == 0, "\(launched.stderr.suffix(1_000))")
        }
        let records = try fixture.records().filter { $0["trigger"]?.stringValue == "abnormal_exit" }
        #expect(records.count == kills)
        var checked = 0
        for record in records {
            guard let id = record["report_id"]?.stringValue else { continue }
            let document = try JSONValue.parse(try fixture.run(["show", id, "--json"]).stdout)
            for crumb in document["breadcrumbs"]?.arrayValue ?? [] where crumb["category"]?.stringValue != "reporthost" {
                let message = crumb["message"]?.stringValue ?? ""
                let fields = message.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
                guard fields.count >= 2, let thread = Int(fields[0].dropFirst()), let n = Int(fields[1].dropFirst()) else {
                    Issue.record("a breadcrumb no thread wrote: \(message.prefix(80))")
                    continue
                }
                let fill = String(repeating: Character(Unicode.Scalar(UInt8(97 + (thread + n) % 26))), count: (n * 7) % 300)
                #expect(message == "t\(thread) n\(n) \(fill)" && crumb["category"]?.stringValue == "t\(thread)")
                checked += 1
            }
        }
        // A ring holds 100; at most the four slots being written at the kill are skipped.
        #expect(checked >= kills * 95, "each ring is read back whole but for the slots being written: \(checked)")
    }

    @Test("B-1: breadcrumbs.max bounds what a report carries; a running-app report carries the session's so far")
    func maxConfigured() throws {
        let config = fixture.folder.appendingPathComponent("max.json")
        try #"{"breadcrumbs": {"max": 20}}"#.write(to: config, atomically: true, encoding: .utf8)
        let reported = try crumbs(["report", "30"], config: config.path)
        #expect(reported.stdout.contains("report 0 "), "\(reported.stdout) \(reported.stderr.suffix(1_000))")
        let document = try latest()
        #expect(document["trigger"]?.stringValue == "log_error")
        #expect(messages(document) == (11...30).map { "step \($0)" })
        #expect((document["breadcrumbs"]?.arrayValue ?? []).count == 20)
    }

    @Test("B-1: with breadcrumbs off (max 0) a valid call returns RH_EMBED_OK and records nothing; after stop, RH_EMBED_ERR_STOPPED")
    func breadcrumbsOff() throws {
        let config = fixture.folder.appendingPathComponent("off.json")
        try #"{"breadcrumbs": {"max": 0}}"#.write(to: config, atomically: true, encoding: .utf8)
        // The driver exits 3 at the first breadcrumb that does not return RH_EMBED_OK.
        let reported = try crumbs(["report", "30"], config: config.path)
        #expect(reported.status == 0 && reported.stdout.contains("report 0 "), "\(reported.stdout) \(reported.stderr.suffix(1_000))")
        #expect(messages(try latest()).isEmpty)
        let misused = try crumbs(["misuse"], config: config.path)
        for (name, status) in [("level-7", -1), ("null-message", -1), ("null-category", 0), ("stale", -2), ("stopped", -2)] {
            #expect(misused.stdout.contains("\(name) \(status)\n"), "\(name): \(misused.stdout)")
        }
    }

    @Test("B-1: a breadcrumb makes no system call: 3,000 from a thread that any system call but exit kills, each RH_EMBED_OK")
    func noSystemCall() throws {
        let result = try crumbs(["quiet", "3000"])
        #expect(result.status == 0 && result.stdout.contains("quiet 3000 of 3000\n"), "\(result.status) \(result.stdout) \(result.stderr.suffix(500))")
        let control = try crumbs(["quiet", "-1"])  // the filter is real: getpid() on that thread kills the process
        #expect(control.signal == SIGSYS, "\(control.status) \(control.stdout)")
    }

    @Test("B-1: wrong calls return RH_EMBED_ERR_INVALID and write nothing; a stale or stopped handle RH_EMBED_ERR_STOPPED")
    func misuse() throws {
        let result = try crumbs(["misuse"])
        #expect(result.status == 0, "\(result.stderr.suffix(1_000))")
        for (name, status) in [
            ("level-7", -1), ("level-negative", -1), ("null-message", -1), ("bad-utf8", -1), ("bad-utf8-category", -1),
            ("null-category", 0), ("stale", -2), ("stale-consecutive", -2), ("report", 0), ("stopped", -2), ("stopped-consecutive", -2),
        ] {
            #expect(result.stdout.contains("\(name) \(status)\n"), "\(name): \(result.stdout)")
        }
        let document = try latest()
        let crumbs = (document["breadcrumbs"]?.arrayValue ?? []).filter { $0["category"]?.stringValue != "reporthost" }
        #expect(crumbs.count == 1)
        #expect(crumbs.first?["category"]?.stringValue == "default" && crumbs.first?["message"]?.stringValue == "no category")
        #expect(crumbs.first?["level"]?.stringValue == "debug")
    }

    @Test("B-3: crashed sessions in a row are counted at start, logged, and a clean stop resets the count")
    func crashLoopCounted() throws {
        for expected in 0..<3 {
            let crashed = try crumbs(["segv", "1"])
            #expect(crashed.stdout.hasPrefix("consecutive \(expected)\n"), "\(crashed.stdout)")
        }
        let fourth = try crumbs(["stop", "1"])
        #expect(fourth.stdout.hasPrefix("consecutive 3\n"))
        #expect(fourth.stderr.contains("3 consecutive crashed sessions"), "\(fourth.stderr.suffix(2_000))")
        #expect(try crumbs(["stop", "1"]).stdout.hasPrefix("consecutive 0\n"))
        // The three identical crashes are one record counting three.
        let crashes = try fixture.records().filter { $0["trigger"]?.stringValue == "crash" }
        #expect(crashes.count == 1)
        let id = try #require(crashes.first?["report_id"]?.stringValue)
        let document = try JSONValue.parse(try fixture.run(["show", id, "--json"]).stdout)
        #expect(document["duplicates"]?.intValue == 3)
        #expect(try fixture.run(["show", id]).stdout.contains("3 identical crashes"))
    }

    @Test("B-2: ten sessions of release 2.3.0 with three crashes read 70.0% crash-free in status and status --json")
    func crashFreeInStatus() throws {
        let config = fixture.folder.appendingPathComponent("release.json")
        try #"{"release": "2.3.0"}"#.write(to: config, atomically: true, encoding: .utf8)
        for step in ["crash", "report", "crash", "report", "crash", "report", "report", "report", "report", "report"] {
            let words = step == "crash" ? ["crash", "--config", config.path] : ["report", "error", "--summary", "s", "--config", config.path]
            _ = try fixture.run(words)
        }
        let status = try fixture.run(["status"])
        #expect(status.stdout.contains("2.3.0: 70.0% crash-free (7 of 10 sessions)"), "\(status.stdout)")
        let release = try #require(try fixture.status()["sessions"]?["releases"]?.arrayValue?.first)
        #expect(release["release"]?.stringValue == "2.3.0")
        #expect(release["sessions"]?.intValue == 10 && release["ended"]?.intValue == 10 && release["crashed"]?.intValue == 3)
        #expect(release["abnormal_exit"]?.intValue == 0)
        #expect(release["crash_free"]?.doubleValue == 0.7)
    }

    @Test("B-2: without a release key, the version attribute names the release")
    func releaseFromVersion() throws {
        _ = try fixture.run(["report", "error", "--summary", "s", "--attribute", "version=9.9"])
        let config = fixture.folder.appendingPathComponent("version.json")
        try #"{"attributes": {"version": "1.4.2"}}"#.write(to: config, atomically: true, encoding: .utf8)
        _ = try fixture.run(["report", "error", "--summary", "s", "--config", config.path])
        let releases = try fixture.status()["sessions"]?["releases"]?.arrayValue ?? []
        #expect(releases.contains { $0["release"]?.stringValue == "1.4.2" && $0["crash_free"]?.doubleValue == 1 })
        #expect(releases.contains { $0["release"] == .null }, "--attribute is a report's, not the program's release")
    }

    @Test("B-2: metrics.enabled sends each session's start as Backtrace's unique and summed events; reports carry the guid")
    func metricsSent() throws {
        let receiver = try LocalReceiver(folder: fixture.folder.appendingPathComponent("got-metrics"))
        defer { receiver.stop() }
        let off = try fixture.configuration(url: receiver.url, extra: #""release": "2.3.0""#)
        _ = try fixture.run(["report", "error", "--summary", "no metrics", "--config", off])
        #expect(receiver.metricEvents.isEmpty, "metrics are off by default")
        let on = try fixture.configuration(url: receiver.url, extra: #""release": "2.3.0", "metrics": {"enabled": true}"#)
        for _ in 0..<2 { #expect(try fixture.run(["report", "error", "--summary", "with metrics", "--config", on]).status == 0) }
        let events = receiver.metricEvents
        #expect(events.map(\.kind) == ["unique-events", "summed-events", "unique-events", "summed-events"])
        let unique = events.compactMap { $0.body["unique_events"]?.arrayValue?.first }
        let guids = Set(unique.compactMap { $0["attributes"]?["guid"]?.stringValue })
        #expect(guids.count == 1, "one installation: \(guids)")
        #expect(Set(unique.compactMap { $0["attributes"]?["application.session"]?.stringValue }).count == 2, "one event a session")
        #expect(unique.allSatisfy { $0["unique"]?.arrayValue?.first?.stringValue == "guid" && $0["timestamp"]?.intValue != nil })
        let summed = events.compactMap { $0.body["summed_events"]?.arrayValue?.first }
        #expect(summed.count == 2 && summed.allSatisfy { $0["metric_group"]?.stringValue == "Application Launches" })
        #expect(events.allSatisfy { $0.body["appversion"]?.stringValue == "2.3.0" && $0.body["application"]?.stringValue != nil })
        let reports = receiver.received.filter { $0.report["attributes"]?["error.message"]?.stringValue == "with metrics" }
        #expect(reports.count == 2 && reports.allSatisfy { $0.report["attributes"]?["guid"]?.stringValue == guids.first })
        let bad = fixture.folder.appendingPathComponent("bad-metrics.json")
        try #"{"metrics": {"enabled": true, "url": "ftp://x"}}"#.write(to: bad, atomically: true, encoding: .utf8)
        let refused = try fixture.run(["report", "error", "--config", bad.path])
        #expect(refused.status == 2 && refused.stderr.contains("metrics.url"), "\(refused.stderr)")
    }

    @Test("B-1: breadcrumbs reach the server as Backtrace's bt-breadcrumbs-0 attachment, with breadcrumbs.lastId")
    func breadcrumbsOnTheWire() throws {
        let receiver = try LocalReceiver(folder: fixture.folder.appendingPathComponent("got"))
        defer { receiver.stop() }
        let config = try fixture.configuration(url: receiver.url)
        _ = try crumbs(["kill", "5"], config: config)
        let launched = try fixture.run(["launch", "--config", config])
        #expect(launched.status == 0, "\(launched.stderr.suffix(2_000))")
        let got = try #require(receiver.received.last)
        let part = try #require(got.attachments["bt-breadcrumbs-0"])
        let entries = try #require(try JSONValue.parse(part).arrayValue)
        let app = entries.filter { $0["attributes"]?["category"]?.stringValue == "app" }
        #expect(app.compactMap { $0["message"]?.stringValue } == (1...5).map { "step \($0)" })
        #expect(app.allSatisfy { $0["type"]?.stringValue == "manual" && $0["id"]?.intValue != nil && ($0["timestamp"]?.intValue ?? 0) > 1_700_000_000_000 })
        #expect(got.report["attributes"]?["breadcrumbs.lastId"]?.stringValue == app.last?["id"]?.intValue.map(String.init))
    }

    @Test("B-1: `run` turns the watched program's last standard-error lines into breadcrumbs")
    func runStandardError() throws {
        let script = fixture.folder.appendingPathComponent("noisy.sh")
        try "for i in 1 2 3 4 5; do echo \"line $i\" >&2; done\nkill -KILL $$\n".write(to: script, atomically: true, encoding: .utf8)
        // Run by /bin/sh, never executed itself: a child another test spawns while the script is
        // written inherits its descriptor until its own exec, and exec would fail with ETXTBSY.
        func run(_ words: [String]) throws -> ChildProcess.Result {
            try ChildProcess.reporthost(["run", "--repository", fixture.repository] + words + ["--", "/bin/sh", script.path], directory: fixture.folder)
        }
        let ran = try run(["--stderr-breadcrumbs", "3"])
        #expect(ran.status == 128 + SIGKILL)
        #expect(ran.stderr.contains("line 5"), "standard error still reaches the terminal")
        let document = try latest()
        #expect(messages(document, category: "stderr") == ["line 3", "line 4", "line 5"])
        #expect(document["attributes"]?["reporthost.stderr"] == nil)
        let bad = try run(["--stderr-breadcrumbs", "lots"])
        #expect(bad.status == 2 && bad.stderr.contains("--stderr-breadcrumbs 'lots'"))
    }
}
