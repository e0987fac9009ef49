import Foundation
import Glibc
import Host
import HostRecovery
import HostStore
import HostSupport
import HostTestSupport
import Receiver
import Testing

/// Hostile input (continued): hostile files, streams, timeouts and plugins.
extension HostileInputTests {
    @Test("I-4: a full or closed stderr never kills the host: the report is stored, errors keep their exit status")
    func fullOrClosedStderr() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool { [self] in
            for target in ["/dev/full", "closed pipe"] {
                let errors: FileHandle
                if target == "/dev/full" {
                    errors = try #require(FileHandle(forWritingAtPath: "/dev/full"))
                } else {
                    let pipe = try ChildProcess.closeOnExecPair()
                    try pipe.ours.close()  // every write to stderr fails with EPIPE
                    errors = pipe.child
                }
                let process = try StartedChild.start(
                    Products.reporthost.path, ["report", "error", "--log-level", "debug", "--repository", repository], directory: folder,
                    errors: errors.fileDescriptor)
                try? errors.close()
                #expect(process.wait() == .exited(0), "\(target)")
            }
            #expect(try status()["records"]?.arrayValue?.count == 2)
            // A usage error still exits 2 when its message cannot be written.
            let full = try #require(FileHandle(forWritingAtPath: "/dev/full"))
            let usage = try StartedChild.start(Products.reporthost.path, ["report", "nonsense"], errors: full.fileDescriptor)
            try? full.close()
            #expect(usage.wait() == .exited(2))
        }
    }

    @Test("D-9, I-7: what a kill between a commit and its file deletions leaves (request bodies, copies no row names) is removed at the next launch")
    func leftoversAreSwept() async throws {
        try await offPool { [self] in
            let attached = folder.appendingPathComponent("kept.log")
            try Data("kept".utf8).write(to: attached)
            #expect(try run(["report", "error", "--attach", attached.path]).status == 0)
            let root = folder.appendingPathComponent("repo")
            let database = try #require(try Repository.openForReading(folder: root))
            let record = try #require(try database.records().first)
            let copy = try #require(try database.attachmentFiles(of: record.rowID).first?.file)
            let leftovers = [
                root.appendingPathComponent("outgoing-\(record.rowID).multipart"),
                root.appendingPathComponent("attachments/999/0f0f0f0f-0000-0000-0000-000000000000"),
                copy.deletingLastPathComponent().appendingPathComponent("11111111-2222-3333-4444-555555555555"),
            ]
            for file in leftovers {
                try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
                try Data("payload".utf8).write(to: file)
            }
            let launched = try run(["launch", "--log-level", "info"])
            #expect(launched.status == 0 && launched.stderr.contains("removed 3 leftover file(s)"), "\(launched.stderr)")
            for file in leftovers { #expect(!FileManager.default.fileExists(atPath: file.path), "\(file.path)") }
            #expect(FileManager.default.fileExists(atPath: root.appendingPathComponent("attachments/999").path) == false)
            #expect(try Data(contentsOf: copy) == Data("kept".utf8))
        }
    }

    @Test("D-9: a submission timeout under a second still delivers (libcurl's idle check counts whole seconds: rounded up)")
    func subSecondTimeout() async throws {
        try await offPool { [self] in
            let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got"))
            defer { receiver.stop() }
            for timeoutMs in [1, 500, 999] {
                let result = try run(["report", "error", "--config", try config(receiver.url, timeoutMs: timeoutMs)])
                #expect(result.status == 0 && result.stderr.contains("delivered (HTTP 200)"), "\(timeoutMs): \(result.stderr)")
            }
            #expect(receiver.received.count == 3)
        }
    }

    @Test("R-7, I-4: files named on the command line are read within their limits: an --attach over 3 MB is dropped unread, a FIFO is exit 2, a config over 1 MB is exit 2")
    func commandLineFiles() async throws {
        try await offPool { [self] in
            let big = folder.appendingPathComponent("big.bin")
            try Data(count: 4 << 20).write(to: big)
            let report = try run(["report", "error", "--attach", big.path, "--print"])
            #expect(report.status == 0, "\(report.stderr)")
            let log = try JSONValue.parse(report.stdout)["internal_log"]?.arrayValue ?? []
            #expect(log.contains { $0["message"]?.stringValue == "attachment 'big.bin' dropped: it is 4194304 bytes, over the 3145728-byte limit" })
            let fifo = folder.appendingPathComponent("attach.fifo").path
            #expect(mkfifo(fifo, 0o600) == 0)
            let attachFifo = try run(["report", "error", "--attach", fifo], limitSeconds: 30)
            #expect(attachFifo.status == 2 && attachFifo.stderr.contains("not a regular file"), "\(attachFifo)")
            let config = folder.appendingPathComponent("big.json")
            try Data(("{\"attributes\": {\"a\": \"" + String(repeating: "x", count: 2 << 20) + "\"}}").utf8).write(to: config)
            let bigConfig = try run(["report", "error", "--config", config.path])
            #expect(bigConfig.status == 2 && bigConfig.stderr.contains("over the 1048576-byte limit"), "\(bigConfig.stderr)")
            let configFifo = try run(["report", "error", "--config", fifo], limitSeconds: 30)
            #expect(configFifo.status == 2 && configFifo.stderr.contains("not a regular file"), "\(configFifo.stderr)")
        }
    }

    @Test("I-4: a plugin whose entry never returns fails to load within the callback limit (exit 2), never hangs the host")
    func entryNeverReturns() async throws {
        try await offPool { [self] in
            let source = """
                \(fixturePrelude)
                #include <unistd.h>
                const rh_handler *rh_plugin_entry(const rh_host_api *h) {
                    host = h;
                    for (;;) pause();
                }
                """
            let plugin = try Fixtures.freshCopy(of: Fixtures.plugin("never-returns", source: source))
            let config = folder.appendingPathComponent("fast.json")
            try #"{"limits": {"callbackTimeoutMs": 500}}"#.write(to: config, atomically: true, encoding: .utf8)
            let result = try run(["report", "error", "--handler", plugin.path, "--config", config.path], limitSeconds: 30)
            #expect(result.status == 2, "\(result)")
            #expect(result.stderr.contains("did not return within 500 ms"), "\(result.stderr)")
            // The version check reads the entry on its own path: bounded too, in process.
            let checked = try ChildProcess.run(
                "/usr/bin/timeout", ["-s", "KILL", "30", Products.reporthost.path, "check", plugin.path, "--in-process", "--include", "^abi-version$", "--json"],
                directory: folder)
            #expect(checked.signal == nil && checked.status != 137, "killed by the test's limit: it hung")
            let results = try JSONValue.parse(checked.stdout)["results"]?.arrayValue ?? []
            #expect(results.first?["check"] == .string("abi-version") && results.first?["status"] != .string("passed"), "\(checked.stdout)")
        }
    }

    @Test("I-7: an attachment row whose file name escapes the record's folder is never followed (read, sent or deleted)")
    func attachmentNameEscapes() async throws {
        try await offPool { [self] in
            let outside = folder.appendingPathComponent("outside.txt")
            try Data("must stay".utf8).write(to: outside)
            let attached = folder.appendingPathComponent("a.log")
            try Data("attached".utf8).write(to: attached)
            #expect(try run(["report", "error", "--attach", attached.path]).status == 0)
            try damage("UPDATE attachments SET file='../../outside.txt'")
            let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got"))
            defer { receiver.stop() }
            #expect(try run(["launch", "--config", try config(receiver.url)]).status == 0)
            #expect(receiver.received.count == 1)
            // Only the breadcrumbs go (an attachment of the wire, not a copy).
            #expect(receiver.received.first.map { Array($0.attachments.keys) } == ["bt-breadcrumbs-0"])
            #expect(try Data(contentsOf: outside) == Data("must stay".utf8))
        }
    }

    @Test("I-7: files the host writes are never written through a link planted in the repository: the request body, the database, the lock")
    func neverThroughALink() async throws {
        try await offPool { [self] in
            let victim = folder.appendingPathComponent("victim.txt")
            try Data("must stay".utf8).write(to: victim)
            let attached = folder.appendingPathComponent("a.log")
            try Data("attached".utf8).write(to: attached)
            #expect(try run(["report", "error", "--attach", attached.path]).status == 0)
            // The request body's name is predictable: a link there truncated the file it named.
            let body = URL(fileURLWithPath: repository).appendingPathComponent("outgoing-1.multipart")
            try FileManager.default.createSymbolicLink(at: body, withDestinationURL: victim)
            let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got"))
            defer { receiver.stop() }
            #expect(try run(["launch", "--config", try config(receiver.url)]).status == 0)
            #expect(receiver.received.first?.attachments["a.log"] == Data("attached".utf8))
            #expect(try Data(contentsOf: victim) == Data("must stay".utf8))
            // A database or lock file that is a link is an error naming it; nothing outside changes.
            for name in [Repository.databaseName, Repository.lockName] {
                let other = makeTemporaryDirectory("linked-repository")
                try FileManager.default.createSymbolicLink(at: other.appendingPathComponent(name), withDestinationURL: victim)
                let ran = try ChildProcess.reporthost(["report", "error", "--repository", other.path], directory: folder)
                #expect(ran.status == 1 && ran.stderr.contains(name), "\(name): \(ran.status) \(ran.stderr)")
                #expect(try Data(contentsOf: victim) == Data("must stay".utf8), "\(name)")
            }
        }
    }

    @Test("D-14: a log file that is a FIFO is refused at start with a clear error, never waited on")
    func logFileIsAFifo() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool { [self] in
            let fifo = folder.appendingPathComponent("log.fifo").path
            #expect(mkfifo(fifo, 0o600) == 0)
            let file = folder.appendingPathComponent("log.json")
            try #"{"logging": [{"type": "file", "path": "\#(fifo)"}]}"#.write(to: file, atomically: true, encoding: .utf8)
            let result = try run(["report", "error", "--config", file.path], limitSeconds: 30)
            #expect(result.status == 1, "\(result)")
            #expect(result.stderr.contains("reporthost: error:") && result.stderr.contains("log.fifo"))
        }
    }
}
