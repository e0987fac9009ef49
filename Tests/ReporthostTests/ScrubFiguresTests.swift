import Conformance
import Foundation
import Host
import HostSupport
import HostTestSupport
import Testing

/// SPEC T-4: `check --scrub`'s figures (recall per kind and field, false positives per decoy),
/// its judgements, `--corpus`, and scrub-pii's options, through the real `reporthost`.
@Suite struct ScrubFiguresTests {
    static let scrubPII = Products.directory.appendingPathComponent("libscrub-pii.so").path
    let folder = makeTemporaryDirectory("reporthost-scrub-figures")

    /// `check --scrub --json` on the scrubbing checks only: exit status and results by name.
    func check(_ plugin: String, _ extra: [String] = []) async throws -> (status: Int32, results: [String: CheckResult], stderr: String) {
        let result = try await offPool { try ChildProcess.reporthost(["check", plugin, "--scrub", "--include", "^scrub-", "--json"] + extra) }
        let json = (try? JSONValue.parse(result.stdout)) ?? .object([])
        let results = (json["results"]?.arrayValue ?? []).compactMap(CheckResult.init(json:))
        return (result.status, Dictionary(uniqueKeysWithValues: results.map { ($0.check, $0) }), result.stderr)
    }

    /// A C handler that runs `body` over the summary, description, attribute and label texts.
    func scrubber(_ name: String, _ transform: String) throws -> String {
        try Fixtures.plugin(name, source: fixtureHandler(name: name, before: "on_before", extra: """
            #include <ctype.h>
            static void transform(char *s) { \(transform) }
            static void fix(rh_report *r, rh_status (*get)(rh_report *, char *, size_t, size_t *), rh_status (*set)(rh_report *, const char *)) {
                static char text[70000]; size_t n = 0;
                if (get(r, text, sizeof text, &n) == RH_OK) { transform(text); set(r, text); }
            }
            static bool attribute(void *c, const char *k, const char *v) {
                static char text[70000]; snprintf(text, sizeof text, "%s", v); transform(text); host->set_attribute(c, k, text); return true;
            }
            static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                (void)c; (void)t;
                fix(r, host->summary, host->set_summary);
                fix(r, host->description, host->set_description);
                host->each_attribute(r, attribute, r);
                done();
            }
            """)).path
    }

    @Test("T-4: --json carries scrub-recall and scrub-false-positive-rate with recall per kind and field and decoys changed, with counts")
    func figures() async throws {
        let (status, results, _) = try await check(Self.scrubPII)
        #expect(status == 0)
        let recall = try #require(results["scrub-recall"])
        #expect(recall.status == .passed)
        let figures = try #require(recall.figures)
        // 20 generated documents in each field a plugin can change; secret-named keys' values in
        // the attribute-keys check only.
        let planted = 20 * (ScrubField.allCases.count - 1)
        for kind in ScrubCorpus.judgedKinds where kind != ScrubCorpus.secretKeyKind {
            #expect(figures["kinds"]?[kind]?["planted"]?.intValue == planted, "\(kind)")
            #expect(figures["kinds"]?[kind]?["recall"]?.doubleValue == 1, "\(kind)")
            #expect(figures["fields"]?["labels"]?["kinds"]?[kind]?["removed"]?.intValue == 20, "\(kind)")
        }
        #expect(figures["kinds"]?[ScrubCorpus.secretKeyKind]?["planted"]?.intValue == 20 * SecretKeys.secret.count)
        #expect(figures["kinds"]?[ScrubCorpus.secretKeyKind]?["recall"]?.doubleValue == 1)
        let decoys = try #require(figures["decoys"]?.objectValue)
        #expect(decoys.count >= 14)
        #expect(decoys.allSatisfy { $0.1["changed"]?.intValue == 0 }, "\(decoys)")
        let total = decoys.reduce(0) { $0 + ($1.1["decoys"]?.intValue ?? 0) }
        #expect(total == (decoys.count - 1) * planted + 20 * SecretKeys.innocent.count)
        #expect(results["scrub-false-positive-rate"]?.status == .passed)
        #expect(results["scrub-false-positive-rate"]?.details == "false positives 0.000 (0/\(total))")
    }

