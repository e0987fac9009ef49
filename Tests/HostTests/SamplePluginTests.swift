import Foundation
import Host
import HostPlugins
import HostSupport
import HostTestSupport
import Testing

/// The sample plugins, built by `swift build` beside the test bundle, through the real host.
@Suite struct SamplePluginTests {
    static func sample(_ name: String) -> String { Products.directory.appendingPathComponent("lib\(name).so").path }

    func raise(_ request: ReportRequest, wrapper: String? = nil, handler: String? = nil) throws -> ReportDocument {
        let host = try TestHost.make()
        if let wrapper { try host.loadPlugin(at: wrapper, into: .wrapper) }
        if let handler { try host.loadPlugin(at: handler, into: .handler) }
        return try host.raiseDocument(request)
    }

    /// Input → what scrub-pii must make of it.
    static let scrubCases: [(String, String)] = [
        // e-mail addresses
        ("write to alice@example.com please", "write to [email] please"),
        ("<first.last+tag@mail.example.co.uk>", "<[email]>"),
        ("not an address: alice@localhost", "not an address: alice@localhost"),
        ("user@host.c is too short a TLD", "user@host.c is too short a TLD"),
        // cards: 13-19 digits passing Luhn, spaces or dashes allowed
        ("card 4111 1111 1111 1111 declined", "card [card] declined"),
        ("card 4111-1111-1111-1111", "card [card]"),
        ("4111111111111111", "[card]"),
        ("amex 378282246310005", "amex [card]"),
        ("order 4111 1111 1111 1112 (fails Luhn)", "order 4111 1111 1111 1112 (fails Luhn)"),
        ("12345678901234567890123 is too long", "12345678901234567890123 is too long"),
        ("phone +1 555 123 4567", "phone [phone]"),
        ("id 1234567890", "id 1234567890"),
        // found by the outside corpus (scripts/scrub-corpus): bare, 00-prefixed, 12-digit Maestro
        ("call 4155550134 today", "call [phone] today"),
        ("dial 001-415-555-0134x22", "dial [phone]x22"),
        ("maestro 502001213672", "maestro [card]"),
        // and what must stay: Unix seconds, versions, barcodes and ids without a card's prefix
        ("at 1796184660 the sync ran", "at 1796184660 the sync ran"),
        ("created_at: 1796184660", "created_at: 1796184660"),
        ("version 1.2.3.4 ships", "version 1.2.3.4 ships"),
        ("barcode 0012345678905", "barcode 0012345678905"),
        ("ord_4111111111111111 shipped", "ord_4111111111111111 shipped"),
        ("build 6425210041 passed", "build 6425210041 passed"),
        // bearer tokens and key=/token=/secret= values, case-insensitive, key kept
        ("Authorization: Bearer abc.def-ghi_jkl", "Authorization: Bearer [secret]"),
        ("authorization: bearer xyz123", "authorization: bearer [secret]"),
        ("GET /x?token=abc123&page=2", "GET /x?token=[secret]&page=2"),
        ("TOKEN=Abc and Secret=s3cr3t; KEY=k", "TOKEN=[secret] and Secret=[secret]; KEY=[secret]"),
        ("api_key=AKIA123 client-secret=zz accessToken=tt", "api_key=[secret] client-secret=[secret] accessToken=[secret]"),
        ("password=hunter2", "password=[secret]"),
        ("monkey=banana stays", "monkey=banana stays"),
        ("token= (empty value stays)", "token= (empty value stays)"),
        // IPv4, octets up to 255
        ("from 192.168.1.20 via 10.0.0.1", "from [ip] via [ip]"),
        ("256.1.1.1 is not an address", "256.1.1.1 is not an address"),
        ("version 1.2.3.4.5 stays", "version 1.2.3.4.5 stays"),
        ("v1.2.3 stays", "v1.2.3 stays"),
        // mixed, and text that must not change
        ("alice@example.com paid with 5555 5555 5555 4444 from 8.8.8.8", "[email] paid with [card] from [ip]"),
        ("nothing to see here", "nothing to see here"),
        ("", ""),
    ]

