import Foundation
import Conformance
import Host
import HostTestSupport
import Testing

/// `reporthost check` (SPEC I-8): every check is shown failing on a fixture that breaks its
/// rule, a crashing and a hanging plugin are reported without stopping the run, and the
/// samples pass.
@Suite struct CheckCommandTests {
    /// Runs `reporthost check` off the cooperative pool: these runs take seconds, and the
    /// pool's few threads must stay free for tests of `async` handlers.
    func check(_ library: String, _ extra: [String] = []) async throws -> (status: Int32, results: [String: CheckResult]) {
        let result = try await offPool { try ChildProcess.reporthost(["check", library, "--json"] + extra) }
        let json = try JSONValue.parse(result.stdout)
        #expect(json["plugin"]?.stringValue == library)
        let results = (json["results"]?.arrayValue ?? []).compactMap(CheckResult.init(json:))
        return (result.status, Dictionary(uniqueKeysWithValues: results.map { ($0.check, $0) }))
    }

    /// The checks that did not pass or warn or skip.
    func failing(_ results: [String: CheckResult]) -> Set<String> {
        Set(results.values.filter { $0.status.fails }.map(\.check))
    }

    func plugin(_ name: String, before: String = "NULL", extra: String) throws -> String {
        try Fixtures.plugin("check-\(name)", source: fixtureHandler(name: name, before: before, extra: extra)).path
    }

    @Test("I-8: --list prints the catalogue, one check per line, name first")
    func list() async throws {
        let result = try await offPool { try ChildProcess.reporthost(["check", "--list"]) }
        #expect(result.status == 0)
        let names = result.stdout.split(separator: "\n").map { String($0.split(separator: " ").first ?? "") }
        #expect(names == Catalogue.checks.map(\.name))
        #expect(names.allSatisfy { $0.range(of: "^[a-z0-9]+(-[a-z0-9]+)*$", options: .regularExpression) != nil })
    }

    @Test("I-8: the samples pass every applicable check (warnings allowed)")
    func samplesPass() async throws {
        for (name, slot) in [("scrub-pii", "handler"), ("wrapper-sim", "wrapper"), ("account-context", "handler"), ("async-example", "handler")] {
            let path = Products.directory.appendingPathComponent("lib\(name).so").path
            let (status, results) = try await check(path, ["--slot", slot])
            #expect(status == 0, "\(name): \(results.values.filter { $0.status.fails })")
            #expect(results.count == Catalogue.checks.filter { $0.slots.contains(PluginSlot(rawValue: slot)!) }.count)
        }
    }

    /// The start of a fixture callback that may hang on some input (a hang past the limit is how
    /// a fuzz check sees a plugin fail).
    static let hang = "#include <unistd.h>\n#include <string.h>\nstatic void on_before(void *c, rh_report *r, bool t, rh_completion d) { (void)c; (void)t; "

