import Foundation
import Glibc
import Host
import HostStore
import HostSupport
import HostTestSupport
import Testing

/// The dialog of `reporthost report bug` (SPEC H-5, I-5) and interruption (H-15), through
/// the real executable.
@Suite struct DialogCommandTests {
    func script(_ text: String) throws -> String { try Fixtures.file("dialog.json", text).path }

    @Test("I-5: --dialog-script edits the fields and sends; absent keys keep their value")
    func scriptSends() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let path = try script(#"{"summary": "edited", "labels": ["ui", "crash"], "severity": 4}"#)
            let result = try ChildProcess.reporthost([
                "report", "bug", "--summary", "seeded", "--description", "kept", "--dialog-script", path, "--print",
            ])
            #expect(result.status == 0, "\(result.stderr)")
            let json = try JSONValue.parse(result.stdout)
            #expect(json["trigger"] == .string("dialog"))
            #expect(json["type"] == .string("bug"))
            #expect(json["summary"] == .string("edited"))
            #expect(json["description"] == .string("kept"))
            #expect(json["labels"] == .array([.string("ui"), .string("crash")]))
            #expect(json["severity"] == .number(4))
        }
    }

    @Test("I-5: action cancel exits 0 with nothing printed; H-5: no after-callbacks run")
    func scriptCancels() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let plugin = try Fixtures.plugin(
                "after-marker",
                source: fixtureHandler(
                    name: "marker", after: "on_after",
                    extra: "static void on_after(void *c, rh_report *r, bool t, rh_completion d) { (void)c; (void)r; (void)t; fprintf(stderr, \"AFTER-RAN\\n\"); d(); }"))
            let result = try ChildProcess.reporthost([
                "report", "bug", "--dialog-script", try script(#"{"action": "cancel"}"#), "--handler", plugin.path, "--print",
            ])
            #expect(result.status == 0)
            #expect(result.stdout.isEmpty)
            #expect(!result.stderr.contains("AFTER-RAN"))
        }
    }

    @Test("I-5: a script that is not such an object is a usage error (exit 2) naming the problem")
    func badScripts() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let cases: [(String, String)] = [
                (#"[1]"#, "expected an object"),
                (#"{"severity": 9}"#, "'severity'"),
                (#"{"severity": 0}"#, "'severity'"),
                (#"{"labels": "ui"}"#, "'labels'"),
                (#"{"labels": [1]}"#, "'labels'"),
                (#"{"summary": 3}"#, "'summary'"),
                (#"{"action": "maybe"}"#, "'action'"),
                (#"{"colour": "red"}"#, "'colour'"),
                ("not json", "invalid JSON"),
            ]
            for (text, named) in cases {
                let result = try ChildProcess.reporthost(["report", "bug", "--dialog-script", try script(text)])
                #expect(result.status == 2, "\(text)")
                #expect(result.stderr.hasPrefix("reporthost: error: --dialog-script"), "\(text): \(result.stderr)")
                #expect(result.stderr.contains(named), "\(text): \(result.stderr)")
            }
            let missing = try ChildProcess.reporthost(["report", "bug", "--dialog-script", "/nonexistent/d.json"])
            #expect(missing.status == 2 && missing.stderr.contains("/nonexistent/d.json"))
            let wrongKind = try ChildProcess.reporthost(["report", "error", "--dialog-script", try script("{}")])
            #expect(wrongKind.status == 2 && wrongKind.stderr.contains("bug reports"))
        }
    }

    @Test("I-4: --dialog without a terminal is a usage error (exit 2)")
    func dialogNeedsTerminal() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool {
            let result = try ChildProcess.reporthost(["report", "bug", "--dialog"])
            #expect(result.status == 2)
            #expect(result.stderr == "reporthost: error: --dialog needs a terminal on standard input and standard error\n")
        }
    }

    @Test("H-5: the terminal dialog works in a real pseudo-terminal: Enter keeps, typed values replace, send")
    func terminalDialog() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool {
            var master: Int32 = -1
            var slave: Int32 = -1
            #expect(openpty(&master, &slave, nil, nil, nil) == 0)
            let stdout = try ChildProcess.closeOnExecPair()
            defer { try? stdout.ours.close() }
            let process = try StartedChild.start(
                Products.reporthost.path, ["report", "bug", "--summary", "seeded", "--label", "a", "--dialog", "--print"],
                directory: makeTemporaryDirectory("cwd"), input: slave, output: stdout.child.fileDescriptor, errors: slave)
            close(slave)
            try stdout.child.close()
            let screen = PseudoTerminal(master: master)
            // Summary: Enter keeps; description: typed; labels: typed; severity: bad then good; send.
            for (prompt, answer) in [("Summary [seeded]: ", ""), ("Description []: ", "typed in the dialog"),
                                     ("Labels, comma-separated [a]: ", "ui, dialog"), ("Severity 1-5 [none]: ", "9"),
                                     ("Severity 1-5 [none]: ", "3"), ("Send or cancel [send]: ", "send")] {
                #expect(screen.read(until: prompt), "never saw \(prompt); screen: \(screen.text)")
                screen.write(answer + "\n")
            }
            let output = stdout.ours.readDataToEndOfFile()
            let ending = process.wait()
            close(master)
            #expect(ending == .exited(0))
            #expect(screen.text.contains("severity must be a number from 1 to 5"))
            let json = try JSONValue.parse(output)
            #expect(json["summary"] == .string("seeded"))
            #expect(json["description"] == .string("typed in the dialog"))
            #expect(json["labels"] == .array([.string("ui"), .string("dialog")]))
            #expect(json["severity"] == .number(3))
            #expect(json["trigger"] == .string("dialog"))
        }
    }

    @Test("H-15: SIGTERM during the chain skips the remaining calls, logs them, and the report is bundled and stored")
    func sigtermDuringChain() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool {
            let plugin = try Fixtures.plugin(
                "stuck-cli",
                source: fixtureHandler(
                    name: "stuck", before: "on_before", after: "on_after",
                    extra: """
                        static void on_before(void *c, rh_report *r, bool t, rh_completion d) {
                            (void)c; (void)t; (void)d; host->set_summary(r, "set before the signal");
                            fprintf(stderr, "STUCK-STARTED\\n"); fflush(stderr);
                        }
                        static void on_after(void *c, rh_report *r, bool t, rh_completion d) { (void)c; (void)r; (void)t; d(); }
                        """))
            let repository = makeTemporaryDirectory("sigterm").appendingPathComponent("repo")
            let stdout = try ChildProcess.closeOnExecPair()
            let stderr = try ChildProcess.closeOnExecPair()
            defer { [stdout, stderr].forEach { try? $0.ours.close() } }
            let process = try StartedChild.start(
                Products.reporthost.path, ["report", "error", "--handler", plugin.path, "--print", "--repository", repository.path],
                directory: makeTemporaryDirectory("cwd"), output: stdout.child.fileDescriptor, errors: stderr.child.fileDescriptor)
            [stdout.child, stderr.child].forEach { try? $0.close() }
            // Wait for the plugin to say it runs, then interrupt.
            var seen = Data()
            while !String(decoding: seen, as: UTF8.self).contains("STUCK-STARTED") {
                let chunk = stderr.ours.availableData
                if chunk.isEmpty { break }
                seen.append(chunk)
            }
            process.terminate()
            let output = stdout.ours.readDataToEndOfFile()
            #expect(process.wait() == .exited(0))
            let json = try JSONValue.parse(output)
            #expect(json["summary"] == .string("set before the signal"))
            let messages = json["internal_log"]?.arrayValue?.compactMap { $0["message"]?.stringValue } ?? []
            #expect(messages.contains("stuck.on_before_report_created skipped: the host is stopping"))
            #expect(messages.contains("stuck.on_after_report_created skipped: the host is stopping"))
            // Stored for a later launch to deliver, and the session stopped cleanly.
            let stored = try Repository.openForReading(folder: repository)?.records() ?? []
            #expect(stored.map(\.reportID) == [json["report_id"]?.stringValue ?? ""])
            #expect(stored.first?.state == .awaitingFirstAttempt)
        }
    }
}

/// The master side of a pseudo-terminal: what the program wrote, and typing into it.
final class PseudoTerminal {
    let master: Int32
    private(set) var bytes: [UInt8] = []
    private var consumed = 0

    init(master: Int32) { self.master = master }

    var text: String { String(decoding: bytes, as: UTF8.self) }

    /// Reads until `prompt` appears after what earlier calls consumed; false at end of output
    /// or after 30 s without it.
    func read(until prompt: String) -> Bool {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            let tail = String(decoding: bytes[consumed...], as: UTF8.self)
            if let range = tail.range(of: prompt) {
                consumed += tail[..<range.upperBound].utf8.count
                return true
            }
            var fds = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
            guard poll(&fds, 1, 1000) >= 0 else { return false }
            if fds.revents & Int16(POLLIN) != 0 {
                var buffer = [UInt8](repeating: 0, count: 4096)
                let count = Glibc.read(master, &buffer, buffer.count)
                if count <= 0 { return false }
                bytes.append(contentsOf: buffer[..<count])
            } else if fds.revents & Int16(POLLHUP) != 0 {
                return false
            }
        }
        return false
    }

    func write(_ text: String) {
        var data = Array(text.utf8)
        _ = Glibc.write(master, &data, data.count)
    }
}
