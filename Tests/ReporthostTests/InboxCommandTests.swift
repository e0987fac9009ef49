import Foundation
import Host
import HostSupport
import HostTestSupport
import Testing

/// SPEC T-2 from the command line: `receive --inbox` with chaos, and ReportHost's own delivery
/// retrying through it.
@Suite struct InboxCommandTests {
    let fixture = CommandFixture("reporthost-inbox-command")

    func receive(_ arguments: [String]) throws -> (child: SpawnedChild, port: UInt16) { try fixture.receive(arguments) }

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

    @Test("T-2: the receiver's memory stops growing whatever it is sent: after a warm-up, 15 more 512 KB reports and metric events add under 8 MB; events go to metric-events.jsonl")
    func memoryStopsGrowing() async throws {
        try await offPool { [self] in
            let (receiver, port) = try receive(["--inbox"])
            defer {
                kill(receiver.pid, SIGTERM)
                receiver.wait()
            }
            // Every field the inbox lists, 512 KB long: before, each report stayed in memory whole.
            let large = String(repeating: "x", count: 512 << 10)
            func post(round: Int) throws {
                for _ in 0..<5 {
                    let report = JSONValue.object([
                        ("uuid", .string(UUID().uuidString)), ("attributes", .object([("error.message", .string(large)), ("big", .string(large))])),
                        ("annotations", .object([("Description", .string(large))])), ("classifiers", .array([.string(large)])),
                    ])
                    let stored = try httpRequest(
                        port: port, "/post?format=json&token=t", method: "POST", headers: ["Content-Type": "application/json"],
                        body: Data(report.serialized().utf8), timeoutMs: 60_000)
                    let event = JSONValue.object([("unique_events", .array([.object([("attributes", .object([("a", .string(large))]))])]))])
                    let taken = try httpRequest(
                        port: port, "/api/unique-events/submit", method: "POST", headers: ["Content-Type": "application/json"],
                        body: Data(event.serialized().utf8), timeoutMs: 60_000)
                    #expect(stored.status == 200 && taken.status == 200, "round \(round): \(stored.status) \(taken.status)")
                }
            }
            try post(round: 0)
            let warm = try #require(residentMegabytes(receiver.pid))
            for round in 1...3 { try post(round: round) }
            let after = try #require(residentMegabytes(receiver.pid))
            #expect(after - warm < 8, "resident \(warm) MB after 5 posts of each, \(after) MB after 15 more")
            let events = try String(contentsOf: fixture.folder.appendingPathComponent("got/metric-events.jsonl"), encoding: .utf8)
            #expect(events.split(separator: "\n").count == 20, "one line per event taken")
            #expect(events.hasPrefix(#"{"kind":"unique-events","event":{"unique_events":"#))
            // The list shows each report cut to its bounds; the report itself stays whole.
            let listed = try #require(try JSONValue.parse(try httpRequest(port: port, "/api/reports?limit=1").body)["reports"]?.arrayValue?.first)
            #expect(listed["summary"]?.stringValue?.utf8.count == 1_024)
            let id = try #require(listed["id"]?.stringValue)
            #expect(try httpRequest(port: port, "/api/reports/\(id)").body.count > 3 * (512 << 10))
        }
    }

    /// `pid`'s resident set in megabytes, from `/proc/PID/status`.
    func residentMegabytes(_ pid: pid_t) -> Int? {
        guard case .success(let data) = BoundedFile.read("/proc/\(pid)/status", limit: 1 << 20, system: .live) else { return nil }
        let line = String(decoding: data, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
        return line.flatMap { Int($0.split(separator: " ")[1]) }.map { $0 / 1_024 }
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