    /// Fixtures that each break one rule, and the checks that must report them.
    static func brokenCase(_ name: String) throws -> (path: String, expected: Set<String>) {
        func plugin(_ name: String, before: String = "NULL", extra: String) throws -> String {
            try Fixtures.plugin("check-\(name)", source: fixtureHandler(name: name, before: before, extra: extra)).path
        }
        let cases: [(String, String, Set<String>)] = [
            ("twice", try plugin("twice", before: "on_before", extra: "static void on_before(void *c, rh_report *r, bool t, rh_completion d) { (void)c; (void)r; (void)t; d(); d(); }"),
             ["completes-once-running-app", "completes-once-recovered", "completes-once-terminating"]),
            ("never", try plugin("never", before: "on_before", extra: "static void on_before(void *c, rh_report *r, bool t, rh_completion d) { (void)c; (void)r; (void)d; if (t) return; }"),
             ["completes-once-running-app"]),
            ("writes-after", try plugin("writes-after", before: "on_before", extra: "static void on_before(void *c, rh_report *r, bool t, rh_completion d) { (void)c; (void)t; d(); host->set_summary(r, \"late\"); }"),
             ["no-writes-after-completion", "terminating-work-before-return"]),
            // Completes at once, returns after 1.5 s: within the 2 s callback limit, past the 1 s
            // recovered one.
            ("slow-return", try plugin("slow-return", before: "on_before", extra: "#include <unistd.h>\nstatic void on_before(void *c, rh_report *r, bool t, rh_completion d) { (void)c; (void)r; (void)t; d(); usleep(1500 * 1000); }"),
             ["recovered-returns-in-time"]),
            ("over-budget", try plugin("over-budget", before: "on_before", extra: "static void on_before(void *c, rh_report *r, bool t, rh_completion d) { (void)c; (void)t; for (int i = 0; i < 4; i++) host->add_attachment(r, \"a\", \"a.txt\", \"x\", 1); d(); }"),
             ["attachment-budget"]),
            ("too-long", try plugin("too-long", before: "on_before", extra: """
                #include <string.h>
                static char big[70001];
                static void on_before(void *c, rh_report *r, bool t, rh_completion d) {
                    (void)c; (void)t; memset(big, 'x', sizeof big - 1); host->set_summary(r, big); d();
                }
                """), ["content-limits"]),
            ("appends", try plugin("appends", before: "on_before", extra: "static void on_before(void *c, rh_report *r, bool t, rh_completion d) { (void)c; (void)t; host->add_label(r, \"seen\"); d(); }"),
             ["idempotent"]),
            // Returns without completing and calls that completion from the next callback.
            ("late", try Fixtures.plugin("check-late", source: fixtureHandler(
                name: "late", before: "on_before", after: "on_after",
                extra: """
                    static rh_completion saved;
                    static void on_before(void *c, rh_report *r, bool t, rh_completion d) { (void)c; (void)r; (void)t; saved = d; }
                    static void on_after(void *c, rh_report *r, bool t, rh_completion d) { (void)c; (void)r; (void)t; if (saved) saved(); saved = 0; d(); }
                    """)).path,
             ["completes-once-running-app", "late-completion"]),
            // Keeps the handle of one report and writes through it during the next.
            ("stale", try plugin("stale", before: "on_before", extra: """
                static rh_report *kept;
                static void on_before(void *c, rh_report *r, bool t, rh_completion d) {
                    (void)c; (void)t; if (kept) host->set_summary(kept, "stale"); kept = r; d();
                }
                """), ["no-handle-use-after-callback"]),
            ("bad-utf8", try plugin("bad-utf8", before: "on_before", extra: "static void on_before(void *c, rh_report *r, bool t, rh_completion d) { (void)c; (void)t; host->set_summary(r, \"\\xff\\xfe\"); d(); }"),
             ["valid-utf8"]),
            ("bad-name", try Fixtures.plugin("check-bad-name", source: fixtureHandler(name: "bad\\nname")).path, ["descriptor-sanity"]),
            // Not reentrant: a second callback while one runs hangs.
            ("non-reentrant", try plugin("non-reentrant", before: "on_before", extra: """
                #include <unistd.h>
                static int busy;
                static void on_before(void *c, rh_report *r, bool t, rh_completion d) {
                    (void)c; (void)r; (void)t;
                    if (__atomic_fetch_add(&busy, 1, __ATOMIC_SEQ_CST) > 0) for (;;) pause();
                    usleep(300 * 1000);
                    __atomic_fetch_sub(&busy, 1, __ATOMIC_SEQ_CST);
                    d();
                }
                """), ["concurrent-reports"]),
            ("needs-summary", try plugin("needs-summary", before: "on_before", extra: "\(Self.hang)if (host->summary(r, 0, 0, 0) == RH_ERR_NOT_FOUND) for (;;) pause(); d(); }"),
             ["fuzz-empty", "fuzz-seeded"]),
            ("short-buffer", try plugin("short-buffer", before: "on_before", extra: "\(Self.hang)size_t n = 0; host->summary(r, 0, 0, &n); if (n > 100000) for (;;) pause(); d(); }"),
             ["fuzz-large-strings"]),
            ("few-attributes", try plugin("few-attributes", before: "on_before", extra: """
                #include <unistd.h>
                static bool count(void *ctx, const char *k, const char *v) { (void)k; (void)v; (*(int *)ctx)++; return true; }
                static void on_before(void *c, rh_report *r, bool t, rh_completion d) {
                    (void)c; (void)t; int n = 0; host->each_attribute(r, count, &n); if (n > 1000) for (;;) pause(); d();
                }
                """), ["fuzz-many-attributes"]),
            ("ascii-only", try plugin("ascii-only", before: "on_before", extra: "\(Self.hang)char b[4096] = {0}; size_t n = 0; host->summary(r, b, sizeof b, &n); for (size_t i = 0; b[i]; i++) if ((unsigned char)b[i] >= 0x80) for (;;) pause(); d(); }"),
             ["fuzz-non-ascii", "fuzz-seeded"]),
            ("no-at-sign", try plugin("no-at-sign", before: "on_before", extra: "\(Self.hang)char b[4096] = {0}; size_t n = 0; host->summary(r, b, sizeof b, &n); if (strchr(b, '@')) for (;;) pause(); d(); }"),
             ["fuzz-seeded"]),
            // Broken after destroy: a plugin that cannot be entered again.
            ("no-reload", try Fixtures.plugin("check-no-reload", source: fixtureHandler(
                name: "no-reload", before: "on_before", destroy: "on_destroy",
                extra: """
                    #include <unistd.h>
                    static int destroyed;
                    static void on_destroy(void *c) { (void)c; destroyed = 1; }
                    static void on_before(void *c, rh_report *r, bool t, rh_completion d) { (void)c; (void)r; (void)t; if (destroyed) for (;;) pause(); d(); }
                    """)).path, ["destroy-then-reload"]),
        ]
        let found = try #require(cases.first { $0.0 == name })
        return (found.1, found.2)
    }