    @Test("scrub-pii: scrubs summary, description, attribute values, labels and text attachments against a table of positive and negative cases")
    func scrubTable() throws {
        let host = try TestHost.make()
        try host.loadPlugin(at: Self.sample("scrub-pii"), into: .handler)
        for (input, expected) in Self.scrubCases {
            var request = ReportRequest(trigger: .logError)
            request.summary = input
            request.description = "d: " + input
            request.attributes = ["note": input]
            request.email = "reporter@example.com"
            request.labels = ["kept", input]
            request.attachments = [OfferedAttachment(name: "log", filename: "log.txt", data: Data("l: \(input)".utf8))]
            let document = try host.raiseDocument(request)
            #expect(document.content.summary == expected, "summary of \(input)")
            #expect(document.content.description == "d: " + expected, "description of \(input)")
            #expect(document.content.attributes["note"] == expected, "attribute of \(input)")
            #expect(document.content.labels == ["kept", expected], "labels of \(input)")
            #expect(document.content.attachments.map { String(decoding: $0.data, as: UTF8.self) } == ["l: " + expected], "attachment of \(input)")
            // What it does not touch (its README says so).
            #expect(document.content.email == "reporter@example.com")
        }
    }

    @Test("scrub-pii: idempotent: scrubbing a scrubbed report changes nothing")
    func scrubIdempotent() throws {
        let host = try TestHost.make()
        try host.loadPlugin(at: Self.sample("scrub-pii"), into: .handler)
        for (_, expected) in Self.scrubCases {
            var request = ReportRequest(trigger: .upload)
            request.summary = expected
            #expect(try host.raiseDocument(request).content.summary == expected)
        }
    }

