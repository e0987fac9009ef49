import Foundation
import Glibc
import Host
import HostStore
import HostSupport
import HostTestSupport
import Receiver
import Testing

/// Delivery through the real executable: initial attempts (I-3) and the submission fault
/// points (I-6, D-4) with real SIGKILLs and a real loopback receiver.
@Suite struct DeliveryCommandTests {
    let fixture = CommandFixture("delivery-cli")
    var folder: URL { fixture.folder }

    func config(_ receiver: LocalReceiver) throws -> String { try fixture.configuration(url: receiver.url) }

    func reporthost(_ arguments: [String], repository: String, crashAt: FaultPoint? = nil) throws -> ChildProcess.Result {
        try ChildProcess.reporthost(
            arguments + ["--repository", repository], environment: crashAt.map { ["REPORTHOST_CRASH_AT": $0.rawValue] } ?? [:])
    }

    @Test("I-3: report makes its initial attempt after those of reports recovered in the same launch, oldest first")
    func initialAttemptOrder() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got"))
            defer { receiver.stop() }
            let repository = folder.appendingPathComponent("repo").path
            let configuration = try config(receiver)
            _ = try reporthost(["crash"], repository: repository)
            let result = try reporthost(["report", "error", "--summary", "after the crash", "--config", configuration, "--print"], repository: repository)
            #expect(result.status == 0, "\(result.stderr)")
            let ownID = try JSONValue.parse(result.stdout)["report_id"]?.stringValue
            let types = receiver.received.map { $0.report["attributes"]?["reporthost.trigger"]?.stringValue }
            #expect(types == ["crash", "log_error"])
            #expect(receiver.received.last?.uuid == ownID)
            let records = try Repository.openForReading(folder: URL(fileURLWithPath: repository))?.records() ?? []
            #expect(records.allSatisfy { $0.state == .terminal && $0.outcome == "accepted (HTTP 200)" })
        }
    }

    @Test("Start-up cost: a report with no server and no crash to recover loads neither Foundation's full library, ICU, libcurl nor libdw; libcurl is opened at the first delivery, which then succeeds")
    func librariesLoaded() async throws {
        try await offPool { [self] in
            // The dynamic loader names every library it opens, linked or dlopen'ed.
            func loaded(_ arguments: [String], _ repository: String) throws -> (ChildProcess.Result, [String]) {
                let result = try ChildProcess.reporthost(arguments + ["--repository", repository], environment: ["LD_DEBUG": "files"])
                let names = result.stderr.split(separator: "\n").compactMap { line -> String? in
                    guard let file = line.range(of: "file=") else { return nil }
                    let rest = line[file.upperBound...]
                    return String(rest.prefix { $0 != " " && $0 != "\t" && $0 != ";" })
                }
                return (result, names)
            }
            let (stored, quiet) = try loaded(["report", "error"], folder.appendingPathComponent("quiet").path)
            #expect(stored.status == 0, "\(stored.stderr.suffix(2_000))")
            #expect(quiet.contains { $0.hasPrefix("libsqlite3") }, "the loader's list was read")
            let heavy = quiet.filter {
                $0.hasPrefix("libFoundation.so") || $0.contains("ICU") || $0.hasPrefix("libcurl") || $0.hasPrefix("libdw")
            }
            #expect(heavy.isEmpty, "\(heavy)")

            let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got-loads"))
            defer { receiver.stop() }
            let (sent, delivering) = try loaded(["report", "error", "--config", try config(receiver)], folder.appendingPathComponent("sent").path)
            #expect(sent.status == 0 && receiver.received.count == 1, "\(sent.stderr.suffix(2_000))")
            #expect(delivering.contains { $0.hasPrefix("libcurl.so") })
        }
    }

    @Test("I-6, D-4, D-9, D-10: a kill during submission or after acceptance loses nothing; only after-accept may send the same id twice")
    func submissionFaultPoints() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            for point in [FaultPoint.duringSubmit, .afterAccept] {
                let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got-\(point.rawValue)"))
                let repository = folder.appendingPathComponent("repo-\(point.rawValue)").path
                let configuration = try config(receiver)
                let killed = try reporthost(["report", "bug", "--config", configuration], repository: repository, crashAt: point)
                #expect(killed.signal == SIGKILL, "\(point)")
                let stored = try Repository.openForReading(folder: URL(fileURLWithPath: repository))?.records() ?? []
                #expect(stored.map(\.state) == [.submitting], "\(point)")
                let launched = try reporthost(["launch", "--config", configuration], repository: repository)
                #expect(launched.status == 0, "\(launched.stderr)")
                let after = try Repository.openForReading(folder: URL(fileURLWithPath: repository))?.records() ?? []
                // The killed session also left an abnormal exit (D-16), delivered once.
                #expect(after.map(\.trigger).sorted { $0.name < $1.name } == [.abnormalExit, .upload], "\(point)")
                #expect(after.allSatisfy { $0.state == .terminal && $0.outcome == "accepted (HTTP 200)" })
                let bug = try #require(after.first { $0.trigger == .upload })
                #expect(bug.attempts == 2, "\(point): the interrupted attempt counts")
                let bugSends = receiver.received.filter { $0.uuid == bug.reportID }.count
                #expect(bugSends == (point == .afterAccept ? 2 : 1), "\(point): the same id sent \(bugSends) times")
                #expect(receiver.received.count == bugSends + 1)
                receiver.stop()
            }
        }
    }

    @Test("I-3: without a submission URL nothing is attempted; records stay awaiting_first_attempt")
    func noURL() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let repository = folder.appendingPathComponent("repo-none").path
            _ = try reporthost(["report", "bug"], repository: repository)
            _ = try reporthost(["launch"], repository: repository)
            let records = try Repository.openForReading(folder: URL(fileURLWithPath: repository))?.records() ?? []
            #expect(records.map(\.state) == [.awaitingFirstAttempt])
            #expect(records.first?.attempts == 0)
        }
    }

    @Test("launch --watch retries on its timer, then stops cleanly on SIGTERM")
    func watch() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let delivered = Gate()
            let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got-watch"), script: [.status(503), .status(200)]) { received in
                if received.answer == .status(200) { delivered.release() }
            }
            defer { receiver.stop() }
            let repository = folder.appendingPathComponent("repo-watch").path
            let file = folder.appendingPathComponent("watch.json")
            try #"{"submission": {"url": "\#(receiver.url)"}, "retry": {"intervalSeconds": 1}}"#.write(to: file, atomically: true, encoding: .utf8)
            _ = try reporthost(["report", "bug", "--config", file.path], repository: repository)
            let process = try StartedChild.start(
                Products.reporthost.path, ["launch", "--watch", "--config", file.path, "--repository", repository], directory: folder)
            #expect(delivered.wait(seconds: 30))
            process.terminate()
            #expect(process.wait() == .exited(0))
            let records = try Repository.openForReading(folder: URL(fileURLWithPath: repository))?.records() ?? []
            #expect(records.map(\.state) == [.terminal])
            #expect(records.first?.attempts == 2)
        }
    }

    @Test("receive: prints one line per report, stores its JSON and attachments, answers from --respond")
    func receiveCommand() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let dir = folder.appendingPathComponent("received")
            let out = try ChildProcess.closeOnExecPair()
            let err = try ChildProcess.closeOnExecPair()
            defer { [out, err].forEach { try? $0.ours.close() } }
            let process = try StartedChild.start(
                Products.reporthost.path, ["receive", "--port", "0", "--dir", dir.path, "--respond", "500,200"], directory: folder,
                output: out.child.fileDescriptor, errors: err.child.fileDescriptor)
            [out.child, err.child].forEach { try? $0.close() }
            var banner = ""
            while !banner.contains("\n") {
                let chunk = err.ours.availableData
                if chunk.isEmpty { break }
                banner += String(decoding: chunk, as: UTF8.self)
            }
            let url = try #require(banner.components(separatedBy: "receiving on ").last?.components(separatedBy: " into").first)
            let config = folder.appendingPathComponent("rx.json")
            try #"{"submission": {"url": "\#(url)"}, "retry": {"intervalSeconds": 0}}"#.write(to: config, atomically: true, encoding: .utf8)
            let attachment = folder.appendingPathComponent("note.txt")
            try "attached".write(to: attachment, atomically: true, encoding: .utf8)
            let repository = folder.appendingPathComponent("repo-rx").path
            let first = try reporthost(
                ["report", "bug", "--summary", "the save button\nis gone", "--attach", attachment.path, "--config", config.path, "--print"],
                repository: repository)
            let id = try #require(try JSONValue.parse(first.stdout)["report_id"]?.stringValue)
            _ = try reporthost(["launch", "--config", config.path], repository: repository)
            process.terminate()
            let lines = String(decoding: out.ours.readDataToEndOfFile(), as: UTF8.self).split(separator: "\n")
            #expect(process.wait() == .exited(0))
            // One line per report received: id, type, attachments, the summary on one line, the answer.
            #expect(lines == [
                "received \(id) (Bug report, 1 attachment(s), 1 breadcrumb(s)) \"the save button is gone\" -> 500",
                "received \(id) (Bug report, 1 attachment(s), 1 breadcrumb(s)) \"the save button is gone\" -> 200",
            ])
            #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent("\(id).json").path))
            #expect(FileManager.default.contents(atPath: dir.appendingPathComponent(id).appendingPathComponent("note.txt").path) == Data("attached".utf8))
        }
    }

    @Test("D-14: logging destinations come from the configuration; no line holds the token or attachment contents; an empty list is silent")
    func loggingDestinations() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got-log"))
            defer { receiver.stop() }
            let logFile = folder.appendingPathComponent("logs/reporthost.log")
            try FileManager.default.createDirectory(at: logFile.deletingLastPathComponent(), withIntermediateDirectories: true)
            let secretURL = receiver.url.replacingOccurrences(of: "local-token", with: "SECRET-TOKEN-42")
            let config = folder.appendingPathComponent("log.json")
            try #"{"submission": {"url": "\#(secretURL)"}, "logging": [{"type": "file", "level": "debug", "path": "logs/reporthost.log"}]}"#
                .write(to: config, atomically: true, encoding: .utf8)
            let attachment = folder.appendingPathComponent("payload.txt")
            try "ATTACHMENT-CONTENT-XYZ".write(to: attachment, atomically: true, encoding: .utf8)
            let result = try reporthost(["report", "bug", "--attach", attachment.path, "--config", config.path], repository: folder.appendingPathComponent("repo-log").path)
            #expect(result.status == 0)
            #expect(result.stderr.isEmpty, "the console is not configured: \(result.stderr)")
            let lines = try String(contentsOf: logFile, encoding: .utf8).split(separator: "\n")
            #expect(lines.contains { $0.contains("repository") && $0.contains("debug") })  // startup is logged at debug
            #expect(lines.contains { $0.contains("delivered") })
            #expect(!lines.contains { $0.contains("SECRET-TOKEN-42") || $0.contains("ATTACHMENT-CONTENT-XYZ") })
            let silentConfig = folder.appendingPathComponent("silent.json")
            try #"{"logging": []}"#.write(to: silentConfig, atomically: true, encoding: .utf8)
            let silent = try reporthost(["report", "bug", "--config", silentConfig.path], repository: folder.appendingPathComponent("repo-silent").path)
            #expect(silent.status == 0 && silent.stderr.isEmpty)
        }
    }

    @Test("D-15: a delegate set in the configuration before the host starts sees the reports recovered at launch")
    func earlyDelegate() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool { [self] in
            let plugin = try Fixtures.plugin(
                "early-delegate",
                source: """
                    \(fixturePrelude)
                    static void attachments(void *c, rh_report *r) { (void)c; host->add_attachment(r, "delegate.txt", "delegate.txt", "seen", 4); }
                    static rh_delegate delegate = {RH_ABI_VERSION_MAJOR, RH_ABI_VERSION_MINOR, sizeof(rh_delegate), NULL, NULL, attachments, NULL};
                    static rh_handler handler = {RH_ABI_VERSION_MAJOR, RH_ABI_VERSION_MINOR, sizeof(rh_handler), "early", NULL, NULL, NULL, NULL, NULL, &delegate};
                    const rh_handler *rh_plugin_entry(const rh_host_api *h) { host = h; return &handler; }
                    """)
            let repository = folder.appendingPathComponent("repo-delegate").path
            _ = try reporthost(["crash"], repository: repository)
            let config = folder.appendingPathComponent("delegate.json")
            try #"{"plugins": {"delegate": "\#(plugin.path)"}}"#.write(to: config, atomically: true, encoding: .utf8)
            #expect(try reporthost(["launch", "--config", config.path], repository: repository).status == 0)
            let database = try #require(try Repository.openForReading(folder: URL(fileURLWithPath: repository)))
            let record = try #require(try database.records().first)
            #expect(try database.attachments(of: record.rowID).map(\.name) == ["delegate.txt"])
        }
    }
}
