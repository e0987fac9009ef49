import Conformance
import Foundation
import Host
import HostSupport
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
        #expect(names == (Catalogue.checks + Catalogue.scrubChecks).map(\.name) + ["fuzz"])
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
            // Completes at once; on a crash report (the recovered checks) returns after 2.5 s, far
            // past the 1 s recovered limit. Every other report returns at once, so no other
            // limit is near: no margin for a loaded machine to eat.
            ("slow-return", try plugin("slow-return", before: "on_before", extra: "#include <unistd.h>\nstatic void on_before(void *c, rh_report *r, bool t, rh_completion d) { (void)c; (void)t; rh_trigger trigger = host->report_trigger(r); d(); if (trigger == RH_TRIGGER_CRASH) usleep(2500 * 1000); }"),
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
            // The first C walkthrough's plugin: assigns its labels, wiping the wrapper's and the user's.
            ("assigns-labels", try plugin("assigns-labels", before: "on_before", extra: """
                static void on_before(void *c, rh_report *r, bool t, rh_completion d) {
                    (void)c; (void)t; const char *labels[] = {"triaged"}; host->set_labels(r, labels, 1); d();
                }
                """), ["keeps-others-changes"]),
            ("clears-attributes", try plugin("clears-attributes", before: "on_before", extra: "static void on_before(void *c, rh_report *r, bool t, rh_completion d) { (void)c; (void)t; host->clear_attributes(r); host->set_attribute(r, \"team\", \"a\"); d(); }"),
             ["keeps-others-changes"]),
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
                      "non-reentrant", "needs-summary", "short-buffer", "few-attributes", "ascii-only", "no-at-sign", "no-reload",
                      "assigns-labels", "clears-attributes"])
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
        #expect(results["abi-version"]?.details == "plugin ABI 2.0, host 1.1")
        #expect(results["loads"]?.status == .failed)
    }

    static let cargoAvailable = (try? ChildProcess.run("/usr/bin/env", ["cargo", "--version"]).status) == 0

    /// Builds rust-example with its own script (offline, into a target folder of its own); its path.
    func buildRustExample() async throws -> String {
        let build = try await offPool { try ChildProcess.run(
            Products.packageRoot.appendingPathComponent("Plugins/rust-example/build.sh").path, [],
            environment: ["CARGO_TARGET_DIR": makeTemporaryDirectory("rust-check").path]) }
        #expect(build.status == 0, "\(build.stderr)")
        return build.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("I-8: the Rust sample passes every applicable check", .enabled(if: cargoAvailable, "cargo is not installed on this machine"))
    func rustSample() async throws {
        let (status, results) = try await check(try await buildRustExample())
        #expect(status == 0, "\(results.values.filter { $0.status.fails })")
    }

    @Test("T-3: the Rust crate reads its slot's options (rust-example passes them on as rust.options)", .enabled(if: cargoAvailable, "cargo is not installed on this machine"))
    func rustOptions() async throws {
        let plugin = try await buildRustExample()
        let folder = makeTemporaryDirectory("rust-options-run")
        let configuration = folder.appendingPathComponent("c.json")
        try #"{"plugins": {"handler": "\#(plugin)", "options": {"handler": {"team": "payments"}}}}"#.write(to: configuration, atomically: true, encoding: .utf8)
        let result = try await offPool {
            try ChildProcess.reporthost(["report", "error", "--config", configuration.path, "--print", "--repository", folder.appendingPathComponent("r").path])
        }
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try JSONValue.parse(result.stdout)["attributes"]?["rust.options"]?.stringValue == #"{"team":"payments"}"#)
    }

    @Test("T-3: check --options hands the plugin under test its options; not an object is a usage error")
    func checkOptions() async throws {
        let licensed = try Fixtures.plugin(
            "check-licensed",
            source: """
                #include <reporthost/plugin.h>
                #include <string.h>
                static void before(void *c, rh_report *r, bool t, rh_completion d) { (void)c; (void)r; (void)t; d(); }
                static rh_handler handler = {RH_ABI_VERSION_MAJOR, RH_ABI_VERSION_MINOR, sizeof(rh_handler), "licensed", NULL, NULL, before, NULL, NULL, NULL};
                const rh_handler *rh_plugin_entry(const rh_host_api *h) {
                    char options[256]; size_t length = 0;
                    if (h->options_json(options, sizeof options, &length) != RH_OK || !strstr(options, "licence")) return NULL;
                    return &handler;
                }
                """).path
        let (without, _) = try await check(licensed, ["--include", "^loads$"])
        #expect(without == 1)
        let (with, results) = try await check(licensed, ["--include", "^loads$", "--options", #"{"licence": "k-123"}"#])
        #expect(with == 0, "\(results)")
        let bad = try await offPool { try ChildProcess.reporthost(["check", licensed, "--options", "[1]"]) }
        #expect(bad.status == 2 && bad.stderr.contains("--options '[1]': expected a JSON object"), "\(bad.stderr)")
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
        #expect(results["entry-time"]?.status == .warning, "\(results["entry-time"]?.details ?? "")")
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

    // MARK: The author's kit: scrubbing, JUnit, fuzzing

    /// A "scrubber" that redacts the summary and nothing else; one that blanks the description.
    static let summaryOnly = """
        static void on_before(void *c, rh_report *r, bool t, rh_completion d) { (void)c; (void)t; host->set_summary(r, "[redacted]"); d(); }
        """
    static let blanksDescription = """
        static void on_before(void *c, rh_report *r, bool t, rh_completion d) { (void)c; (void)t; host->set_description(r, "[redacted]"); d(); }
        """

    @Test("I-8 --scrub: scrub-pii passes every scrub- check; a plugin that scrubs only the summary fails the others, naming what survived and the seed; blanking a field warns about its decoys")
    func scrubChecks() async throws {
        let scrubPII = Products.directory.appendingPathComponent("libscrub-pii.so").path
        let (status, results) = try await check(scrubPII, ["--scrub", "--include", "^scrub-", "--seed", "7"])
        #expect(status == 0)
        #expect(Set(results.keys) == Set(Catalogue.scrubChecks.map(\.name) + Catalogue.scrubJudgements))
        #expect(results.values.allSatisfy { $0.status == .passed }, "\(results.values.map { "\($0.check): \($0.details)" })")

        let partial = try plugin("summary-only", before: "on_before", extra: Self.summaryOnly)
        let (partialStatus, partialResults) = try await check(partial, ["--scrub", "--include", "^scrub-", "--seed", "7"])
        #expect(partialStatus == 1)
        #expect(failing(partialResults) == [
            "scrub-description", "scrub-attributes", "scrub-labels", "scrub-breadcrumbs", "scrub-attachments", "scrub-attribute-keys", "scrub-recall",
        ])
        let data = PersonalData(seed: 7)
        let description = try #require(partialResults["scrub-description"]?.details)
        #expect(description.contains("--seed 7"))
        // Every kind is named with the value that survived.
        #expect(data.items.allSatisfy { description.contains("\($0.kind) \"\($0.secret)\"") }, "\(description)")
        // Redacting the whole summary scrubs it, and destroys its decoys: a warning, not a failure.
        #expect(partialResults["scrub-summary"]?.status == .warning)
        #expect(partialResults["scrub-summary"]?.details.contains("decoys") == true)

        let blank = try plugin("blanks-description", before: "on_before", extra: Self.blanksDescription)
        let (_, blankResults) = try await check(blank, ["--scrub", "--include", "^scrub-description$"])
        #expect(blankResults["scrub-description"]?.status == .warning)
    }

    @Test("I-8 --scrub: the generator is deterministic from the seed, its card numbers pass Luhn, and each seed plants every kind")
    func personalData() {
        #expect(PersonalData(seed: 3).items == PersonalData(seed: 3).items)
        #expect(PersonalData(seed: 3).items != PersonalData(seed: 4).items)
        let kinds = ["email", "card", "ipv4", "ipv6", "phone", "secret", "bearer", "aws_key", "jwt"] + OutsideKind.kinds
        for seed in UInt64(0)..<200 {
            let data = PersonalData(seed: seed)
            #expect(data.items.map(\.kind) == kinds)
            let card = data.items[1].text.filter(\.isNumber)
            let sum = card.reversed().enumerated().reduce(0) { total, pair in
                var digit = Int(String(pair.element))!
                if pair.offset % 2 == 1 { digit = digit * 2 > 9 ? digit * 2 - 9 : digit * 2 }
                return total + digit
            }
            #expect(sum % 10 == 0 && (15...16).contains(card.count), "seed \(seed): \(card)")
            #expect(data.text.contains(data.decoys[2].text))
        }
    }
}