    @Test("scrub-pii: 50,000 random inputs under AddressSanitizer, after the inputs earlier runs found: no memory errors, scrubbing twice equals once, a text seen again (the memo) and rules loaded from the cache folder scrub as the first time, a text asked whether it changes is said unchanged exactly when it is (no copy made), a damaged saved database is compiled again, never loaded; these and the 100 texts check --scrub plants (66 kinds) scrub as when each rule's second scan covers the whole text; the backward start search and the rule set with its tails cut (a bound or none) find the matches of the rules as written, match for match, on a quarter of the random inputs, the 100 texts and 10,000 texts spliced from them, and every rule of bounded length can use the search (one does); reverse.c reads every built-in rule with the engine's widths, tail.c each tail's bytes as the engine does and relaxes a rule's head as it says; sort.c sorts as a stable sort does, and a line of 300 matches (more than a scan keeps on its stack) scrubs as the whole-text scan")
    func scrubFuzz() throws {
        let folder = Products.packageRoot.appendingPathComponent("Plugins/scrub-pii")
        let temporary = makeTemporaryDirectory("scrub-fuzz")
        let binary = temporary.appendingPathComponent("scrub_fuzz")
        let cache = temporary.appendingPathComponent("cache")
        try FileManager.default.createDirectory(at: cache, withIntermediateDirectories: false)
        let sources = ["fuzz/scrub_fuzz.c", "fuzz/patterns.c", "engine.c", "scan.c", "breaks.c", "rules.c", "checks.c", "keys.c", "cache.c", "reverse.c", "rule_databases.c", "tail.c", "sort.c"].map { folder.appendingPathComponent($0).path }
        let digest = Products.packageRoot.appendingPathComponent("Sources/Digest")
        try Fixtures.compile(
            ["-std=gnu11", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-pthread", "-I", digest.appendingPathComponent("include").path]
                + sources + [digest.appendingPathComponent("sha256.c").path, "-lhs", "-o", binary.path])
        let run = try ChildProcess.run(binary.path, ["50000", "20261129", cache.path, try Self.plantedTexts(in: temporary).path])
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        #expect(run.stdout.contains(
            "50000 inputs: no memory errors, idempotent, the same when seen again, from saved rules (each damaged, then compiled again) and as scanning the whole text"))
        #expect(run.stdout.contains(
            "100 corpus texts: idempotent and the same as scanning the whole text; these and 10000 texts spliced from them: the backward start search and the cut tails find the matches of the rules as written"))
    }

    /// The texts `check --scrub` plants its values in (`check --write-corpus`), NUL-separated.
    static func plantedTexts(in folder: URL) throws -> URL {
        let corpus = folder.appendingPathComponent("corpus.jsonl"), texts = folder.appendingPathComponent("texts")
        let written = try ChildProcess.reporthost(["check", "--write-corpus", corpus.path, "--seed", "20261205", "--documents", "100"])
        try #require(written.status == 0, "\(written.stderr)")
        var bytes = Data()
        for line in try String(contentsOf: corpus, encoding: .utf8).split(separator: "\n") {
            bytes += Data(try #require(JSONValue.parse(Data(line.utf8))["text"]?.stringValue).utf8) + [0]
        }
        try bytes.write(to: texts)
        return texts
    }

    @Test("wrapper-sim: sets wrapper.name and wrapper.version, assigns the wrapper label once, completes from a thread")
    func wrapperSim() throws {
        var request = ReportRequest(trigger: .upload)
        request.labels = ["a"]
        let document = try raise(request, wrapper: Self.sample("wrapper-sim"))
        #expect(document.content.attributes == ["wrapper.name": "wrapper-sim", "wrapper.version": "1.0.0"])
        #expect(document.content.labels == ["a", "wrapper"])
        #expect(document.internalLog.isEmpty)
        request.labels = ["wrapper", "b"]
        #expect(try raise(request, wrapper: Self.sample("wrapper-sim")).content.labels == ["wrapper", "b"])
    }

    @Test("account-context (Swift, completion form): account attributes and an account label, idempotent, also on recovered reports")
    func accountContext() throws {
        let host = try TestHost.make()
        try host.loadPlugin(at: Self.sample("account-context"), into: .handler)
        var request = ReportRequest(trigger: .logError)
        request.labels = ["account:free"]
        let document = try host.raiseDocument(request)
        #expect(document.content.attributes["account.id"] == "demo-account")
        #expect(document.content.attributes["account.plan"] == "free")
        #expect(document.content.labels == ["account:free"])
        let recovered = try #require(try host.runChain(host.makeReport(ReportRequest(trigger: .crash)), mode: .recovered))
        #expect(recovered.content.attributes["account.plan"] == "free")
        #expect(recovered.content.labels == ["account:free"])
    }

    @Test("account-context reads REPORTHOST_ACCOUNT_ID and REPORTHOST_ACCOUNT_PLAN")
    func accountContextEnvironment() throws {
        let result = try ChildProcess.reporthost(
            ["report", "bug", "--handler", Self.sample("account-context"), "--print"],
            environment: ["REPORTHOST_ACCOUNT_ID": "acct-42", "REPORTHOST_ACCOUNT_PLAN": "enterprise"])
        #expect(result.status == 0, "\(result.stderr)")
        let json = try JSONValue.parse(result.stdout)
        #expect(json["attributes"]?["account.id"] == .string("acct-42"))
        #expect(json["labels"] == .array([.string("account:enterprise")]))
    }

    @Test("async-example (Swift, async form): its change reaches a running-app report")
    func asyncExample() async throws {
        let path = Self.sample("async-example")
        let document = try await offPool { try self.raise(ReportRequest(trigger: .upload), handler: path) }
        #expect(document.content.attributes["async.example"] == "done")
        // A terminating report is left alone: nothing arrives after it was bundled.
        let terminating = { () -> ReportRequest in
            var request = ReportRequest(trigger: .logException)
            request.isTerminating = true
            return request
        }()
        let last = try await offPool { try self.raise(terminating, handler: path) }
        #expect(last.content.attributes["async.example"] == nil)
        #expect(!last.internalLog.contains { $0.message.contains("closed handle") }, "\(last.internalLog)")
    }

    @Test("ABI: the C samples export only rh_plugin_entry (version script)")
    func exportsOnlyEntry() throws {
        for name in ["scrub-pii", "wrapper-sim"] {
            let result = try ChildProcess.run("/usr/bin/env", ["nm", "-D", "--defined-only", Self.sample(name)])
            #expect(result.status == 0)
            let symbols = result.stdout.split(separator: "\n").map { $0.split(separator: " ").last.map(String.init) ?? "" }
            #expect(symbols == ["rh_plugin_entry"], "\(name) exports \(symbols)")
        }
    }

    static let cargoAvailable = (try? ChildProcess.run("/usr/bin/env", ["cargo", "--version"]).status) == 0

    @Test("rust-example: built by its script; tags the report; a panic is contained and logged",
          .enabled(if: cargoAvailable, "cargo is not installed on this machine, so the Rust sample cannot be built"))
    func rustExample() throws {
        let target = makeTemporaryDirectory("rust-target")
        let script = Products.packageRoot.appendingPathComponent("Plugins/rust-example/build.sh").path
        let build = try ChildProcess.run(script, [], environment: ["CARGO_TARGET_DIR": target.path])
        #expect(build.status == 0, "\(build.stderr)")
        let library = build.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let document = try raise(ReportRequest(trigger: .upload), handler: library)
        #expect(document.content.attributes["rust.example"] == "yes")
        #expect(document.content.labels == ["rust"])
        let panicking = try ChildProcess.reporthost(
            ["report", "bug", "--handler", library, "--print"], environment: ["RUST_EXAMPLE_PANIC": "1"])
        #expect(panicking.status == 0)
        let json = try JSONValue.parse(panicking.stdout)
        #expect(json["internal_log"]?.arrayValue?.contains { $0["message"]?.stringValue?.contains("panic was contained") == true } == true)
    }
}
