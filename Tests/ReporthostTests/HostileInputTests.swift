import Foundation
import Glibc
import Host
import HostRecovery
import HostStore
import HostSupport
import HostTestSupport
import Receiver
import Testing

/// Input from outside the process never crashes, hangs or bricks the host (SPEC D-1, D-9,
/// D-13, I-4): crash files left by a dying process, a hostile server, a closed or full
/// stderr, damaged rows. Each case here ended the host before it was fixed.
@Suite struct HostileInputTests {
    let fixture = CommandFixture("hostile")
    var folder: URL { fixture.folder }
    var repository: String { fixture.repository }
    var crashes: URL { folder.appendingPathComponent("repo/crashes") }

    /// Runs `reporthost`, killed after `limitSeconds` (a hang fails the test, never the suite).
    @discardableResult
    func run(_ arguments: [String], limitSeconds: Int = 60) throws -> ChildProcess.Result {
        try fixture.run(arguments, limitSeconds: limitSeconds)
    }

    func status() throws -> JSONValue { try fixture.status() }

    func config(_ url: String, timeoutMs: Int = 3_000) throws -> String { try fixture.configuration(url: url, timeoutMs: timeoutMs) }

    /// Damages the repository's database behind the host's back (Python's sqlite3).
    func damage(_ sql: String) throws {
        let database = folder.appendingPathComponent("repo/reporthost.sqlite").path
        let result = try ChildProcess.run("/usr/bin/env", [
            "python3", "-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(sys.argv[2]); c.commit()", database, sql,
        ])
        #expect(result.status == 0, "\(result.stderr)")
    }

    /// A repository with its folders, and a crash file holding `lines`.
    func crashFile(_ lines: [String]) throws {
        #expect(try run(["launch"]).status == 0)
        let text = (["reporthost-crash 1", "session 00000000-0000-0000-0000-000000000000", "signal 11"] + lines + ["end"])
            .joined(separator: "\n") + "\n"
        try text.write(to: crashes.appendingPathComponent("hostile-\(UUID().uuidString).crash"), atomically: true, encoding: .utf8)
    }

    /// Registers `paths` as the crash attachments of the session `crashFile` writes, as
    /// `crash --attach` does for its own.
    func register(_ paths: [String]) throws {
        let database = try Repository.open(folder: URL(fileURLWithPath: repository))
        for path in paths { try database.registerCrashAttachment(session: "00000000-0000-0000-0000-000000000000", path: path) }
    }

    @Test("D-3: an attachment line copies only a file the crashed session registered, while it is that file: a planted line, or a file replaced since, copies nothing")
    func plantedAttachmentLines() async throws {
        try await offPool { [self] in
            let secret = folder.appendingPathComponent("secret.txt")
            try "do not send".write(to: secret, atomically: true, encoding: .utf8)
            chmod(secret.path, 0o600)
            let replaced = folder.appendingPathComponent("replaced.log")
            try "registered".write(to: replaced, atomically: true, encoding: .utf8)
            let kept = folder.appendingPathComponent("kept.log")
            try "registered and unchanged, grown since".write(to: kept, atomically: true, encoding: .utf8)
            try crashFile(["time 1700000000", "attachment \(secret.path)", "attachment \(replaced.path)", "attachment \(kept.path)"])
            try register([replaced.path, kept.path])
            // Another file under the registered name: the registered one is moved away first
            // (kept, so its inode cannot be reused by the new file).
            try FileManager.default.moveItem(at: replaced, to: folder.appendingPathComponent("replaced.old"))
            try "swapped in".write(to: replaced, atomically: false, encoding: .utf8)
            #expect(try run(["launch"]).status == 0)
            let database = try #require(try Repository.openForReading(folder: URL(fileURLWithPath: repository)))
            let record = try #require(try database.records().first { $0.trigger == .crash })
            #expect(try database.attachments(of: record.rowID).map(\.name) == ["kept.log"])
            let notes = record.document.internalLog.map(\.message)
            #expect(notes.contains("attachment secret.txt not read: the crashed session did not register it"), "\(notes)")
            #expect(notes.contains("attachment replaced.log not read: it is another file now"), "\(notes)")
        }
    }

