import Foundation
import Host
import HostSupport
import HostTestSupport
import Testing

/// The configuration file of SPEC I: defaults, strict keys and types, path resolution.
@Suite struct ConfigurationTests {
    func parse(_ text: String, base: String = "/etc/rh") throws -> Configuration {
        try Configuration.parse(JSONValue.parse(text), origin: "c.json", baseDirectory: base)
    }

    func error(_ text: String) -> String? {
        do {
            _ = try parse(text)
            return nil
        } catch let error as HostError {
            #expect(error.isConfiguration)
            return error.description
        } catch {
            return "\(error)"
        }
    }

    @Test("I: the defaults equal the SPEC's numbers")
    func defaults() throws {
        let config = try parse("{}")
        #expect(config == Configuration())
        #expect(config.limits.callbackTimeoutMs == 30_000)
        #expect(config.limits.recoveredReturnMs == 3_000)
        #expect(config.limits.reportBudgetMs == 60_000)
        #expect(config.limits.attachmentsDecisionMs == 10_000)
        #expect(config.limits.completionWindowMs == nil)
        #expect(config.limits.effectiveCompletionWindowMs == 60_000)
        #expect(config.submission.timeoutMs == 15_000)
        #expect(config.retry.intervalSeconds == 5 && config.retry.limit == 3)
        #expect(config.retry.behaviour == .interval && config.retry.order == .queue)
        #expect(config.reportsPerMin == 30)
        #expect(config.storage.maxRecordCount == 0 && config.storage.maxDatabaseSizeMB == 0)
        #expect(config.logging == [LoggingDestination(kind: .console, level: .info)])
        #expect(config.repository == ".reporthost")
    }

