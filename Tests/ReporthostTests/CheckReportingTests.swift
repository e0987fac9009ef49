import Conformance
import Foundation
import Host
import HostSupport
import HostTestSupport
import Testing

/// `check` (continued): what it reports (JUnit, fuzz crashes) and what it refuses to check.
extension CheckCommandTests {
    @Test("I-8 --junit: a real JUnit reader (junitparser) reads one testcase per check, failure for failed, error for crashed, skipped for skipped")
    func junit() async throws {
        let reader = Products.python.path
        try #require(FileManager.default.isExecutableFile(atPath: reader), "run scripts/test: it installs junitparser into .build/venv")
        let crashes = try plugin(
            "junit-crashes", before: "on_before",
            extra: "static void on_before(void *c, rh_report *r, bool t, rh_completion d) { (void)c; (void)t; if (host->report_type(r) == RH_REPORT_CRASH) { volatile int *p = 0; *p = 1; } const char *l[] = {\"x & <y>\"}; host->set_labels(r, l, 1); d(); }")
        let file = makeTemporaryDirectory("junit").appendingPathComponent("results.xml")
        let (status, results) = try await check(crashes, ["--junit", file.path, "--include", "^(loads|keeps-others-changes|recovered-returns-in-time|exports-only-entry)$"])
        #expect(status == 1)
        let script = """
            import sys
            from junitparser import JUnitXml
            xml = JUnitXml.fromfile(sys.argv[1])
            for suite in xml:
                print("suite", suite.name, suite.tests, suite.failures, suite.errors, suite.skipped)
                for case in suite:
                    print("case", case.name, ",".join(type(r).__name__ for r in case.result) or "passed")
            """
        let read = try ChildProcess.run(reader, ["-c", script, file.path])
        #expect(read.status == 0, "\(read.stderr)")
        let lines = Set(read.stdout.split(separator: "\n").map(String.init))
        let name = URL(fileURLWithPath: crashes).lastPathComponent
        #expect(lines.contains("suite \(name) 4 1 1 0"), "\(read.stdout)")
        #expect(lines.contains("case loads passed"))
        #expect(lines.contains("case keeps-others-changes Failure"))
        #expect(lines.contains("case recovered-returns-in-time Error"))
        #expect(results["recovered-returns-in-time"]?.status == .crashed)
    }

    @Test("I-8 --fuzz: a plugin that crashes on some generated reports is reported with the case that did it; --reproduce runs that case alone and describes it")
    func fuzz() async throws {
        // Crashes on a report with more than 500 labels (a case the generator makes often).
        let fragile = try plugin("fragile", before: "on_before", extra: """
            static bool count(void *ctx, const char *l) { (void)l; (*(int *)ctx)++; return true; }
            static void on_before(void *c, rh_report *r, bool t, rh_completion d) {
                (void)c; (void)t; int n = 0; host->each_label(r, count, &n); if (n > 500) { volatile int *p = 0; *p = 1; } d();
            }
            """)
        let (status, results) = try await check(fragile, ["--fuzz", "40", "--seed", "5", "--include", "^fuzz$"])
        #expect(status == 1)
        let details = try #require(results["fuzz"]?.details)
        #expect(results["fuzz"]?.status == .crashed, "\(details)")
        let seed = try #require(details.split(separator: " ").last.map(String.init), "\(details)")
        #expect(details.contains("on case \(seed); reproduce with --reproduce \(seed)"))
        let (again, reproduced) = try await check(fragile, ["--reproduce", seed])
        #expect(again == 1 && reproduced["fuzz"]?.status == .crashed)
        // The case itself: more than 500 labels.
        let fine = try plugin("fuzz-fine", before: "on_before", extra: "static void on_before(void *c, rh_report *r, bool t, rh_completion d) { (void)c; (void)r; (void)t; d(); }")
        let (fineStatus, described) = try await check(fine, ["--reproduce", seed])
        #expect(fineStatus == 0)
        #expect(described["fuzz"]?.details.contains(" labels") == true && described["fuzz"]?.details.contains("case \(seed)") == true)
        let (manyStatus, many) = try await check(fine, ["--fuzz", "40", "--seed", "5", "--include", "^fuzz$"])
        #expect(manyStatus == 0 && many["fuzz"]?.details.contains("40 generated report(s)") == true)
    }

    @Test("I-8: a path that does not exist, or a file that is not an ELF shared object, is one usage line and exit 2")
    func notAPlugin() async throws {
        let text = try Fixtures.file("not-a-plugin.so", "hello\n").path
        for path in ["/no/such/plugin.so", "/etc/passwd", text, Products.reporthost.path] {
            let result = try await offPool { try ChildProcess.reporthost(["check", path]) }
            #expect(result.status == 2, "\(path)")
            #expect(result.stdout.isEmpty, "\(path)")
            #expect(result.stderr.split(separator: "\n").count == 1 && result.stderr.contains(path), "\(path): \(result.stderr)")
        }
    }
}
