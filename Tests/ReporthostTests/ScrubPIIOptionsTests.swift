import Foundation
import Host
import HostSupport
import HostTestSupport
import Testing

/// SPEC T-4: scrub-pii's options, given through `plugins.options.handler` to the real plugin.
@Suite struct ScrubPIIOptionsTests {
    let fixture = CommandFixture("reporthost-scrub-options")
    static let scrubPII = Products.directory.appendingPathComponent("libscrub-pii.so").path

    /// `report error --print` through scrub-pii with `options`; the document, or the failure.
    func report(_ options: String, summary: String, attributes: [String] = [], repository: String? = nil) throws -> ChildProcess.Result {
        let file = fixture.folder.appendingPathComponent("c-\(UUID().uuidString).json")
        try #"{"plugins": {"handler": "\#(Self.scrubPII)", "options": {"handler": \#(options)}}}"#.write(to: file, atomically: true, encoding: .utf8)
        var words = ["report", "error", "--summary", summary, "--config", file.path, "--print"]
        for attribute in attributes { words += ["--attribute", attribute] }
        if let repository { words += ["--repository", repository] }
        return try repository == nil ? fixture.run(words) : ChildProcess.reporthost(words, directory: fixture.folder)
    }

    func document(_ result: ChildProcess.Result) throws -> JSONValue {
        guard result.status == 0 else { throw CommandFixture.CommandFailed(description: "exit \(result.status): \(result.stderr)") }
        return try JSONValue.parse(result.stdout)
    }