    @Test("I-8: each broken rule is reported by exactly the check for it",
          arguments: ["twice", "never", "writes-after", "slow-return", "over-budget", "too-long", "appends", "late", "stale", "bad-utf8", "bad-name",
                      "non-reentrant", "needs-summary", "short-buffer", "few-attributes", "ascii-only", "no-at-sign", "no-reload"])
    func brokenRule(_ name: String) async throws {
        let (path, expected) = try Self.brokenCase(name)
        let (status, results) = try await check(path)
        #expect(status == 1, "\(name)")
        #expect(failing(results) == expected, "\(name): \(results.values.filter { $0.status.fails }.map { "\($0.check): \($0.details)" })")
    }

    static let goodDelegate = """
        \(fixturePrelude)
        static void fields(void *c, rh_report *r) { (void)c; host->set_summary(r, "from the delegate"); }
        static void decide(void *c, rh_report *r, rh_attachments_decision d) {
            (void)c; (void)r; rh_attachment a = {"d.txt", "d.txt", "d", 1}; d(&a, 1);
        }
        static rh_delegate delegate = {RH_ABI_VERSION_MAJOR, RH_ABI_VERSION_MINOR, sizeof(rh_delegate), fields, fields, NULL, decide};
        static rh_handler handler = {RH_ABI_VERSION_MAJOR, RH_ABI_VERSION_MINOR, sizeof(rh_handler), "delegate-fixture", "1.0", NULL, NULL, NULL, NULL, &delegate};
        const rh_handler *rh_plugin_entry(const rh_host_api *h) { host = h; return &handler; }
        """

    @Test("I-8: delegate checks pass for a well-behaved delegate and catch a second decision")
    func delegateChecks() async throws {
        let good = try Fixtures.plugin("check-delegate-good", source: Self.goodDelegate).path
        let (goodStatus, goodResults) = try await check(good, ["--slot", "delegate"])
        #expect(goodStatus == 0, "\(goodResults.values.filter { $0.status.fails })")
        #expect(goodResults["delegate-decision"]?.status == .passed)
        let twice = try Fixtures.plugin(
            "check-delegate-twice", source: Self.goodDelegate.replacingOccurrences(of: "d(&a, 1);", with: "d(&a, 1); d(0, 0);")).path
        let (status, results) = try await check(twice, ["--slot", "delegate"])
        #expect(status == 1)
        #expect(failing(results) == ["delegate-decision"], "\(results.values.filter { $0.status.fails })")
        let overBudget = try Fixtures.plugin(
            "check-delegate-budget",
            source: Self.goodDelegate.replacingOccurrences(
                of: "fields, fields, NULL, decide}",
                with: "fields, fields, attach, decide}"
            ).replacingOccurrences(
                of: "static rh_delegate delegate",
                with: "static void attach(void *c, rh_report *r) { (void)c; for (int i = 0; i < 4; i++) host->add_attachment(r, \"a\", \"a\", \"x\", 1); }\nstatic rh_delegate delegate")
        ).path
        let (_, budgetResults) = try await check(overBudget, ["--slot", "delegate"])
        #expect(failing(budgetResults) == ["delegate-attachments"], "\(budgetResults.values.filter { $0.status.fails })")
        let slow = try Fixtures.plugin(
            "check-delegate-slow",
            source: Self.goodDelegate.replacingOccurrences(of: "static void fields(void *c, rh_report *r) {", with: "#include <unistd.h>\nstatic void fields(void *c, rh_report *r) { usleep(2500 * 1000);"))
            .path
        let (_, slowResults) = try await check(slow, ["--slot", "delegate", "--include", "^delegate-fields$"])
        #expect(slowResults["delegate-fields"]?.status == .failed)
    }

