import Foundation
import Glibc
@testable import Host
@testable import HostCapture
@testable import HostModel
@testable import HostSupport
@testable import HostDelivery
@testable import HostPlugins
@testable import HostRecovery
@testable import HostStore
import Receiver
import HostTestSupport
import Testing

/// Ordinary use through the real executable: configuration mistakes refuse and destroy
/// nothing, a second process never waits or loses its report, the command line says what it
/// takes.
@Suite struct FrontDoorTests {
    let folder = makeTemporaryDirectory("front-door")

    func write(_ text: String, _ name: String = "c-\(UUID().uuidString).json") throws -> String {
        let file = folder.appendingPathComponent(name)
        try text.write(to: file, atomically: true, encoding: .utf8)
        return file.path
    }

    func records(_ repository: String) throws -> [ReportRecord] {
        try Repository.openForReading(folder: URL(fileURLWithPath: repository))?.records() ?? []
    }

    @Test("I-2, D-9: a submission.url that does not parse, is not http(s), has port 0 or is plain http off loopback is a configuration error before anything is opened; stored reports are untouched")
    func badSubmissionURLRefuses() async throws {
        try await offPool { [self] in
            let repository = folder.appendingPathComponent("repo").path
            let stored = try ChildProcess.reporthost(["report", "error", "--summary", "kept", "--repository", repository])
            #expect(stored.status == 0, "\(stored.stderr)")
            for url in ["htps://127.0.0.1/post", "http://example.com/post?token=secret", "http://127.evil.example/post", "not a url",
                        "http://127.0.0.1:0/post?token=secret"] {
                let config = try write(#"{"submission": {"url": "\#(url)"}}"#)
                for command in [["launch"], ["report", "error"], ["crash"], ["run"]] {
                    let program = command == ["run"] ? ["--", "/bin/true"] : []
                    let result = try ChildProcess.reporthost(command + ["--config", config, "--repository", repository] + program)
                    #expect(result.status == 2, "\(command) \(url): \(result.stderr)")
                    #expect(result.stderr.hasPrefix("reporthost: error: config \(config): key 'submission.url'"), "\(result.stderr)")
                    #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
                    #expect(!result.stderr.contains("secret"), "the token never reaches the message")
                }
                let nothing = folder.appendingPathComponent("never-\(UUID().uuidString)").path
                let refused = try ChildProcess.reporthost(["report", "bug", "--config", config, "--repository", nothing])
                #expect(refused.status == 2)
                #expect(!FileManager.default.fileExists(atPath: nothing), "nothing is opened or created")
            }
            let after = try records(repository)
            #expect(after.count == 1)
            #expect(after.first?.state == .awaitingFirstAttempt)
            #expect(after.first?.document.content.summary == "kept")
        }
    }

    @Test("I: status at scale: a summary (by state and type, oldest waiting, next attempt, held) and the newest 20 records; --limit N, --all, --json keeps every record")
    func statusAtScale() async throws {
        try await offPool { [self] in
            let repository = folder.appendingPathComponent("many").path
            let setup = try Repository.open(folder: URL(fileURLWithPath: repository))
            let triggers: [Trigger] = [.crash, .logError, .dialog]
            var ids: [String] = []
            for index in 0..<50 {
                let document = ReportDocument(
                    id: UUID().uuidString.lowercased(), trigger: triggers[index % 3], content: ReportContent(), internalLog: [],
                    createdAt: Date(timeIntervalSince1970: 1_700_000_000 + Double(index)))
                let row = try setup.seedRecord(document, state: index < 40 ? .terminal : .awaitingFirstAttempt)
                if index == 45 { try setup.retryLater(row, reason: "HTTP 503", at: Date(timeIntervalSince1970: 1_800_000_000)) }
                if index == 46 { try setup.hold(row, .configuration("no url")) }
                ids.append(document.id)
            }
            let text = try ChildProcess.reporthost(["status", "--repository", repository])
            #expect(text.status == 0, "\(text.stderr)")
            for line in [
                "  by state: awaiting_first_attempt 8, retry 1, terminal 40, held 1", "  by type: crash 17, error 17, bug 16",
                "  oldest waiting: \(ids[40]) (awaiting_first_attempt) since", "  next attempt: 2027-01-15T08:00:00Z",
                "  held: 1 (configuration: no url)", "newest 20 of 50 (id, trigger, state, attempts, size, created; status --all lists every record, --limit N the newest N):",
            ] {
                #expect(text.stdout.contains(line), "\(line) in \(text.stdout)")
            }
            func listed(_ output: String) -> [String] { ids.filter { output.contains("  \($0)  ") } }
            #expect(listed(text.stdout) == Array(ids.suffix(20)))
            #expect(listed(try ChildProcess.reporthost(["status", "--limit", "5", "--repository", repository]).stdout) == Array(ids.suffix(5)))
            #expect(listed(try ChildProcess.reporthost(["status", "--all", "--repository", repository]).stdout) == ids)
            let json = try JSONValue.parse(try ChildProcess.reporthost(["status", "--json", "--repository", repository]).stdout)
            #expect(json["records"]?.arrayValue?.count == 50, "--json lists every record unless --limit says otherwise")
            #expect(json["totals"]?["by_type"]?["crash"]?.intValue == 17)
            #expect(json["totals"]?["oldest_waiting"]?["report_id"]?.stringValue == ids[40])
            let limited = try JSONValue.parse(try ChildProcess.reporthost(["status", "--json", "--limit", "3", "--repository", repository]).stdout)
            #expect(limited["records"]?.arrayValue?.compactMap { $0["report_id"]?.stringValue } == Array(ids.suffix(3)))
            for bad in [["--limit", "-1"], ["--limit", "x"], ["--all", "--limit", "3"]] {
                #expect(try ChildProcess.reporthost(["status", "--repository", repository] + bad).status == 2, "\(bad)")
            }
        }
    }

    @Test("D-9: a loopback submission never goes through a proxy from the environment (http_proxy, all_proxy, whatever no_proxy says): the proxy sees nothing, the server gets the report")
    func loopbackIgnoresProxy() async throws {
        try await offPool { [self] in
            // A "proxy" that answers 200 to whatever reaches it: taken for the server, it would
            // make the report terminal although nothing was delivered.
            let proxy = try RawHTTPServer(.respond("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
            defer { proxy.stop() }
            let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got-proxy"))
            defer { receiver.stop() }
            let config = try write(#"{"submission": {"url": "\#(receiver.url)"}}"#)
            let proxyURL = "http://127.0.0.1:\(proxy.port)"
            let environment = [
                "http_proxy": proxyURL, "HTTP_PROXY": proxyURL, "all_proxy": proxyURL, "ALL_PROXY": proxyURL, "no_proxy": "", "NO_PROXY": "",
            ]
            let result = try ChildProcess.reporthost(
                ["report", "error", "--summary", "direct", "--config", config, "--repository", folder.appendingPathComponent("proxied").path],
                environment: environment)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(proxy.requests == 0, "the proxy saw the loopback submission")
            #expect(receiver.received.count == 1)
        }
    }

    @Test("I-7: everything the host creates is owner-only whatever the umask (folders 0700, files 0600); a primary tightens an older repository once, with one warning; status changes nothing")
    func privateFiles() async throws {
        try await offPool { [self] in
            let repository = folder.appendingPathComponent("private").path
            let attachment = try write("secret notes", "notes.txt")
            let log = folder.appendingPathComponent("host.log").path
            let config = try write(#"{"logging": [{"type": "file", "path": "\#(log)", "level": "debug"}]}"#)
            let command = "umask 022; exec '\(Products.reporthost.path)' report error --summary private --attach '\(attachment)' --config '\(config)' --repository '\(repository)'"
            let result = try ChildProcess.run("/bin/sh", ["-c", command], directory: folder)
            #expect(result.status == 0, "\(result.stderr)")
            let created = try modes(under: repository) + [(log, try mode(of: log))]
            #expect(created.count >= 6, "\(created)")
            for (path, mode) in created {
                #expect(mode & 0o077 == 0, "\(path) is \(String(mode, radix: 8))")
            }

            // An older repository made readable by others: status only reads; a primary tightens it.
            chmod(repository, 0o755)
            chmod(repository + "/reporthost.sqlite", 0o644)
            let status = try ChildProcess.reporthost(["status", "--repository", repository])
            #expect(status.status == 0)
            #expect(try mode(of: repository + "/reporthost.sqlite") == 0o644, "status changed a mode")
            let launched = try ChildProcess.reporthost(["launch", "--repository", repository])
            #expect(launched.stderr.components(separatedBy: "made owner-only").count == 2, "\(launched.stderr)")
            #expect(try mode(of: repository) == 0o700 && mode(of: repository + "/reporthost.sqlite") == 0o600)
        }
    }

    func mode(of path: String) throws -> mode_t {
        var status = stat()
        guard lstat(path, &status) == 0 else { throw HostError.io(path: path, reason: "cannot stat") }
        return status.st_mode & 0o777
    }

    /// Every file and folder under `root` with its permission bits, `root` included.
    func modes(under root: String) throws -> [(String, mode_t)] {
        var found = [(root, try mode(of: root))]
        let walk = FileManager.default.enumerator(atPath: root)
        while let name = walk?.nextObject() as? String { found.append((root + "/" + name, try mode(of: root + "/" + name))) }
        return found
    }

    @Test("D-12: each eviction pass says at info how many records, how many bytes and from which states; status counts them")
    func evictionIsSaid() async throws {
        try await offPool { [self] in
            let repository = folder.appendingPathComponent("evicting").path
            let unlimited = try Repository.open(folder: URL(fileURLWithPath: repository))
            for (index, state) in [RecordState.terminal, .terminal, .retry].enumerated() {
                var content = ReportContent()
                content.summary = "old \(index)"
                let document = ReportDocument(
                    id: UUID().uuidString.lowercased(), trigger: .logError, content: content, internalLog: [],
                    createdAt: Date(timeIntervalSince1970: 1_000 + Double(index)))
                try unlimited.seedRecord(document, state: state)
            }
            let bytes = try unlimited.records().reduce(0) { $0 + $1.bytes }
            let config = try write(#"{"storage": {"maxRecordCount": 1}}"#)
            let result = try ChildProcess.reporthost(["report", "error", "--config", config, "--repository", repository])
            #expect(result.status == 0, "\(result.stderr)")
            let lines = result.stderr.split(separator: "\n").filter { $0.contains("evicted") }
            #expect(lines.count == 1, "\(result.stderr)")
            #expect(lines.first?.contains("info") == true)
            #expect(lines.first?.contains("evicted 3 record(s), \(bytes) bytes (2 terminal, 1 retry)") == true, "\(result.stderr)")
            let status = try ChildProcess.reporthost(["status", "--json", "--repository", repository])
            let evicted = try JSONValue.parse(status.stdout)["totals"]?["evicted"]
            #expect(evicted?["records"]?.intValue == 3)
            #expect(evicted?["bytes"]?.intValue == bytes)
            let text = try ChildProcess.reporthost(["status", "--repository", repository])
            #expect(text.stdout.contains("3 record(s) (\(bytes) bytes) evicted by the storage limits"), "\(text.stdout)")
        }
    }

    @Test("I-2, D-16: while another process holds the repository, report, crash and run run as secondaries: stored at once, report's own initial attempt made, run exits with the program's status; launch names the holder and exits 0")
    func secondaryEverywhere() async throws {
        try await offPool { [self] in
            let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got"))
            defer { receiver.stop() }
            let repository = folder.appendingPathComponent("shared").path
            let config = try write(#"{"submission": {"url": "\#(receiver.url)", "timeoutMs": 3000}, "reportsPerMin": 0}"#)
            // An older retry the primary owns: a secondary never replays it.
            let setup = try Repository.open(folder: URL(fileURLWithPath: repository))
            var content = ReportContent()
            content.summary = "the primary's retry"
            let retry = ReportDocument(id: UUID().uuidString.lowercased(), trigger: .logError, content: content, internalLog: [], createdAt: Date())
            let retryRow = try setup.seedRecord(retry, state: .retry)
            try setup.retryLater(retryRow, reason: "HTTP 503", at: Date(timeIntervalSince1970: 0))
            // This test process is the primary: it holds the lock and names itself in it.
            let lockPath = repository + "/reporthost.lock"
            let fd = open(lockPath, O_RDWR | O_CREAT, 0o600)
            #expect(fd >= 0)
            defer { close(fd) }
            #expect(flock(fd, LOCK_EX) == 0)
            let pid = Array("\(getpid())\n".utf8)
            _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }

            let reported = try ChildProcess.reporthost(
                ["report", "error", "--summary", "from a secondary", "--print", "--config", config, "--repository", repository])
            #expect(reported.status == 0, "\(reported.stderr)")
            let ownID = try JSONValue.parse(reported.stdout)["report_id"]?.stringValue
            #expect(receiver.received.map(\.uuid) == [ownID], "its own initial attempt, never the primary's retry")

            let crashed = try ChildProcess.reporthost(["crash", "--repository", repository])
            #expect(crashed.signal == SIGSEGV, "\(crashed.stderr)")
            let ran = try ChildProcess.reporthost(["run", "--repository", repository, "--", "/bin/sh", "-c", "exit 7"])
            #expect(ran.status == 7, "\(ran.stderr)")
            let killed = try ChildProcess.reporthost(["run", "--repository", repository, "--", "/bin/sh", "-c", "kill -KILL $$"])
            #expect(killed.status == 128 + SIGKILL, "\(killed.stderr)")

            let launched = try ChildProcess.reporthost(["launch", "--config", config, "--repository", repository])
            #expect(launched.status == 0, "\(launched.stderr)")
            #expect(launched.stderr.contains("process \(getpid()) holds"), "\(launched.stderr)")
            #expect(receiver.received.count == 1, "a secondary launch delivers nothing")

            let stored = try records(repository)
            #expect(stored.contains { $0.reportID == ownID && $0.state == .terminal })
            #expect(stored.contains { $0.trigger == .abnormalExit && $0.document.content.summary?.contains("SIGKILL") == true })
            #expect(stored.first { $0.rowID == retryRow }?.attempts == 0, "the retry was left to the primary")
            let crashFiles = try FileManager.default.contentsOfDirectory(atPath: repository + "/crashes").filter { $0.hasSuffix(".crash") }
            #expect(crashFiles.count == 1, "the secondary's crash file waits for the primary")

            // Once the lock is free, the next launch recovers and delivers the rest.
            flock(fd, LOCK_UN)
            let primary = try ChildProcess.reporthost(["launch", "--config", config, "--repository", repository])
            #expect(primary.status == 0, "\(primary.stderr)")
            let after = try records(repository)
            #expect(after.allSatisfy { $0.state == .terminal }, "\(after.map(\.state))")
        }
    }

    @Test("D-1: no process outlives a crash: with SWIFT_BACKTRACE unset, a crashing reporthost's output pipe closes when it dies and no swift-backtrace is left")
    func noProcessOutlivesACrash() async throws {
        try await offPool { [self] in
            for signal in ["SEGV", "ABRT", "BUS"] {
                #expect(ChildProcess.environment["SWIFT_BACKTRACE"] == nil)
                let output = try ChildProcess.closeOnExecPair()
                defer { try? output.ours.close() }
                let before = backtracers()
                let process = try StartedChild.start(
                    Products.reporthost.path, ["crash", "--signal", signal, "--repository", folder.appendingPathComponent("crashing").path],
                    output: output.child.fileDescriptor, errors: output.child.fileDescriptor)
                try output.child.close()
                if case .signalled = process.wait() {} else { Issue.record("SIG\(signal): reporthost crash did not end by a signal") }
                // `reporthost crash 2>&1 | cat`: the reader must see the end. Bounded: a holder
                // of the pipe fails the test instead of hanging it.
                let reader = output.ours.fileDescriptor
                var ended = false
                var buffer = [UInt8](repeating: 0, count: 4096)
                for _ in 0..<200 where !ended {
                    var poller = pollfd(fd: reader, events: Int16(POLLIN), revents: 0)
                    guard poll(&poller, 1, 100) > 0 else { continue }
                    ended = read(reader, &buffer, buffer.count) == 0
                }
                #expect(ended, "SIG\(signal): the crashed process's output stayed open")
                let left = backtracers().subtracting(before)
                #expect(left.isEmpty, "SIG\(signal): swift-backtrace left running: \(left)")
            }
        }
    }

    /// The pids of the swift-backtrace processes running now (it is started with the crash's
    /// address in the crashed process, not its pid: the new ones are the crash's).
    func backtracers() -> Set<String> {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return Set(entries.filter { $0.allSatisfy(\.isNumber) }.filter { entry in
            guard let handle = FileHandle(forReadingAtPath: "/proc/\(entry)/cmdline"), let data = try? handle.readToEnd() else {
                return false
            }
            return String(decoding: data, as: UTF8.self).split(separator: "\0").first?.hasSuffix("swift-backtrace") == true
        })
    }

    @Test("I: --help lists every command and its options, COMMAND --help and --version work, a stray word is an error, status on a missing folder exits 1 naming it, errors are plain words")
    func commandLine() async throws {
        try await offPool { [self] in
            let help = try ChildProcess.reporthost(["--help"])
            #expect(help.status == 0)
            let expected: [String: [String]] = [
                "report": ["--summary", "--description", "--email", "--severity", "--label", "--attribute", "--attach", "--dialog",
                           "--dialog-script", "--terminating", "--print"],
                "launch": ["--watch"], "status": ["--json", "--all", "--limit"], "show": ["--json"], "crash": ["--signal", "--attach"],
                "run": ["--attach-output"], "receive": ["--port", "--dir", "--respond"],
                "check": ["--slot", "--json", "--include", "--exclude", "--seed", "--in-process", "--list"],
                "quarantine": ["--clear", "--json"], "demo": ["--repository"],
            ]
            for (command, options) in expected {
                #expect(help.stdout.contains("\n  \(command) "), "--help lists \(command)")
                let own = try ChildProcess.reporthost([command, "--help"])
                #expect(own.status == 0, "\(command) --help: \(own.stderr)")
                #expect(own.stdout.hasPrefix("usage: reporthost \(command)"), "\(own.stdout)")
                for option in options {
                    #expect(help.stdout.contains(option) && own.stdout.contains(option), "\(command) \(option)")
                }
            }
            for option in ["--config", "--repository", "--wrapper", "--handler", "--delegate", "--log-level", "--version"] {
                #expect(help.stdout.contains(option), "\(option)")
            }
            let version = try ChildProcess.reporthost(["--version"])
            #expect(version.status == 0)
            #expect(version.stdout.hasPrefix("reporthost \(Runtime.version) "), "\(version.stdout) \(version.stderr)")

            // --log-level is checked by every command that takes it, whether it logs or not.
            for words in [["status"], ["show", "latest"], ["quarantine"], ["check", "--list"], ["receive"]] {
                let bad = try ChildProcess.reporthost(words + ["--log-level", "bogus"])
                #expect(bad.status == 2 && bad.stderr == "reporthost: error: --log-level 'bogus' is not one of debug, info, warn, error\n", "\(words): \(bad.stderr)")
            }
            for words in [["launch", "extra"], ["status", "extra"], ["crash", "now"], ["report", "error", "extra"]] {
                let stray = try ChildProcess.reporthost(words)
                #expect(stray.status == 2, "\(words): \(stray.stderr)")
                #expect(stray.stderr.hasPrefix("reporthost: error: '\(words[0])' takes no word '\(words.last!)'")
                    || stray.stderr.contains("exactly one kind"), "\(stray.stderr)")
            }
            let missing = folder.appendingPathComponent("misspelled").path
            for command in ["status", "show"] {
                let result = try ChildProcess.reporthost([command] + (command == "show" ? ["latest"] : []) + ["--repository", missing])
                #expect(result.status == 1, "\(command): \(result.stdout)")
                #expect(result.stderr == "reporthost: error: \(missing): no such repository folder\n", "\(result.stderr)")
                #expect(!FileManager.default.fileExists(atPath: missing))
            }
            let file = try write("not a folder", "plain-file")
            let notFolder = try ChildProcess.reporthost(["report", "error", "--repository", file + "/repo"])
            #expect(notFolder.status == 1)
            #expect(notFolder.stderr == "reporthost: error: \(file)/repo: cannot create the repository folder (not a directory: \(file))\n", "\(notFolder.stderr)")
        }
    }

    @Test("I: reporthost without the capture library beside it (a plain swift build): run says in one line what to build and starts nothing")
    func runWithoutCaptureLibrary() async throws {
        try await offPool { [self] in
            let alone = folder.appendingPathComponent("alone")
            try FileManager.default.createDirectory(at: alone, withIntermediateDirectories: true)
            // Copied by cp, never opened for writing here: a child another test spawns in the
            // meantime would inherit such a descriptor until its exec, and exec of the copy
            // would fail with ETXTBSY.
            let copy = alone.appendingPathComponent("reporthost")
            let copied = try ChildProcess.run("/bin/cp", [Products.reporthost.path, copy.path])
            #expect(copied.status == 0, "\(copied.stderr)")
            let marker = folder.appendingPathComponent("started").path
            let result = try ChildProcess.run(copy.path, ["run", "--repository", folder.appendingPathComponent("repo").path, "--", "/bin/touch", marker], directory: folder)
            #expect(result.status == 1)
            #expect(result.stderr == "reporthost: error: \(alone.path)/libreporthost-capture.so: the capture library is missing beside reporthost (build every product: scripts/build, or install them: scripts/install)\n", "\(result.stderr)")
            #expect(!FileManager.default.fileExists(atPath: marker), "the program was not started")
        }
    }

    @Test("I: show prints a stored report as a person reads it, and --json its document with its crash payload")
    func showAReport() async throws {
        try await offPool { [self] in
            let repository = folder.appendingPathComponent("shown").path
            let raised = try ChildProcess.reporthost(
                ["report", "bug", "--summary", "it broke", "--label", "ui", "--attribute", "k=v", "--print", "--repository", repository])
            let id = try #require(try JSONValue.parse(raised.stdout)["report_id"]?.stringValue)
            let shown = try ChildProcess.reporthost(["show", id, "--repository", repository])
            #expect(shown.status == 0, "\(shown.stderr)")
            for line in ["report \(id)", "  bug, trigger upload", "state awaiting_first_attempt, attempts 0", "summary: it broke", "labels: ui", "  k = v"] {
                #expect(shown.stdout.contains(line), "\(line) in \(shown.stdout)")
            }
            _ = try ChildProcess.reporthost(["crash", "--repository", repository])
            _ = try ChildProcess.reporthost(["launch", "--repository", repository])
            let crash = try ChildProcess.reporthost(["show", "latest", "--repository", repository])
            #expect(crash.stdout.contains("crash: SIGSEGV (SEGV_MAPERR) at 0x"), "\(crash.stdout)")
            // Symbolicated at recovery: the C function that faulted, then the Swift callers, demangled.
            #expect(crash.stdout.contains("  #0 rh_crash_now "), "\(crash.stdout)")
            #expect(crash.stdout.contains("reporthost.CrashCommand.run("), "\(crash.stdout)")
            let json = try JSONValue.parse(try ChildProcess.reporthost(["show", "latest", "--json", "--repository", repository]).stdout)
            #expect(json["trigger"]?.stringValue == "crash")
            #expect(json["crash"]?["signal_name"]?.stringValue == "SEGV")
            let unknown = try ChildProcess.reporthost(["show", "00000000-0000-0000-0000-000000000000", "--repository", repository])
            #expect(unknown.status == 1 && unknown.stderr.contains("no report 00000000-0000-0000-0000-000000000000 is stored"))
        }
    }
}
