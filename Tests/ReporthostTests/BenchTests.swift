import Foundation
import Host
import HostTestSupport
import Testing

/// `scripts/bench` in its smoke mode: every figure still runs against its baseline. Its
/// numbers are not looked at (figures are never timed tests); BENCHMARKS.md's table (its
/// "This round" section) must name every figure it prints.
@Suite struct BenchTests {
    @Test("scripts/bench --smoke runs every figure and its baseline; BENCHMARKS.md's figures table names each one")
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
            #expect(figures.count == 28, "\(result.stdout)")
            #expect(result.stdout.contains("\(figures.count) figures"))
            let table = try ReadmeTests.section("This round", in: "BENCHMARKS.md")
            for figure in figures {
                #expect(table.contains("| \(figure) |"), "BENCHMARKS.md's table has no row for \(figure)")
            }
        }
    }

    @Test("scripts/bench --check fails a figure only when its best round misses the goal: a goal inside the noise band is reported, never failed")
    func checkGate() throws {
        let script = Products.packageRoot.appendingPathComponent("scripts/bench").path
        let probe = """
            import importlib.machinery, sys
            bench = importlib.machinery.SourceFileLoader("bench", sys.argv[1]).load_module()
            def figure(goal, higher, pairs, absolute=False):
                f = bench.Figure("f", "", "", "ms", goal, higher=higher, absolute=absolute)
                for measured, baseline in pairs: f.add(measured, baseline)
                return f.missed_beyond_noise()
            print([figure(1.5, False, [(1.6, 1), (1.7, 1)]), figure(1.5, False, [(1.4, 1), (1.7, 1)]),
                   figure(1.5, True, [(1.2, 1), (1.4, 1)]), figure(1.5, True, [(1.2, 1), (1.6, 1)]),
                   figure(15, False, [(16, 1), (17, 1)], absolute=True), figure(None, False, [(9, 1)])])
            """
        let result = try ChildProcess.run("/usr/bin/env", ["python3", "-c", probe, script])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "[True, False, True, False, True, False]", "\(result.stdout)")
    }
}
