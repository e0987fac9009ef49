import Foundation
import Glibc
import Host
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

    @Test("I-2, D-9: a submission.url that does not parse, is not http(s) or is plain http off loopback is a configuration error before anything is opened; stored reports are untouched")
    func badSubmissionURLRefuses() async throws {
        try await offPool { [self] in
            let repository = folder.appendingPathComponent("repo").path
            let stored = try ChildProcess.reporthost(["report", "error", "--summary", "kept", "--repository", repository])
            #expect(stored.status == 0, "\(stored.stderr)")
            for url in ["htps://127.0.0.1/post", "http://example.com/post?token=secret", "http://127.evil.example/post", "not a url"] {
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
                try unlimited.insert(document, state: state)
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
}