    @Test("T-4 scrub-pii: safeAttributes keeps those keys whole; disable leaves a kind alone; remove writes nothing in its place")
    func safeDisableRemove() async throws {
        try await offPool { [self] in
            let kept = try document(report(
                #"{"safeAttributes": ["build.host"], "disable": ["phone"]}"#, summary: "call 202-555-0143 or mail bo@example.org",
                attributes: ["build.host=ci@example.org", "note=ci@example.org"]))
            #expect(kept["summary"]?.stringValue == "call 202-555-0143 or mail [email]")
            #expect(kept["attributes"]?["build.host"]?.stringValue == "ci@example.org")
            #expect(kept["attributes"]?["note"]?.stringValue == "[email]")
            let removed = try document(report(#"{"method": "remove"}"#, summary: "mail bo@example.org, token=abcdef123456 now"))
            #expect(removed["summary"]?.stringValue == "mail , token= now")
        }
    }

    @Test("T-5 scrub-pii: a key that names a secret as a word (snake, kebab, camel) loses its whole value, the trail says so; a word inside another word does not; safeAttributes wins; sensitiveKeys replaces the list")
    func secretNamedKeys() async throws {
        try await offPool { [self] in
            let secret = ["password", "db_password", "x-api-key", "apiKey", "set-cookie", "Authorization", "sessionToken", "client_secret",
                          "access_token", "private_key", "credentials"]
            let innocent = ["author", "secretary", "tokenizer", "passage", "keyboard", "monkey"]
            let scrubbed = try document(report("{}", summary: "keys", attributes: (secret + innocent).map { "\($0)=hunter2" }))
            let attributes = try #require(scrubbed["attributes"])
            for key in secret { #expect(attributes[key]?.stringValue == "[secret]", "\(key): \(attributes[key] ?? .null)") }
            for key in innocent { #expect(attributes[key]?.stringValue == "hunter2", "\(key)") }
            let changed = (scrubbed["changes"]?.arrayValue ?? []).compactMap { $0["field"]?.stringValue }
            #expect(secret.allSatisfy { changed.contains("attribute:\($0)") }, "the trail names each: \(changed)")
            // safeAttributes wins; sensitiveKeys replaces the list (its words only).
            let options = #"{"safeAttributes": ["password"], "sensitiveKeys": ["passage", "api key"]}"#
            let chosen = try document(report(options, summary: "keys", attributes: ["password=hunter2", "passage=a", "apiKey=b", "token=c"]))["attributes"]
            #expect(chosen?["password"]?.stringValue == "hunter2")
            #expect(chosen?["passage"]?.stringValue == "[secret]" && chosen?["apiKey"]?.stringValue == "[secret]")
            #expect(chosen?["token"]?.stringValue == "c", "token is not in the list given")
        }
    }

    @Test("T-5 scrub-pii: only what a rule's group names is replaced, so a rule matches inside another's key: both values go")
    func ruleInsideAnotherKey() async throws {
        try await offPool { [self] in
            // `secret` replaces `cl_pwd` (the value of SECRET=); Cloudant's keyword rule, whose
            // match starts inside it, still replaces its own value.
            let scrubbed = try document(report("{}", summary: "export SECRET=cl_pwd := abcdefghijklmnopqrstuvwx"))
            #expect(scrubbed["summary"]?.stringValue == "export SECRET=[secret] := [cloudant_credentials]")
        }
    }

    @Test("T-4, T-5 scrub-pii: extraPatterns are compiled by the rules' engine and replaced by [name]; a pattern it cannot take refuses the load, naming it")
    func extraPatterns() async throws {
        try await offPool { [self] in
            let done = try document(report(#"{"extraPatterns": {"ticket": "TCK-[0-9]{4,}", "employee": "E[0-9]{6}"}}"#,
                summary: "TCK-12345 by E123456 (mail bo@example.org); TCK-1 stays"))
            #expect(done["summary"]?.stringValue == "[ticket] by [employee] (mail [email]); TCK-1 stays")
            for (options, says) in [
                (#"{"extraPatterns": {"broken": "([a-z"}}"#, #"extraPatterns "broken": "([a-z" is not a pattern the engine (Hyperscan) takes"#),
                (#"{"extraPatterns": {"empty": "x*"}}"#, #"extraPatterns "empty": "x*" is not a pattern the engine (Hyperscan) takes: Pattern matches empty buffer"#),
                (#"{"extraPatterns": {"back": "(a)\\1"}}"#, #"extraPatterns "back": "(a)\1" is not a pattern the engine (Hyperscan) takes: Back-references"#),
                (#"{"method": "shred"}"#, #""method": "shred" is not mask, remove or hash"#),
                (#"{"disable": ["names"]}"#, #""disable": "names" is not a kind"#),
                (#"{"safeAtributes": []}"#, #"unknown option "safeAtributes""#),
            ] {
                let refused = try report(options, summary: "x")
                #expect(refused.status == 2, "\(options)")
                #expect(refused.stderr.contains("scrub-pii: options: " + says), "\(refused.stderr)")
            }
        }
    }

    @Test("T-4 scrub-pii: hash writes [kind:<12 hex>], the same for the same value in every report of a repository and another in another; its key stays in the data folder")
    func hash() async throws {
        try await offPool { [self] in
            let repository = fixture.folder.appendingPathComponent("hashed").path
            let first = try document(report(#"{"method": "hash"}"#, summary: "bo@example.org from 10.1.2.3", repository: repository))
            let second = try report(#"{"method": "hash"}"#, summary: "again bo@example.org", repository: repository)
            let summary = try #require(first["summary"]?.stringValue)
            let token = try #require(summary.firstMatch(of: /\[email:([0-9a-f]{12})\]/)?.0)
            #expect(summary.contains(/\[ipv4:[0-9a-f]{12}\]/), "\(summary)")
            #expect(try document(second)["summary"]?.stringValue == "again \(token)")
            let other = try document(report(#"{"method": "hash"}"#, summary: "bo@example.org", repository: fixture.folder.appendingPathComponent("other").path))
            #expect(other["summary"]?.stringValue?.contains(String(token)) == false)
            let key = repository + "/plugins/scrub-pii/hmac.key"
            var info = stat()
            #expect(stat(key, &info) == 0 && info.st_size == 32 && info.st_mode & 0o777 == 0o600)
            let hex = try Data(contentsOf: URL(fileURLWithPath: key)).map { String(format: "%02x", $0) }.joined()
            #expect(!first.serialized().contains(hex) && !second.stderr.contains(hex) && !second.stdout.contains(hex))
            // Idempotent: a pseudonym is not scrubbed again.
            let rescrubbed = try document(report(#"{"method": "hash"}"#, summary: summary, repository: repository))
            #expect(rescrubbed["summary"]?.stringValue == summary)
        }
    }

    @Test("T-4 scrub-pii: a hash key that is not a regular file of 32 bytes (a FIFO, a short file) never blocks a report: it is masked, with a warning")
    func hashKeyRefused() async throws {
        try await offPool { [self] in
            for (name, plant) in [
                ("fifo", { (path: String) in #expect(mkfifo(path, 0o600) == 0) }),
                ("short", { (path: String) in #expect(FileManager.default.createFile(atPath: path, contents: Data(repeating: 7, count: 5))) }),
            ] as [(String, (String) -> Void)] {
                let repository = fixture.folder.appendingPathComponent("key-\(name)").path
                try FileManager.default.createDirectory(atPath: repository + "/plugins/scrub-pii", withIntermediateDirectories: true)
                plant(repository + "/plugins/scrub-pii/hmac.key")
                let result = try report(#"{"method": "hash"}"#, summary: "mail bo@example.org", repository: repository)
                #expect(try document(result)["summary"]?.stringValue == "mail [email]", "\(name): masked, never left raw")
                #expect(result.stderr.contains("is not a regular file of 32 bytes"), "\(name): \(result.stderr)")
            }
        }
    }

    @Test("T-4 check --scrub: a scrubber slow at its first report (compiling its rules, on a busy machine) is scored on what it wrote, not failed as leaks")
    func slowFirstReportScored() async throws {
        // Its first callback takes 2.5 s (longer than the other checks' 2 s limit), then it
        // redacts the whole summary.
        let slow = try Fixtures.plugin("slow-first-scrubber", source: """
            #include <reporthost/plugin.h>
            #include <time.h>
            static const rh_host_api *host;
            static int calls;
            static void before(void *c, rh_report *r, bool t, rh_completion done) {
                (void)c; (void)t;
                if (calls++ == 0) { struct timespec wait = {2, 500000000}; nanosleep(&wait, NULL); }
                host->set_summary(r, "[redacted]");
                done();
            }
            static rh_handler handler = {RH_ABI_VERSION_MAJOR, RH_ABI_VERSION_MINOR, sizeof(rh_handler), "slow-first", "1.0",
                                         NULL, before, NULL, NULL, NULL};
            const rh_handler *rh_plugin_entry(const rh_host_api *h) { host = h; return &handler; }
            """)
        let result = try await offPool {
            try ChildProcess.reporthost(["check", slow.path, "--scrub", "--include", "^scrub-summary$"])
        }
        #expect(result.stdout.contains("scrub-summary") && result.stdout.contains("recall 1.000"), "\(result.stdout) \(result.stderr)")
        #expect(!result.stdout.contains("survived"), "\(result.stdout)")
    }
}