    @Test("I-4, D-1: a disk that cannot hold the write-ahead log's preallocation (a file size limit) costs nothing: the log is cut back and reports are stored")
    func logPreallocationRefused() async throws {
        try await offPool { [self] in
            // 2,000 blocks of 512 or 1,024 bytes: room for the database and a small log, not
            // for the log's 4 MB. SIGXFSZ ignored, as a write past the limit then fails EFBIG.
            let limited = "trap '' XFSZ; ulimit -f 2000; exec \"$0\" \"$@\""
            for summary in ["first", "second"] {
                let result = try ChildProcess.run(
                    "/bin/sh", ["-c", limited, Products.reporthost.path, "report", "error", "--summary", summary, "--repository", repository],
                    directory: folder)
                #expect(result.status == 0, "\(result.stderr)")
            }
            let log = folder.appendingPathComponent("repo/reporthost.sqlite-wal").path
            let size = try #require(try FileManager.default.attributesOfItem(atPath: log)[.size] as? Int)
            // Cut back to what the log held (the frames of a few commits), not left at the limit.
            #expect(size < 512_000, "cut back: \(size) bytes")
            let stored = try #require(try Repository.openForReading(folder: folder.appendingPathComponent("repo")))
            let summaries = try stored.records().compactMap(\.document.content.summary)
            #expect(summaries.sorted() == ["first", "second"], "\(summaries)")
            // Without the limit the log is extended to its full size, and kept after the process ends.
            #expect(try run(["report", "error"]).status == 0)
            #expect(try FileManager.default.attributesOfItem(atPath: log)[.size] as? Int == Repository.logBytes)
        }
    }

    @Test("I-7: a clean stop starts a long write-ahead log over: the next process reads back about a hundred frames at most, however many reports came before")
    func logStartsOverAtStop() async throws {
        try await offPool { [self] in
            let count = 30
            for index in 0..<count { #expect(try run(["report", "error", "--summary", "r\(index)"]).status == 0) }
            let log = try Data(contentsOf: folder.appendingPathComponent("repo/reporthost.sqlite-wal"))
            #expect(log.count == Repository.logBytes, "kept at its preallocated size")
            // Frames a process opening the repository reads back: from the header on, while
            // a frame carries the header's salt (SQLite's recovery also checks checksums).
            func word(_ offset: Int) -> UInt32 { log[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) } }
            let pageSize = Int(word(8))
            var frames = 0
            while 32 + (frames + 1) * (24 + pageSize) <= log.count {
                let frame = 32 + frames * (24 + pageSize)
                guard word(frame + 8) == word(16) && word(frame + 12) == word(20) else { break }
                frames += 1
            }
            // Each process writes about ten frames: without starting over, 30 leave some 300.
            // With it, the log starts over once it holds 100: what is left is below that plus
            // one process's frames.
            #expect(pageSize == 4_096 && (1..<130).contains(frames), "\(frames) frames to read back")
            let stored = try #require(try Repository.openForReading(folder: folder.appendingPathComponent("repo")))
            #expect(try stored.records().compactMap(\.document.content.summary).sorted() == (0..<count).map { "r\($0)" }.sorted())
        }
    }

