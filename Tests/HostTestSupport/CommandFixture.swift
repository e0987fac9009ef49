import Foundation
import Host
import HostSupport

/// A folder for tests that drive the real `reporthost`: the working directory, a repository
/// in it (`repo`), and configuration files written there. One fixture for every command
/// suite: each runs the executable the same way, with `--repository` last.
package struct CommandFixture: Sendable {
    package let folder: URL

    package init(_ label: String) { folder = makeTemporaryDirectory(label) }

    package var repository: String { folder.appendingPathComponent("repo").path }

    /// Runs `reporthost` with `arguments` and `--repository`, in the folder; a fault point
    /// armed (`REPORTHOST_CRASH_AT`) when given; killed with SIGKILL after `limitSeconds`
    /// when given (a hang fails the test, never the suite).
    @discardableResult
    package func run(
        _ arguments: [String], crashAt: FaultPoint? = nil, environment: [String: String] = [:], limitSeconds: Int? = nil
    ) throws -> ChildProcess.Result {
        var environment = environment
        if let crashAt { environment["REPORTHOST_CRASH_AT"] = crashAt.rawValue }
        let words = arguments + ["--repository", repository]
        if let limitSeconds {
            return try ChildProcess.run(
                "/usr/bin/timeout", ["-s", "KILL", String(limitSeconds), Products.reporthost.path] + words, environment: environment,
                directory: folder)
        }
        return try ChildProcess.reporthost(words, environment: environment, directory: folder)
    }

    /// What `status --json` says; throws with its stderr when it does not exit 0.
    package func status() throws -> JSONValue {
        let result = try run(["status", "--json"])
        guard result.status == 0 else { throw CommandFailed(description: "status exited \(result.status): \(result.stderr)") }
        return try JSONValue.parse(result.stdout)
    }

    /// A command the fixture ran for a test failed.
    package struct CommandFailed: Error, CustomStringConvertible {
        package let description: String

        package init(description: String) { self.description = description }
    }

    /// The records `status --json` lists.
    package func records() throws -> [JSONValue] { try status()["records"]?.arrayValue ?? [] }

    /// Starts `reporthost receive --port 0 --dir <folder>/got` with `arguments`; its port, from
    /// the inbox line it prints.
    package func receive(_ arguments: [String]) throws -> (child: SpawnedChild, port: UInt16) {
        let child = try SpawnedChild(
            [Products.reporthost.path, "receive", "--port", "0", "--dir", folder.appendingPathComponent("got").path] + arguments,
            log: folder.appendingPathComponent("receive-\(UUID().uuidString).log"))
        for _ in 0..<1_000 {
            if let port = child.log.firstMatch(of: /inbox on http:\/\/127\.0\.0\.1:(\d+)\//).flatMap({ UInt16($0.1) }) { return (child, port) }
            usleep(10_000)
        }
        throw CommandFailed(description: "no inbox line in: \(child.log)")
    }

    /// A configuration file that sends to `url` (retries at once), with `extra` keys
    /// (`"plugins": {…}`) merged in; its path.
    package func configuration(url: String, timeoutMs: Int = 3_000, extra: String = "") throws -> String {
        let file = folder.appendingPathComponent("c-\(UUID().uuidString).json")
        try #"{"submission": {"url": "\#(url)", "timeoutMs": \#(timeoutMs)}, "retry": {"intervalSeconds": 0}\#(extra.isEmpty ? "" : ", " + extra)}"#
            .write(to: file, atomically: true, encoding: .utf8)
        return file.path
    }
}
