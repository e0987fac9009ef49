import Foundation
import Glibc
import Host
import HostStore
import HostSupport
import HostTestSupport
import Receiver
import Testing

/// Embedding (continued): a stop with a submission in flight, and misuse refused without harm.
extension EmbedTests {
    @Test("D-9, embed: rh_embed_stop with a submission stalled in flight returns after its grace, and the report is delivered by the next start")
    func stopDuringDelivery() async throws {
        try await offPool { [self] in
            let driver = try Self.driver.get().path
            let stalled = try LocalReceiver(folder: folder.appendingPathComponent("stalled"), script: [.stall])
            defer { stalled.stop() }
            let plugin = try Fixtures.freshCopy(of: Fixtures.plugin("marker", source: markerHandler))
            let stalling = try config(stalled, plugin: plugin, timeoutMs: 20_000)
            let first = try ChildProcess.run("/usr/bin/timeout", ["-s", "KILL", "60", driver, stalling, repository, "report"], directory: folder)
            #expect(first.status == 0, "\(first.stdout) \(first.stderr)")
            let lines = first.stdout.split(separator: "\n").map(String.init)
            let id = try #require(lines.first { $0.hasPrefix("report 0 ") }.map { String($0.dropFirst(9)) }, "\(first.stdout)")
            let stopMs = try #require(lines.first { $0.hasPrefix("stopped ") }.flatMap { Int($0.dropFirst(8)) }, "\(first.stdout)")
            // The grace is 2 s; the stalled request's own limit (20 s) is not waited for.
            #expect(stopMs < 10_000, "rh_embed_stop took \(stopMs) ms")
            #expect(try storedTriggers()[id] == "log_error", "stored, not lost")
            // Cancelled and settled before the session ended: never left `submitting`.
            let stored = try #require(try Repository.openForReading(folder: URL(fileURLWithPath: repository)))
            let record = try #require(try stored.records().first { $0.reportID == id })
            #expect(record.state != .submitting, "\(record.state) \(record.outcome ?? "")")

            // The next start settles the interrupted attempt and retries it in the background
            // (a stop that comes first would leave it stored again: the test waits for it).
            let arrived = WaitableState<Set<String>>([])
            let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got")) { received in
                if let uuid = received.report["uuid"]?.stringValue { arrived.update { _ = $0.insert(uuid) } }
            }
            defer { receiver.stop() }
            let second = try SpawnedChild([driver, try config(receiver, plugin: plugin), repository, "hold"], log: folder.appendingPathComponent("second.log"))
            #expect(second.readLine()?.hasPrefix("started ") == true, "\(second.log)")
            let clock = SystemClock()
            let delivered = arrived.wait(until: clock.now().advanced(byMilliseconds: 30_000), clock: clock, for: { $0.contains(id) }) { _, done in done }
            second.closeInput()
            #expect(second.wait() == 0, "\(second.log)")
            #expect(delivered, "the interrupted submission is delivered by the next start: \(second.log)")
        }
    }

    @Test("I-4, embed: misuse is refused without harm: a second live start, bad keys and types, stale handles, a fourth attachment, a short error buffer")
    func misuse() async throws {
        try await offPool { [self] in
            let files = folder.appendingPathComponent("files")
            try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
            for name in ["a.txt", "b.txt", "c.txt", "d.txt"] { try Data(name.utf8).write(to: files.appendingPathComponent(name)) }
            let result = try ChildProcess.run(try Self.driver.get().path, ["-", repository, "misuse", files.path], directory: folder)
            #expect(result.status == 0 && result.signal == nil, "\(result.stderr)")
            var said: [String: String] = [:]
            for line in result.stdout.split(separator: "\n") {
                let words = line.split(separator: " ", maxSplits: 1).map(String.init)
                if words.count == 2 { said[words[0]] = words[1] }
            }
            #expect(said["second-start"]?.hasPrefix("NULL ") == true && (said["second-start"]?.count ?? 0) > 10, "NULL with a message: \(result.stdout)")
            for invalid in ["attribute-null-key", "attribute-key-with-equals", "attribute-bad-utf8", "null-type", "empty-attachment", "attachment-4"] {
                #expect(said[invalid] == "-1", "\(invalid): \(said[invalid] ?? "missing")")
            }
            #expect(said["unknown-type"] == "-1 []", "an unknown type: invalid, and the id buffer emptied")
            for stopped in ["stale-attribute", "stale-attachment", "old-handle-after-restart", "stopped-attribute"] {
                #expect(said[stopped] == "-2", "\(stopped): \(said[stopped] ?? "missing")")
            }
            #expect(said["stale-report"] == "-2 []" && said["stopped-report"] == "-2 []")
            for fine in ["attribute-remove-absent", "attribute-past-crash-file-limits", "attachment-1", "attachment-2", "attachment-3", "no-id-buffer", "live-after-stale-stop"] {
                #expect(said[fine] == "0", "\(fine): \(said[fine] ?? "missing")")
            }
            #expect(said["bad-config"] == "NULL 7", "a message cut to the 8-byte buffer")
            #expect(said["restart"] == "new-handle")
            let report = try #require(said["report"]?.split(separator: " ").map(String.init), "\(result.stdout)")
            #expect(report.count == 3 && report[0] == "0" && report[2] == "36", "\(report)")
            let stored = try #require(try Repository.openForReading(folder: URL(fileURLWithPath: repository)))
            let record = try #require(try stored.records().first { $0.reportID == report[1] })
            #expect(record.document.content.attachments.map(\.name).sorted() == ["a.txt", "b.txt", "c.txt"], "three kept, the fourth refused")
            #expect(record.document.content.attributes["long"]?.count == 599, "an attribute crash files cannot carry still reaches reports")
            #expect(result.stderr.contains("crash files omit the attribute 'long'"), "\(result.stderr)")
        }
    }
}