    @Test("T-4, T-5: a scrubber that only handles e-mail fails --min-recall 0.9, naming every kind it leaks (the outside detectors' too)")
    func emailOnlyFails() async throws {
        let emailOnly = try scrubber("email-only", """
            for (char *at; (at = strchr(s, '@')) != NULL;) {
                char *start = at, *end = at;
                while (start > s && (isalnum((unsigned char)start[-1]) || strchr("._+-", start[-1]))) start--;
                while (*++end && (isalnum((unsigned char)*end) || strchr(".-", *end))) {}
                memmove(start + 7, end, strlen(end) + 1); memcpy(start, "[email]", 7);
            }
            """)
        let (status, results, _) = try await check(emailOnly, ["--include", "^scrub-(summary|recall|false-positive-rate)$", "--min-recall", "0.9"])
        #expect(status == 1)
        let recall = try #require(results["scrub-recall"])
        #expect(recall.status == .failed)
        #expect(recall.details.hasPrefix("below 0.9: card, ipv4, ipv6, phone, jwt, aws_key, bearer, secret, private_key, "), "\(recall.details)")
        #expect(recall.figures?["kinds"]?["email"]?["recall"]?.doubleValue == 1)
        // Every kind whose value holds no `@` (which the e-mail rule takes with it) is named.
        #expect(ScrubCorpus.judgedKinds.count >= 40 + 1, "at least 40 kinds of values, and secret-named keys")
        let below = recall.details.prefix { $0 != ";" }
        let leaked = PersonalData(seed: 1).items.filter { $0.kind != "email" && !$0.text.contains("@") }
        #expect(leaked.count >= 50)
        for item in leaked { #expect(below.contains(" \(item.kind),") || below.hasSuffix(" \(item.kind)"), "\(item.kind): \(below)") }
    }

    @Test("T-4: a scrubber that masks every digit fails --max-false-positive-rate 0.01")
    func digitMaskerFails() async throws {
        let masker = try scrubber("digit-masker", "for (; *s; s++) if (isdigit((unsigned char)*s)) *s = '#';")
        let (status, results, _) = try await check(masker, ["--include", "^scrub-summary$", "--min-recall", "0", "--max-false-positive-rate", "0.01"])
        #expect(status == 1)
        let falsePositives = try #require(results["scrub-false-positive-rate"])
        #expect(falsePositives.status == .failed)
        #expect(falsePositives.details.contains("(at most 0.01)") && falsePositives.details.contains("version"), "\(falsePositives.details)")
        #expect(results["scrub-summary"]?.status == .failed)
    }

    @Test("T-4 --corpus: documents from a file are scored in each field; a kind check does not know is reported under its own name, not judged")
    func corpusFile() async throws {
        let corpus = folder.appendingPathComponent("corpus.jsonl")
        let lines = [
            #"{"text": "mail ana@example.org or call Ana Lima, build 2.3.1", "spans": [{"start": 5, "end": 20, "kind": "email"}, {"start": 29, "end": 37, "kind": "name"}, {"start": 45, "end": 50, "kind": "none"}]}"#,
            "",
            #"{"text": "card 4111 1111 1111 1111 ok", "spans": [{"start": 5, "end": 24, "kind": "card"}]}"#,
        ]
        try lines.joined(separator: "\n").write(to: corpus, atomically: true, encoding: .utf8)
        let (status, results, _) = try await check(Self.scrubPII, ["--corpus", corpus.path, "--min-recall", "0.99"])
        #expect(status == 0)
        let figures = try #require(results["scrub-recall"]?.figures)
        #expect(figures["documents"]?.intValue == 2)
        let fields = ScrubField.allCases.count - 1  // each document once in each field (attribute keys have their own)
        #expect(figures["kinds"]?["email"]?["planted"]?.intValue == fields)
        #expect(figures["kinds"]?["card"]?["removed"]?.intValue == fields)
        #expect(figures["kinds"]?["name"]?["removed"]?.intValue == 0)
        #expect(results["scrub-recall"]?.details.contains("not judged: name 0.000 (0/\(fields))") == true, "\(results["scrub-recall"]?.details ?? "")")
        #expect(figures["decoys"]?["none"]?["decoys"]?.intValue == fields)
    }

    @Test("T-4 --corpus: a line that is not a document is a usage error naming the line, before any check runs")
    func corpusErrors() async throws {
        for (line, says) in [
            (#"{"text": "abc", "spans": [{"start": 2, "end": 9, "kind": "email"}]}"#, ":2: span 1 (2..<9) is not inside the text's 3 bytes"),
            (#"{"text": "é", "spans": [{"start": 1, "end": 2, "kind": "email"}]}"#, ":2: span 1 (1..<2) cuts a UTF-8 character"),
            (#"{"spans": []}"#, #":2: no "text" string"#), ("not json", ":2: not JSON"),
        ] {
            let corpus = folder.appendingPathComponent("bad-\(UUID().uuidString).jsonl")
            try (#"{"text": "fine", "spans": []}"# + "\n" + line + "\n").write(to: corpus, atomically: true, encoding: .utf8)
            let result = try await offPool { try ChildProcess.reporthost(["check", Self.scrubPII, "--scrub", "--corpus", corpus.path]) }
            #expect(result.status == 2)
            #expect(result.stderr.contains(corpus.path + says), "\(result.stderr)")
        }
        let stray = try await offPool { try ChildProcess.reporthost(["check", Self.scrubPII, "--min-recall", "0.9"]) }
        #expect(stray.status == 2 && stray.stderr.contains("--min-recall needs --scrub"))
        let range = try await offPool { try ChildProcess.reporthost(["check", Self.scrubPII, "--scrub", "--min-recall", "2"]) }
        #expect(range.status == 2 && range.stderr.contains("--min-recall '2' is not a number from 0 to 1"))
    }

    @Test("T-4: the judgements are testcases of the JUnit file; a failed one is a failure")
    func junit() async throws {
        let file = folder.appendingPathComponent("scrub.xml")
        let masker = try scrubber("digit-masker-junit", "for (; *s; s++) if (isdigit((unsigned char)*s)) *s = '#';")
        _ = try await check(masker, ["--include", "^scrub-summary$", "--min-recall", "0", "--max-false-positive-rate", "0.01", "--junit", file.path])
        let xml = try String(contentsOf: file, encoding: .utf8)
        #expect(xml.contains(#"<testcase name="scrub-recall""#))
        let falsePositives = try #require(xml.range(of: #"<testcase name="scrub-false-positive-rate""#))
        #expect(xml[falsePositives.upperBound...].prefix(400).contains("<failure"), "\(xml)")
    }

    @Test("T-4, T-5: scripts/scrub-corpus writes the same corpus for the same seed, from scrubadub, Faker, gitleaks' and detect-secrets' own patterns, and scrub-pii meets the goals on it")
    func outsideCorpus() async throws {
        let script = Products.packageRoot.appendingPathComponent("scripts/scrub-corpus").path
        let first = folder.appendingPathComponent("outside-1.jsonl")
        let again = folder.appendingPathComponent("outside-2.jsonl")
        for file in [first, again] {
            let made = try await offPool { try ChildProcess.run(script, ["--seed", "5", "--documents", "40", "--out", file.path]) }
            #expect(made.status == 0, "\(made.stderr)")
        }
        #expect(try Data(contentsOf: first) == Data(contentsOf: again))
        let (status, results, stderr) = try await check(Self.scrubPII, ["--corpus", first.path, "--min-recall", "0.99", "--max-false-positive-rate", "0.01"])
        #expect(status == 0, "\(stderr) \(results.values.filter { $0.status.fails }.map(\.details))")
        let kinds = try #require(results["scrub-recall"]?.figures?["kinds"]?.objectValue.map { Dictionary(uniqueKeysWithValues: $0) })
        // The outside text holds T-4's kinds (scrubadub's and Faker's) and every kind gitleaks,
        // detect-secrets and Relay publish a pattern for. Only the generated corpus plants the
        // kinds of Nosey Parker's rules and of the issuers' own formats.
        let t4 = ["email", "card", "ipv4", "ipv6", "phone", "jwt", "aws_key", "bearer", "secret"]
        let onlyGenerated: Set = ["azure_sas_token", "discord_webhook", "google_oauth", "gcp_service_account", "sentry_dsn", "basic_auth"]
        let outside = Set(t4 + OutsideKind.kinds).subtracting(onlyGenerated)
        #expect(outside.count >= 60, "\(outside.count) kinds")
        #expect(outside.isSubset(of: kinds.keys), "missing from the corpus: \(outside.subtracting(kinds.keys).sorted())")
        #expect(kinds["name"] != nil && kinds["address"] != nil, "names and addresses are measured too")
    }
}
