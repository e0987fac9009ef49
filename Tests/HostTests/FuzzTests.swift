import Foundation
import Host
import HostPlugins
import HostRecovery
import HostSupport
import HostTestSupport
import PluginAPI
import Receiver
import Testing

/// Seeded random drivers for every reader of outside input: crash files, configuration,
/// JSON (differential against Python's `json`), the receiver's HTTP over a real socket, and
/// the plugin host table. Reproducible: `REPORTHOST_FUZZ_SEED` picks the seed,
/// `REPORTHOST_FUZZ_SCALE` multiplies the number of inputs (`scripts/fuzz` runs long).
/// Each failure message carries the seed and the input.
@Suite struct FuzzTests {
    static let seed = ProcessInfo.processInfo.environment["REPORTHOST_FUZZ_SEED"].flatMap(UInt64.init) ?? 20261201
    static let scale = ProcessInfo.processInfo.environment["REPORTHOST_FUZZ_SCALE"].flatMap(Int.init) ?? 1

    /// The host's SplitMix64, with the picks the drivers need.
    struct Random {
        var source: SplitMix64
        init(_ seed: UInt64) { source = SplitMix64(seed: seed) }
        mutating func next() -> UInt64 { source.next() }
        mutating func below(_ n: Int) -> Int { n <= 0 ? 0 : source.int(0..<n) }
        mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }
        mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
    }

    /// Numbers that break conversions: signs, overflow, exponents, garbage.
    static let hostileNumbers = [
        "0", "-1", "1", "11", "255", "65536", "2147483647", "2147483648", "-2147483649", "4294967296", "9223372036854775807",
        "9223372036854775808", "-9223372036854775809", "18446744073709551616", "99999999999999999999999", "1e308", "1e400",
        "-0", "0x10", "inf", "nan", "", " ", "١٢", "1.5", "+5", "--1", "0xffffffffffffffff", "NaN", "Infinity",
    ]

    // MARK: Crash files

    static let validCrash = """
        reporthost-crash 1
        session 2b3c4d5e-0000-0000-0000-000000000000
        signal 11
        code 1
        address 0x0
        thread 4242
        pid 4242
        time 1700000000
        plugin_path /plugins/p.so
        plugin_digest abc
        plugin_name p
        callback on_before_report_created
        register rip 0x5010
        register rsp 0x7ffd0000
        attribute app.version=1.2
        attachment /nonexistent/log.txt
        module 0x1000 0x2000 /usr/bin/host
        module 0x5000 0x6000 /plugins/p.so
        frame 0x1500
        frame 0x5010
        end

        """

    @Test("D-1: the crash-file reader takes any mutation of a crash file without trapping")
    func crashFiles() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool {
            var random = Random(Self.seed)
            let lines = Self.validCrash.split(separator: "\n").map(String.init)
            let keys = ["signal", "code", "address", "thread", "time", "frame", "module", "register", "attribute", "attachment",
                        "plugin_path", "plugin_digest", "callback", "session", "end"]
            let count = 3_000 * Self.scale
            for iteration in 0..<count {
                var mutated = lines
                for _ in 0..<(1 + random.below(6)) {
                    switch random.below(7) {
                    case 0 where !mutated.isEmpty: mutated.remove(at: random.below(mutated.count))
                    case 1 where !mutated.isEmpty: mutated.insert(mutated[random.below(mutated.count)], at: random.below(mutated.count))
                    case 2: mutated.insert("\(random.pick(keys)) \(random.pick(Self.hostileNumbers))", at: random.below(mutated.count + 1))
                    case 3: mutated.insert("module \(random.pick(Self.hostileNumbers)) \(random.pick(Self.hostileNumbers)) \(random.pick(Self.hostileNumbers))", at: random.below(mutated.count + 1))
                    case 4: mutated.insert(String(decoding: (0..<random.below(40)).map { _ in UInt8(random.below(256)) }, as: UTF8.self), at: random.below(mutated.count + 1))
                    case 5: mutated = mutated.map { $0 + (random.chance(10) ? "\r" : "") }
                    default: mutated.insert("frame 0x\(String(random.next(), radix: 16))", at: random.below(mutated.count + 1))
                    }
                }
                var data = Data(mutated.joined(separator: "\n").utf8)
                if random.chance(10), !data.isEmpty { data[random.below(data.count)] = UInt8(random.below(256)) }
                if random.chance(5) { data = data.prefix(random.below(data.count + 1)) }
                guard let crash = CrashFile(path: "/fuzz/\(iteration).crash", data: data, modifiedAt: Date(timeIntervalSince1970: 1_700_000_000), now: Date()) else {
                    continue
                }
                // Everything recovery does with a parsed file.
                _ = crash.payload().serialized()
                _ = crash.blamesPlugin(hostModules: ["/usr/bin/host"])
                _ = crash.faultModule
                #expect(crash.frames.count <= CrashFile.maxFrames && crash.attachmentPaths.count <= CrashFile.maxAttachments)
                #expect(crash.time.timeIntervalSince1970 >= 946_684_800, "seed \(Self.seed) iteration \(iteration)")
            }
        }
    }

    // MARK: Configuration

    @Test("I: the configuration reader accepts or names the bad key for any value of any key, never traps")
    func configurations() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool {
            var random = Random(Self.seed &+ 1)
            let keys: [String: [String]] = [
                "": ["repository", "plugins", "attributes", "limits", "submission", "retry", "reportsPerMin", "storage", "logging", "extra"],
                "limits": ["callbackTimeoutMs", "recoveredReturnMs", "reportBudgetMs", "attachmentsDecisionMs", "completionWindowMs"],
                "submission": ["url", "timeoutMs", "allowInsecure"],
                "retry": ["behaviour", "intervalSeconds", "limit", "order"],
                "storage": ["maxRecordCount", "maxDatabaseSizeMB"],
                "plugins": ["wrapper", "handler", "delegate"],
            ]
            func value(_ depth: Int) -> String {
                switch random.below(depth > 2 ? 6 : 8) {
                case 0: return random.pick(["0", "-1", "1", "1e15", "9007199254740993", "86400001", "1.5", "-0", "1e300", "30000"])
                case 1: return random.pick(["true", "false", "null"])
                case 2: return "\"" + random.pick(["", "interval", "none", "queue", "stack", "console", "file", "debug", "http://127.0.0.1:1/post", "x"]) + "\""
                case 3: return "[]"
                case 4: return "[{\"type\": \"\(random.pick(["console", "file", "syslog"]))\", \"level\": \"\(random.pick(["info", "loud"]))\"}]"
                case 5: return "{}"
                default:
                    let section = random.pick(Array(keys.keys))
                    let members = (0..<random.below(4)).map { _ in "\"\(random.pick(keys[section] ?? ["x"]))\": \(value(depth + 1))" }
                    return "{" + members.joined(separator: ", ") + "}"
                }
            }
            for iteration in 0..<(2_000 * Self.scale) {
                let members = (0..<random.below(5)).map { _ -> String in
                    let key = random.pick(keys[""] ?? [])
                    return "\"\(key)\": \(key == "limits" || key == "retry" || key == "storage" || key == "submission" || key == "plugins" ? "{" + (0..<random.below(4)).map { _ in "\"\(random.pick(keys[key] ?? []))\": \(value(1))" }.joined(separator: ", ") + "}" : value(1))"
                }
                let text = "{" + members.joined(separator: ", ") + "}"
                guard let json = try? JSONValue.parse(text) else { continue }
                do throws(HostError) {
                    let configuration = try Configuration.parse(json, origin: "fuzz.json", baseDirectory: "/tmp")
                    // What the host computes from an accepted configuration must not overflow.
                    let now = HostInstant(nanoseconds: UInt64.max / 2)
                    _ = now.advanced(byMilliseconds: configuration.limits.reportBudgetMs)
                    _ = configuration.storage.maxDatabaseSizeMB * 1024 * 1024
                    #expect(configuration.limits.effectiveCompletionWindowMs >= 1)
                } catch {
                    #expect(error.description.hasPrefix("config fuzz.json: "), "seed \(Self.seed) iteration \(iteration): \(text)")
                    #expect(error.isConfiguration)
                }
            }
        }
    }

    // MARK: JSON, against Python

    @Test("JSON: the reader accepts and rejects what Python's json does (known, documented differences aside)")
    func jsonDifferential() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool {
            var random = Random(Self.seed &+ 2)
            let seeds = [
                #"{"a": [1, 2.5, -3e2, true, false, null], "b": {"c": "d\n\u00e9\ud83d\ude00"}}"#, #"[]"#, #"{}"#, #""x""#, #"0"#,
                #"-0.0e+1"#, #"[{"k": 1, "k": 2}]"#, #"{"a":"\t"}"#, "[1,]", "01", "1.", ".5", "[\"\\u+abc\"]", "{\"a\" 1}",
            ]
            let alphabet = Array(#"{}[],:"\ -+.eE0123456789abtrufnl/x"#.utf8) + [0x00, 0x09, 0x0A, 0xC3, 0xA9, 0xFF]
            var inputs: [[UInt8]] = []
            for _ in 0..<(4_000 * Self.scale) {
                var bytes = Array(random.pick(seeds).utf8)
                for _ in 0..<(1 + random.below(4)) {
                    let position = random.below(bytes.count + 1)
                    switch random.below(3) {
                    case 0: bytes.insert(random.pick(alphabet), at: position)
                    case 1 where position < bytes.count: bytes.remove(at: position)
                    default: if position < bytes.count { bytes[position] = random.pick(alphabet) }
                    }
                }
                inputs.append(bytes)
            }
            let verdicts = try Self.pythonVerdicts(inputs)
            #expect(verdicts.count == inputs.count)
            var differences: [String] = []
            for (index, bytes) in inputs.enumerated() where index < verdicts.count {
                let ours = (try? JSONValue.parse(Data(bytes))) != nil
                let theirs = verdicts[index] == "1"
                guard ours != theirs else { continue }
                let text = String(decoding: bytes, as: UTF8.self)
                // Known differences: Python turns 1e400 into inf and keeps lone surrogates; this
                // reader refuses both, on purpose.
                if theirs, text.range(of: #"[0-9][eE][+]?[0-9]{3}"#, options: .regularExpression) != nil { continue }
                if theirs, text.lowercased().contains("\\ud8") || text.lowercased().contains("\\udc") || text.lowercased().contains("\\udd")
                    || text.lowercased().contains("\\ude") || text.lowercased().contains("\\udf") || text.lowercased().contains("\\ud9")
                    || text.lowercased().contains("\\uda") || text.lowercased().contains("\\udb") { continue }
                differences.append("\(ours ? "accepted" : "rejected") \(bytes.map { String(format: "%02x", $0) }.joined()) \(text.debugDescription)")
            }
            #expect(differences.isEmpty, "seed \(Self.seed): \(differences.prefix(10).joined(separator: "\n"))")
        }
    }

    /// Python's `json` verdict on each input: "1" accepted, "0" refused, in order. Inputs go
    /// one per line in hex, each line ended by a newline, so an empty input (last or not) is a
    /// line of its own that Python reads.
    static func pythonVerdicts(_ inputs: [[UInt8]]) throws -> [Character] {
        let file = try Fixtures.file("json-inputs.txt", inputs.map { $0.map { String(format: "%02x", $0) }.joined() + "\n" }.joined())
        let script = """
            import json, sys
            def refuse(name): raise ValueError(name)
            out = []
            for line in open(sys.argv[1]):
                data = bytes.fromhex(line.strip())
                try:
                    json.loads(data.decode('utf-8'), parse_constant=refuse)
                    out.append('1')
                except Exception:
                    out.append('0')
            print(''.join(out))
            """
        let python = try ChildProcess.run("/usr/bin/env", ["python3", "-c", script, file.path])
        #expect(python.status == 0, "\(python.stderr)")
        return Array(python.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    @Test("fuzz harness: every input reaches Python, an empty one last too (scripts/fuzz --seed 1 lost it)")
    func harnessReadsEveryInput() throws {
        let verdicts = try Self.pythonVerdicts([Array("[1]".utf8), [], Array("{}".utf8), []])
        #expect(verdicts == ["1", "0", "1", "0"])
    }

    @Test("JSON: numbers and escapes follow RFC 8259 (what the differential run found: leading zeros, bare dots, signed \\u)")
    func jsonFindings() {
        for text in ["01", "-00e+1", "1.", ".5", "-0.e+1", "13.", "+1", "[\"\\u+abc\"]", "1e", "-", "[1e400]"] {
            #expect((try? JSONValue.parse(text)) == nil, "\(text)")
        }
        for text in ["0", "-0", "-0.5e+10", "10", "1E2", "[\"\\u00e9\"]"] {
            #expect((try? JSONValue.parse(text)) != nil, "\(text)")
        }
    }

    @Test("JSON: a repeated key keeps its last value, in its last position, in a small object or a large one; thousands of repeats leave one key")
    func jsonRepeatedKeys() throws {
        let object = try JSONValue.parse(#"{"a": 1, "b": 2, "a": 3, "c": {"a": 4, "a": 5}}"#)
        #expect(object.objectValue?.map(\.0) == ["b", "a", "c"])
        #expect(object["a"] == .number(3) && object["c"]?["a"] == .number(5) && object["c"]?.objectValue?.count == 1)
        let thrice = try JSONValue.parse(#"{"a": 1, "a": 2, "b": "é", "a": 3}"#)
        #expect(thrice.objectValue?.map(\.0) == ["b", "a"] && thrice["a"] == .number(3) && thrice["b"] == .string("é"))
        // 20 keys twice: repeats found one by one, then (past 16 keys) in a table.
        let wide = try JSONValue.parse("{" + (0..<40).map { "\"k\($0 % 20)\": \($0)" }.joined(separator: ",") + "}")
        #expect(wide.objectValue?.map(\.0) == (20..<40).map { "k\($0 % 20)" } && wide["k3"] == .number(23))
        let repeated = "{" + (0..<20_000).map { "\"k\($0 % 3)\": \($0)" }.joined(separator: ",") + "}"
        let parsed = try JSONValue.parse(repeated)
        #expect(parsed.objectValue?.map(\.0) == ["k2", "k0", "k1"] && parsed["k1"] == .number(19_999))
    }

    // MARK: The receiver, over a real socket

    @Test("I: the receiver answers or closes every malformed request, and goes on serving well-formed ones")
    func receiverRequests() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool {
            var random = Random(Self.seed &+ 3)
            var limits = LocalReceiver.Limits()
            limits.maxHeadBytes = 4_096
            limits.maxBodyBytes = 64 * 1024
            limits.idleTimeoutMs = 300
            limits.maxConnections = 8
            let receiver = try LocalReceiver(folder: makeTemporaryDirectory("fuzz-receiver"), limits: limits)
            defer { receiver.stop() }
            let body = "--b\r\nContent-Disposition: form-data; name=\"upload_file\"; filename=\"u.json\"\r\n\r\n{\"uuid\": \"\(UUID().uuidString.lowercased())\"}\r\n--b--\r\n"
            let valid = "POST /post HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
            let pieces = [
                "POST", "GET", " ", "/post", "HTTP/1.1", "HTTP/9", "\r\n", "\r\n\r\n", "Content-Length: ", "Transfer-Encoding: chunked\r\n",
                "-1\r\n", "ffffffffffffffffff\r\n", "7fffffffffffffff\r\n", "0\r\n\r\n", "5\r\nhello\r\n", "Expect: 100-continue\r\n",
                ":", "x", String(repeating: "H", count: 5_000), "\u{0}", "Content-Length: -5\r\n", "Content-Length: 99999999999999999999\r\n",
            ]
            let count = 150 * Self.scale
            for iteration in 0..<count {
                var request = Array(valid.utf8)
                if random.chance(60) {
                    request = Array((0..<(1 + random.below(8))).map { _ in random.pick(pieces) }.joined().utf8)
                } else {
                    for _ in 0..<(1 + random.below(5)) where !request.isEmpty {
                        let position = random.below(request.count)
                        switch random.below(3) {
                        case 0: request[position] = UInt8(random.below(256))
                        case 1: request.remove(at: position)
                        default: request.insert(contentsOf: Array(random.pick(pieces).utf8), at: position)
                        }
                    }
                }
                _ = Self.exchange(port: receiver.port, request, timeoutMs: 2_000)
                if iteration % 25 == 24 {
                    let answer = Self.exchange(port: receiver.port, Array(valid.utf8), timeoutMs: 5_000)
                    #expect(answer.hasPrefix("HTTP/1.1 200"), "seed \(Self.seed) after iteration \(iteration): \(answer.prefix(80))")
                }
            }
            let answer = Self.exchange(port: receiver.port, Array(valid.utf8), timeoutMs: 5_000)
            #expect(answer.hasPrefix("HTTP/1.1 200"), "seed \(Self.seed): \(answer.prefix(80))")
        }
    }

    @Test("I: a client trickling its request a byte at a time, each inside the idle timeout, is closed at the request deadline")
    func receiverRequestDeadline() async throws {
        try await offPool {
            var limits = LocalReceiver.Limits()
            limits.idleTimeoutMs = 2_000
            limits.requestDeadlineMs = 300
            let receiver = try LocalReceiver(folder: makeTemporaryDirectory("deadline-receiver"), limits: limits)
            defer { receiver.stop() }
            let fd = try #require(connectToLoopback(port: receiver.port))
            defer { close(fd) }
            // 400 bytes, one each 50 ms (20 s in all), never idle: the receiver must close first.
            let head = Array("POST /post HTTP/1.1\r\nX-Slow: \(String(repeating: "s", count: 400))".utf8)
            var sent = 0
            while sent < head.count {
                let result = head[sent...].withUnsafeBytes { send(fd, $0.baseAddress, 1, Int32(MSG_NOSIGNAL)) }
                if result <= 0 { break }
                sent += 1
                var poll = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                // The receiver closing shows up as readable (end of file) within the 50 ms pause.
                if Glibc.poll(&poll, 1, 50) > 0 {
                    var byte: UInt8 = 0
                    if recv(fd, &byte, 1, 0) <= 0 { break }
                }
            }
            #expect(sent < head.count, "closed after \(sent) of \(head.count) bytes")
        }
    }

    /// Sends `request`, half-closes, and returns what came back within `timeoutMs`.
    static func exchange(port: UInt16, _ request: [UInt8], timeoutMs: Int) -> String {
        guard let fd = connectToLoopback(port: port, timeoutMs: timeoutMs) else { return "" }
        defer { close(fd) }
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        shutdown(fd, Int32(SHUT_WR))
        var answer = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while answer.count < 65_536 {
            let count = recv(fd, &chunk, chunk.count, 0)
            guard count > 0 else { break }
            answer += chunk[..<count]
        }
        return String(decoding: answer, as: UTF8.self)
    }

    // MARK: The host table
}
