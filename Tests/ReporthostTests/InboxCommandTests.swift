import Foundation
import Host
import HostSupport
import HostTestSupport
import Testing

/// SPEC T-2 from the command line: `receive --inbox` with chaos, and ReportHost's own delivery
/// retrying through it.
@Suite struct InboxCommandTests {
    let fixture = CommandFixture("reporthost-inbox-command")

    /// Starts `reporthost receive` with `arguments`; its port, from the line it prints.
    func receive(_ arguments: [String]) throws -> (child: SpawnedChild, port: UInt16) {
        let child = try SpawnedChild(
            [Products.reporthost.path, "receive", "--port", "0", "--dir", fixture.folder.appendingPathComponent("got").path] + arguments,
            log: fixture.folder.appendingPathComponent("receive-\(UUID().uuidString).log"))
        var port: UInt16?
        for _ in 0..<1_000 where port == nil {
            port = child.log.firstMatch(of: /inbox on http:\/\/127\.0\.0\.1:(\d+)\//).flatMap { UInt16($0.1) }
            if port == nil { usleep(10_000) }
        }
        return (child, try #require(port, "no inbox line in: \(child.log)"))
    }

    @Test("T-2 chaos: ReportHost's delivery gets through --chaos 503:0.5 by its own retries; the inbox marks the chaos answers")
    func deliveryThroughChaos() async throws {
        try await offPool { [self] in
            let (receiver, port) = try receive(["--inbox", "--chaos", "503:0.5", "--chaos-seed", "7"])
            defer {
                kill(receiver.pid, SIGTERM)
                receiver.wait()
            }
            #expect(receiver.log.contains("reporthost: chaos 503:0.5, seed 7"), "\(receiver.log)")
            let configuration = try fixture.configuration(
                url: "http://127.0.0.1:\(port)/post?format=json&token=t", extra: #""retry": {"intervalSeconds": 0, "limit": 50}"#)
            var ids: [String] = []
            for index in 0..<5 {
                let result = try fixture.run(["report", "error", "--summary", "chaos \(index)", "--config", configuration, "--print"])
                #expect(result.status == 0, "\(result.stderr)")
                ids += [try JSONValue.parse(result.stdout)["report_id"]?.stringValue].compactMap { $0 }
            }
            // `launch --watch` retries on its timer (a 503's Retry-After: 1); the inbox lists each
            // report once it is through.
            let watch = try SpawnedChild(
                [Products.reporthost.path, "launch", "--watch", "--config", configuration, "--repository", fixture.repository],
                log: fixture.folder.appendingPathComponent("watch.log"))
            defer {
                kill(watch.pid, SIGTERM)
                watch.wait()
            }
            func listed() throws -> Set<String> {
                let reports = try JSONValue.parse(try httpRequest(port: port, "/api/reports").body)["reports"]?.arrayValue ?? []
                return Set(reports.compactMap { $0["id"]?.stringValue })
            }
            let deadline = SystemClock().now().advanced(byMilliseconds: 60_000)
            while try listed() != Set(ids), SystemClock().now() < deadline { usleep(100_000) }
            #expect(try listed() == Set(ids), "\(watch.log)")
            let requests = try JSONValue.parse(try httpRequest(port: port, "/api/requests").body)["requests"]?.arrayValue ?? []
            let chaos = requests.filter { $0["chaos"]?.boolValue == true }
            #expect(!chaos.isEmpty && chaos.allSatisfy { $0["status"]?.intValue == 503 })
            #expect(requests.count == ids.count + chaos.count, "every report answered 200 once, after its 503s")
        }
    }

    @Test("T-2 chaos: a bad --chaos, a --chaos-seed that is not a number, or a seed without --chaos is a usage error naming it")
    func usageErrors() async throws {
        try await offPool { [self] in
            for (words, named) in [
                (["--chaos", "999:0.1"], "'999' is not a chaos fault"), (["--chaos", "503:0.1", "--chaos-seed", "x"], "--chaos-seed 'x'"),
                (["--chaos-seed", "3"], "--chaos-seed needs --chaos"), (["--chaos", "slow:2"], "probability '2'"),
            ] {
                let result = try ChildProcess.reporthost(["receive", "--port", "0"] + words, directory: fixture.folder)
                #expect(result.status == 2, "\(words)")
                #expect(result.stderr.hasPrefix("reporthost: error: ") && result.stderr.contains(named), "\(result.stderr)")
            }
        }
    }
}