    @Test("D-1, D-13: a crash file with a far-future time never bricks the repository; the report gets a plausible time")
    func farFutureTime() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool { [self] in
            try crashFile(["time 99999999999", "time 9300000000000000"])
            let launched = try run(["launch"])
            #expect(launched.status == 0, "\(launched.stderr)")
            for _ in 0..<2 {
                #expect(try run(["report", "error"]).status == 0)
                #expect(try run(["launch"]).status == 0)
            }
            let records = try status()["records"]?.arrayValue ?? []
            #expect(records.count == 3)
            let crash = try #require(records.first { $0["trigger"] == .string("crash") })
            let created = try #require(crash["created_at"]?.stringValue.flatMap(ReportDocument.parseTimestamp))
            #expect(abs(created.timeIntervalSinceNow) < 86_400 * 2)
            #expect(try FileManager.default.contentsOfDirectory(atPath: crashes.path).isEmpty)
        }
    }

    @Test("D-13: one damaged row is skipped and reported by status; every other record is still handled")
    func damagedRow() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool { [self] in
            #expect(try run(["report", "bug", "--summary", "first"]).status == 0)
            try damage("UPDATE reports SET document='{not json'")
            let report = try run(["report", "error", "--summary", "second"])
            #expect(report.status == 0, "\(report.stderr)")
            #expect(try run(["launch"]).status == 0)
            let document = try status()
            #expect(document["records"]?.arrayValue?.count == 1)
            #expect(document["unreadable_records"]?.arrayValue?.count == 1)
            let text = try run(["status"])
            #expect(text.status == 0 && text.stdout.contains("unreadable, skipped"))
        }
    }

    @Test("D-1, D-3: an attachment line naming a FIFO or a device is omitted at once, never read whole or waited on")
    func attachmentIsAFifoOrADevice() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool { [self] in
            let fifo = folder.appendingPathComponent("pipe").path
            #expect(mkfifo(fifo, 0o600) == 0)
            try crashFile(["time 1700000000", "attachment \(fifo)", "attachment /dev/zero", "attachment /dev/urandom"])
            try register([fifo, "/dev/zero", "/dev/urandom"])
            let launched = try run(["launch"], limitSeconds: 30)
            #expect(launched.status == 0, "\(launched.stderr)")
            let database = try #require(try Repository.openForReading(folder: URL(fileURLWithPath: repository)))
            let record = try #require(try database.records().first)
            #expect(record.document.internalLog.filter { $0.message.contains("not a regular file") }.count == 3)
        }
    }

    @Test("D-1: a value written into a crash file (an attribute holding a CR) cannot add a line: no file it names is copied into the report")
    func crashFileValuesCannotAddLines() async throws {
        try await offPool { [self] in
            let secret = folder.appendingPathComponent("secret.txt")
            try "do not send".write(to: secret, atomically: true, encoding: .utf8)
            let config = folder.appendingPathComponent("steer.json")
            let value = "x\rattachment \(secret.path)\rz"
            try JSONValue.object([("attributes", .object([("steer", .string(value))]))]).serialized().write(to: config, atomically: true, encoding: .utf8)
            let crashed = try run(["crash", "--config", config.path])
            #expect(crashed.signal == SIGSEGV, "\(crashed.stderr)")
            #expect(try run(["launch", "--config", config.path]).status == 0)
            let record = try #require(try Repository.openForReading(folder: URL(fileURLWithPath: repository))?.records().first { $0.trigger == .crash })
            #expect(record.document.content.attributes["steer"] == value, "the value comes back whole")
            #expect(record.document.content.attachments.isEmpty, "\(record.document.content.attachments.map(\.name))")
        }
    }

    @Test("D-1: files in crashes/ that cannot be read (garbage, a FIFO, over 4 MB) are kept aside in crashes/rejected/ and reported once")
    func rejectedCrashFiles() async throws {
        try await offPool { [self] in
            #expect(try run(["launch"]).status == 0)
            try Data([0xde, 0xad, 0xbe, 0xef, 0x0a]).write(to: crashes.appendingPathComponent("garbage.crash"))
            #expect(mkfifo(crashes.appendingPathComponent("pipe.crash").path, 0o600) == 0)
            try Data(repeating: 0x61, count: CrashFile.maxBytes + 1).write(to: crashes.appendingPathComponent("huge.crash"))
            for _ in 0..<3 { #expect(try run(["launch"], limitSeconds: 30).status == 0) }
            let records = try status()["records"]?.arrayValue ?? []
            #expect(records.count == 3)
            let database = try #require(try Repository.openForReading(folder: URL(fileURLWithPath: repository)))
            let summaries = try database.records().compactMap(\.document.content.summary).sorted()
            #expect(summaries.contains { $0.contains("no `reporthost-crash 1` header") })
            #expect(summaries.contains { $0.contains("not a regular file") })
            #expect(summaries.contains { $0.contains("over the 4194304-byte limit") })
            let aside = try FileManager.default.contentsOfDirectory(atPath: crashes.appendingPathComponent("rejected").path)
            #expect(aside.count == 3)
            #expect(try FileManager.default.contentsOfDirectory(atPath: crashes.path) == ["rejected"])
        }
    }

    @Test("D-1: a crash file naming thousands of attachments copies the first 16 and notes the rest")
    func manyAttachmentLines() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool { [self] in
            let file = folder.appendingPathComponent("small.log")
            try Data("x".utf8).write(to: file)
            try crashFile(["time 1700000000"] + Array(repeating: "attachment \(file.path)", count: 5_000))
            try register([file.path])
            #expect(try run(["launch"]).status == 0)
            let database = try #require(try Repository.openForReading(folder: URL(fileURLWithPath: repository)))
            let record = try #require(try database.records().first)
            #expect(try database.attachmentFiles(of: record.rowID).count == 16)
            #expect(record.document.internalLog.contains { $0.message.contains("4984 attachment line(s)") })
        }
    }

    @Test("D-9: a 503 with a huge or infinite Retry-After is retained for retry within 30 days, never a trap")
    func hugeRetryAfter() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool { [self] in
            for value in ["99999999999999999", "inf", "1e308", "Fri, 31 Dec 9999 23:59:59 GMT"] {
                let server = try RawHTTPServer(.respond("HTTP/1.1 503 Unavailable\r\nRetry-After: \(value)\r\nContent-Length: 0\r\n\r\n"))
                defer { server.stop() }
                let result = try run(["report", "error", "--config", try config(server.url)])
                #expect(result.status == 0 && result.signal == nil, "\(value): \(result.stderr)")
                let records = try status()["records"]?.arrayValue ?? []
                let record = try #require(records.last)
                #expect(record["state"] == .string("retry"), "\(value)")
                let next = try #require(record["next_attempt_at"]?.stringValue.flatMap(ReportDocument.parseTimestamp), "\(value)")
                #expect(next.timeIntervalSinceNow <= 30 * 86_400 + 60, "\(value)")
                #expect(try run(["launch", "--config", try config(server.url)]).status == 0)
            }
        }
    }

    @Test("D-9: a server trickling its answer a byte at a time cannot hold the host: the whole request has a deadline")
    func tricklingServer() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool { [self] in
            // The head at once, then the body a byte every 200 ms: never idle long enough for the
            // session's timeout, which restarts on every byte.
            let server = try RawHTTPServer(.trickle(
                head: "HTTP/1.1 503 Unavailable\r\nContent-Length: 100000\r\n\r\n", body: String(repeating: "x", count: 100_000),
                intervalMs: 200))
            defer { server.stop() }
            let clock = SystemClock()
            let start = clock.now()
            let result = try run(["report", "error", "--config", try config(server.url, timeoutMs: 1_000)], limitSeconds: 60)
            #expect(result.status == 0 && result.signal == nil, "\(result.stderr)")
            // Once (a full suite on 2 cores, 2026-12-06) this took 38 s, not reproduced since:
            // what the host said is kept with the figure.
            let elapsed = clock.now().milliseconds(since: start)
            #expect(elapsed < 30_000, "\(elapsed) ms; the host said: \(result.stderr)")
            let record = try #require(try status()["records"]?.arrayValue?.last)
            // The head is the answer: retained for retry at once, the body never read.
            #expect(record["state"] == .string("retry") && record["outcome"] == .string("HTTP 503"), "\(record)")
        }
    }

    @Test("D-9: a server that stalls inside a small body it announced costs about a second, never the answer")
    func stalledSmallBody() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool { [self] in
            // 100 bytes announced (small enough to be read for keep-alive), a byte every 5 s:
            // without the one-second cap on reading it, the request would last until its deadline.
            let server = try RawHTTPServer(.trickle(
                head: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", body: String(repeating: "x", count: 100), intervalMs: 5_000))
            defer { server.stop() }
            let clock = SystemClock()
            let start = clock.now()
            let result = try run(["report", "error", "--config", try config(server.url, timeoutMs: 20_000)], limitSeconds: 120)
            #expect(result.status == 0 && result.signal == nil, "\(result.stderr)")
            #expect(clock.now().milliseconds(since: start) < 20_000, "the body's stall held the request")
            let record = try #require(try status()["records"]?.arrayValue?.last)
            #expect(record["state"] == .string("terminal") && record["outcome"] == .string("accepted (HTTP 200)"), "\(record)")
        }
    }

    @Test("D-9: a server that never stops sending its body cannot grow the host: the body is never read")
    func endlessBody() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool { [self] in
            let server = try RawHTTPServer(.endlessBody(head: "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n"))
            defer { server.stop() }
            // Several in one process: a request must not wait behind the endless body of the last.
            for _ in 0..<3 { #expect(try run(["report", "error"]).status == 0) }
            let result = try run(["launch", "--config", try config(server.url)], limitSeconds: 60)
            #expect(result.status == 0, "\(result.stderr)")
            let states = try status()["records"]?.arrayValue?.map { $0["state"] } ?? []
            #expect(states == Array(repeating: .string("terminal"), count: 3), "\(states)")
        }
    }

    @Test("D-9: a hostile answer head never ends the host: each is a clear outcome, a redirect is an answer never followed")
    func hostileHeads() async throws {
        try await offPool { [self] in
            let header = String(repeating: "h", count: 200_000)
            let many = (0..<20_000).map { "X-\($0): y\r\n" }.joined()
            let cases: [(name: String, answer: String, state: String, outcome: String)] = [
                ("no status line", "HELLO\r\n\r\n", "retry", "not an HTTP answer"),
                ("a cut-off head", "HTTP/1.1 20", "retry", "connection closed without an answer"),
                ("a six-digit status", "HTTP/1.1 200000 OK\r\nContent-Length: 0\r\n\r\n", "retry", "not an HTTP answer"),
                ("a 200 KB header", "HTTP/1.1 200 OK\r\nX-Big: \(header)\r\nContent-Length: 0\r\n\r\n", "retry", "an answer head over libcurl's limits"),
                ("20,000 headers", "HTTP/1.1 200 OK\r\n\(many)Content-Length: 0\r\n\r\n", "terminal", "accepted (HTTP 200)"),
                ("an over-long Retry-After", "HTTP/1.1 503 No\r\nRetry-After: \(String(repeating: "9", count: 100))\r\n\r\n", "retry", "HTTP 503"),
                ("a redirect to itself", "HTTP/1.1 307 Again\r\nLocation: /post?again\r\nContent-Length: 0\r\n\r\n", "terminal", "rejected (HTTP 307)"),
            ]
            for (index, item) in cases.enumerated() {
                let server = try RawHTTPServer(.respond(item.answer))
                defer { server.stop() }
                let result = try run(["report", "error", "--config", try config(server.url, timeoutMs: 2_000)])
                #expect(result.status == 0 && result.signal == nil, "\(item.name): \(result.stderr)")
                let records = try status()["records"]?.arrayValue ?? []
                #expect(records.count == index + 1, "\(item.name): the report is stored whatever the answer")
                let record = try #require(records.last)
                #expect(record["state"] == .string(item.state), "\(item.name): \(record)")
                #expect(record["outcome"] == .string(item.outcome), "\(item.name): \(record)")
                #expect(server.requests == 1, "\(item.name): sent once, never followed or repeated")
                // A record kept for retry waits at least the configured interval (0 s here).
                if item.state == "retry" { #expect(record["next_attempt_at"] != .null, "\(item.name)") }
            }
        }
    }
}

/// The kill soak's short run (about 30 SIGKILLs at random moments and at every
/// `REPORTHOST_CRASH_AT` point, against a receiver that resets, stalls and answers 503):
/// nothing lost, no orphan files. `scripts/soak --kills 1000` is the long run.
@Suite struct SoakTests {
    @Test("D-1, D-2, D-4, H-13: 30 kills: every report received or stored, none lost, no orphan copies or temporary files")
    func shortSoak() async throws {
        try await offPool {
            let script = Products.packageRoot.appendingPathComponent("scripts/soak.py").path
            let result = try ChildProcess.run(
                "/usr/bin/env", ["python3", script, "--kills", "30", "--seed", "1", "--binary", Products.reporthost.path, "--time-limit", "300"])
            let last = result.stdout.split(separator: "\n").last.map(String.init) ?? ""
            #expect(result.status == 0, "\(result.stdout.suffix(2_000))\n\(result.stderr.suffix(2_000))")
            #expect(last.hasPrefix("soak: kills ") && last.contains(", lost 0, "), "\(last)")
        }
    }
}