    @Test("I: every documented key is read; paths resolve against the file's folder")
    func fullFile() throws {
        let config = try parse("""
            {"repository": "repo",
             "plugins": {"wrapper": "w.so", "handler": "/abs/h.so", "delegate": null, "required": ["handler", "delegate"]},
             "attributes": {"app": "demo", "build": 42, "beta": true},
             "limits": {"callbackTimeoutMs": 50, "recoveredReturnMs": 20, "reportBudgetMs": 500,
                        "attachmentsDecisionMs": 40, "completionWindowMs": 1000},
             "submission": {"url": "http://127.0.0.1:1/post?format=json&token=t", "timeoutMs": 100, "allowInsecure": true},
             "retry": {"behaviour": "none", "intervalSeconds": 1, "limit": 7, "order": "stack"},
             "reportsPerMin": 0,
             "storage": {"maxRecordCount": 10, "maxDatabaseSizeMB": 2},
             "logging": [{"type": "console", "level": "warn"}, {"type": "file", "level": "debug", "path": "logs/r.log"}]}
            """)
        #expect(config.repository == "/etc/rh/repo")
        #expect(config.plugins == [.wrapper: "/etc/rh/w.so", .handler: "/abs/h.so"])
        #expect(config.requiredSlots == [.handler, .delegate])
        #expect(try parse("{}").requiredSlots.isEmpty)  // the default: nothing required
        #expect(config.attributes == ["app": "demo", "build": "42", "beta": "true"])
        #expect(config.limits.callbackTimeoutMs == 50 && config.limits.effectiveCompletionWindowMs == 1000)
        #expect(config.submission.allowInsecure && config.submission.timeoutMs == 100)
        #expect(config.retry.behaviour == .none && config.retry.order == .stack && config.retry.limit == 7)
        #expect(config.reportsPerMin == 0)
        #expect(config.logging == [
            LoggingDestination(kind: .console, level: .warn), LoggingDestination(kind: .file(path: "/etc/rh/logs/r.log"), level: .debug),
        ])
    }

    @Test("I: unknown keys and wrong types are errors that name the key")
    func strictness() {
        let cases: [(String, String)] = [
            (#"{"colour": 1}"#, "'colour'"),
            (#"{"limits": {"callbackTimeout": 1}}"#, "'limits.callbackTimeout'"),
            (#"{"limits": {"callbackTimeoutMs": "1"}}"#, "'limits.callbackTimeoutMs': expected an integer, got a string"),
            (#"{"limits": {"callbackTimeoutMs": 1.5}}"#, "'limits.callbackTimeoutMs'"),
            (#"{"limits": {"callbackTimeoutMs": 0}}"#, "'limits.callbackTimeoutMs': 0 is below the minimum 1"),
            (#"{"plugins": {"handler": 3}}"#, "'plugins.handler'"),
            (#"{"plugins": {"extra": "x.so"}}"#, "'plugins.extra'"),
            (#"{"plugins": {"required": "handler"}}"#, "'plugins.required': expected an array"),
            (#"{"plugins": {"required": ["handler", "scrubber"]}}"#, #"'plugins.required[1]': "scrubber" is not one of wrapper, handler, delegate"#),
            (#"{"attributes": {"a": [1]}}"#, "'attributes.a'"),
            (#"{"submission": {"allowInsecure": "yes"}}"#, "'submission.allowInsecure'"),
            (#"{"retry": {"behaviour": "sometimes"}}"#, "'retry.behaviour'"),
            (#"{"retry": {"limit": 0}}"#, "'retry.limit': 0 is not allowed"),
            (#"{"retry": {"order": "random"}}"#, "'retry.order'"),
            (#"{"reportsPerMin": -1}"#, "'reportsPerMin'"),
            (#"{"storage": {"maxRecordCount": true}}"#, "'storage.maxRecordCount'"),
            (#"{"logging": {"type": "console"}}"#, "'logging'"),
            (#"{"logging": [{"type": "syslog"}]}"#, "'logging[0].type'"),
            (#"{"logging": [{"type": "file"}]}"#, "'logging[0].path'"),
            (#"{"logging": [{"type": "console", "level": "loud"}]}"#, "'logging[0].level'"),
            (#"[]"#, "(top level)"),
            // A window of 0 would hand a closure to the next callback while the last one may
            // still call it.
            (#"{"limits": {"completionWindowMs": 0}}"#, "'limits.completionWindowMs': 0 is below the minimum 1"),
            // Ranges keep deadline and size arithmetic from overflowing.
            (#"{"limits": {"callbackTimeoutMs": 1000000000000000}}"#, "'limits.callbackTimeoutMs': 1000000000000000 is above the maximum 86400000"),
            (#"{"limits": {"reportBudgetMs": 86400001}}"#, "'limits.reportBudgetMs': 86400001 is above the maximum 86400000"),
            (#"{"submission": {"timeoutMs": 100000000000}}"#, "'submission.timeoutMs'"),
            (#"{"retry": {"intervalSeconds": 9000000000000}}"#, "'retry.intervalSeconds'"),
            (#"{"storage": {"maxDatabaseSizeMB": 9000000000000000}}"#, "'storage.maxDatabaseSizeMB'"),
            (#"{"reportsPerMin": 1e300}"#, "'reportsPerMin'"),
        ]
        for (text, named) in cases {
            let message = error(text)
            #expect(message?.contains(named) == true, "\(text) gave \(message ?? "no error")")
            #expect(message?.hasPrefix("config c.json: ") == true)
        }
    }

    @Test("D-14: an empty logging list disables every destination; an absent one keeps the console at info")
    func loggingList() throws {
        #expect(try parse(#"{"logging": []}"#).makeLogger(system: .live).destinations.isEmpty)
        let standard = try parse("{}").makeLogger(system: .live)
        #expect(standard.destinations.count == 1)
        #expect(standard.destinations.first?.level == .info)
    }

    @Test("JSON: the parser keeps key order, tells true from 1, and rejects trailing text with an offset")
    func jsonParser() throws {
        let value = try JSONValue.parse(#"{"b": true, "a": 1, "s": "\u00e9\n", "n": null, "l": [1.5, -2e3]}"#)
        #expect(value.objectValue?.map(\.0) == ["b", "a", "s", "n", "l"])
        #expect(value["b"] == .bool(true))
        #expect(value["a"] == .number(1))
        #expect(value["s"] == .string("é\n"))
        #expect(value["l"] == .array([.number(1.5), .number(-2000)]))
        #expect(try JSONValue.parse(value.serialized()) == value)
        #expect(throws: JSONParseError.self) { try JSONValue.parse("{} x") }
        #expect(throws: JSONParseError.self) { try JSONValue.parse(#"{"a": 01x}"#) }
    }

    @Test("JSON: strings are escaped byte-exactly: quotes, backslashes and controls, also inside \"\\r\\n\" or before a combining mark")
    func jsonEscapes() throws {
        let cases = ["plain", "", "a\"b", "\\", "line\r\nnext", "\"\u{301}", "tab\there\u{1}\u{1f}", "é 🚀 \u{7f}", "\r\n\"\r\n"]
        for text in cases {
            let written = JSONValue.string(text).serialized()
            #expect(try JSONValue.parse(written) == .string(text), "\(written)")
            #expect(!written.dropFirst().dropLast().unicodeScalars.contains { $0.value < 0x20 }, "a raw control in \(written)")
        }
        #expect(JSONValue.string("a\"\r\n\u{1}").serialized() == #""a\"\r\n\u0001""#)
    }

    @Test("R-2: report ids (and session ids, multipart boundaries) are random version-4 UUIDs in lower case, each different")
    func randomIDs() throws {
        let ids = (0..<2_000).map { _ in randomUUID() }
        #expect(Set(ids).count == ids.count)
        for id in ids {
            #expect(id.wholeMatch(of: /[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}/) != nil, "\(id)")
            #expect(UUID(uuidString: id) != nil)
        }
        // Every random digit takes every value somewhere: no digit is stuck.
        for position in Array(0..<36).filter({ ![8, 13, 14, 18, 19, 23].contains($0) }) {
            let digits = Set(ids.map { $0[$0.index($0.startIndex, offsetBy: position)] })
            #expect(digits.count == 16, "digit \(position): \(digits.sorted())")
        }
    }

    @Test("JSON: compact and pretty text, exactly: nested arrays and objects, empty ones, numbers")
    func jsonLayout() {
        let value = JSONValue.object([
            ("a", .array([.number(1), .number(2.5), .object([("b", .null)])])), ("e", .array([])), ("o", .object([])),
            ("t", .bool(true)),
        ])
        #expect(value.serialized() == #"{"a":[1,2.5,{"b":null}],"e":[],"o":{},"t":true}"#)
        #expect(value.serialized(pretty: true) == """
            {
              "a": [
                1,
                2.5,
                {
                  "b": null
                }
              ],
              "e": [],
              "o": {},
              "t": true
            }
            """)
    }

    @Test("SHA-256 matches the FIPS 180-4 test vectors")
    func sha256() {
        #expect(SHA256.hex(Data()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hex(Data("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hex(Data("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
            == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        // FIPS 180-4's long vector: a million "a", fed in pieces that straddle blocks.
        #expect(SHA256.hex(Data(repeating: UInt8(ascii: "a"), count: 1_000_000))
            == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test("SHA-256 agrees with coreutils' sha256sum at every length around the block and padding boundaries, from memory and from a file")
    func sha256AgainstCoreutils() throws {
        let folder = makeTemporaryDirectory("sha256")
        defer { try? FileManager.default.removeItem(at: folder) }
        var generator = SplitMix64(seed: 21)
        let lengths = Array(0...130) + [191, 192, 193, 4_095, 4_096, 65_536 + 7, 300_001]
        var files: [URL] = []
        var ours: [String] = []
        for length in lengths {
            let data = Data((0..<length).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
            let file = folder.appendingPathComponent("\(length).bin")
            try data.write(to: file)
            files.append(file)
            let fromMemory = SHA256.hex(data)
            #expect(SHA256.hex(ofFileAt: file.path, system: .live) == fromMemory, "length \(length)")
            ours.append(fromMemory)
        }
        let result = try ChildProcess.run("/usr/bin/env", ["sha256sum"] + files.map(\.path))
        let theirs = result.stdout.split(separator: "\n").map { String($0.prefix(64)) }
        #expect(theirs.count == lengths.count)
        for (length, (mine, reference)) in zip(lengths, zip(ours, theirs)) { #expect(mine == reference, "length \(length)") }
    }
}