    @Test("I-8: version negotiation: a plugin declaring another ABI major fails abi-version")
    func abiVersion() async throws {
        let path = try Fixtures.plugin(
            "check-major",
            source: """
                #include <reporthost/plugin.h>
                static rh_handler handler = {2, 0, sizeof(rh_handler), "major", NULL, NULL, NULL, NULL, NULL, NULL};
                const rh_handler *rh_plugin_entry(const rh_host_api *h) { (void)h; return &handler; }
                """).path
        let (status, results) = try await check(path, ["--include", "^(abi-version|loads)$"])
        #expect(status == 1)
        #expect(results["abi-version"]?.status == .failed)
        #expect(results["abi-version"]?.details == "plugin ABI 2.0, host 1.0")
        #expect(results["loads"]?.status == .failed)
    }

    static let cargoAvailable = (try? ChildProcess.run("/usr/bin/env", ["cargo", "--version"]).status) == 0

    @Test("I-8: the Rust sample passes every applicable check", .enabled(if: cargoAvailable, "cargo is not installed on this machine"))
    func rustSample() async throws {
        let build = try await offPool { try ChildProcess.run(
            Products.packageRoot.appendingPathComponent("Plugins/rust-example/build.sh").path, [],
            environment: ["CARGO_TARGET_DIR": makeTemporaryDirectory("rust-check").path]) }
        #expect(build.status == 0, "\(build.stderr)")
        let (status, results) = try await check(build.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(status == 0, "\(results.values.filter { $0.status.fails })")
    }

    @Test("I-8: warnings do not fail: extra exported symbols, a slow entry")
    func warnings() async throws {
        let path = try Fixtures.plugin(
            "check-slow-entry",
            source: """
                #include <reporthost/plugin.h>
                #include <unistd.h>
                int rh_fixture_extra_symbol(void) { return 1; }
                static rh_handler handler = {RH_ABI_VERSION_MAJOR, RH_ABI_VERSION_MINOR, sizeof(rh_handler), "slow-entry", NULL, NULL, NULL, NULL, NULL, NULL};
                const rh_handler *rh_plugin_entry(const rh_host_api *h) { (void)h; usleep(150 * 1000); return &handler; }
                """).path
        let (status, results) = try await check(path)
        #expect(status == 0)
        #expect(results["exports-only-entry"]?.status == .warning)
        #expect(results["entry-time"]?.status == .warning)
    }

    @Test("I-8: a plugin that refuses to load fails the load check; one that crashes or hangs is reported and the run goes on")
    func isolation() async throws {
        let refuses = try Fixtures.plugin(
            "check-refuses", source: "#include <reporthost/plugin.h>\nconst rh_handler *rh_plugin_entry(const rh_host_api *h) { (void)h; return 0; }\n").path
        let (refusedStatus, refused) = try await check(refuses, ["--include", "^loads$"])
        #expect(refusedStatus == 1)
        #expect(refused["loads"]?.status == .failed)
        #expect(refused["loads"]?.details.contains("rh_plugin_entry returned NULL") == true)

        let crashes = try plugin(
            "crashes", before: "on_before",
            extra: "static void on_before(void *c, rh_report *r, bool t, rh_completion d) { (void)c; (void)r; (void)t; (void)d; volatile int *p = 0; *p = 1; }")
        let (crashStatus, crashed) = try await check(crashes)
        #expect(crashStatus == 1)
        #expect(crashed["completes-once-running-app"]?.status == .crashed)
        #expect(crashed["completes-once-running-app"]?.details.contains("SIGSEGV") == true)
        #expect(crashed["loads"]?.status == .passed)  // the checks around it still ran
        #expect(crashed.count == Catalogue.checks.filter { $0.slots.contains(.handler) }.count)

        let hangs = try Fixtures.plugin(
            "check-hangs",
            source: "#include <reporthost/plugin.h>\n#include <unistd.h>\nconst rh_handler *rh_plugin_entry(const rh_host_api *h) { (void)h; for (;;) pause(); }\n").path
        let (hangStatus, hung) = try await check(hangs, ["--include", "^(loads|exports-only-entry)$", "--timeout-ms", "2000"])
        #expect(hangStatus == 1)
        #expect(hung["loads"]?.status == .timedOut)
        #expect(hung["exports-only-entry"]?.status == .passed)
    }
}
