import Foundation
import Host
import HostTestSupport
import Testing

/// `scripts/bench` in its smoke mode: every figure still runs against its baseline. Its
/// numbers are not looked at (figures are never timed tests); the README's table must name
/// every figure it prints.
@Suite struct BenchTests {
    @Test("scripts/bench --smoke runs every figure and its baseline; the README's figures table names each one")
    func smoke() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool {
            let script = Products.packageRoot.appendingPathComponent("scripts/bench").path
            let result = try ChildProcess.run("/usr/bin/env", ["python3", script, "--smoke", "--bin", Products.directory.path])
            #expect(result.status == 0, "\(result.stderr)")
            // One line per figure: its name, then its ratio.
            let figures = result.stdout.split(separator: "\n").compactMap { line -> String? in
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                guard fields.count > 2, fields[1].hasSuffix("×") || fields[1].contains("×") else { return nil }
                return String(fields[0])
            }
            #expect(figures.count == 23, "\(result.stdout)")
            #expect(result.stdout.contains("\(figures.count) figures"))
            let table = try ReadmeTests.section("Measured here")
            for figure in figures {
                #expect(table.contains("| \(figure) |"), "the README's table has no row for \(figure)")
            }
        }
    }
}
