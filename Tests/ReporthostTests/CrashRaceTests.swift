import Foundation
import Glibc
import Host
import HostSupport
import HostTestSupport
import Testing

/// Crash files racing recovery (SPEC D-1, D-2): a live process (a secondary, a forked child,
/// another `run`) may still be writing a `.partial` while a launch lists the folder.
@Suite struct CrashRaceTests {
    let fixture = CommandFixture("crash-race")
    var folder: URL { fixture.folder }
    var repository: String { fixture.repository }

    func run(_ arguments: [String]) throws -> ChildProcess.Result { try fixture.run(arguments) }

    func crashNumbers() throws -> [String] {
        let status = try run(["status", "--json", "--all"])
        let records = try JSONValue.parse(status.stdout)["records"]?.arrayValue ?? []
        return try records.filter { $0["trigger"] == .string("crash") }.compactMap { record in
            let shown = try run(["show", record["report_id"]?.stringValue ?? "", "--json"])
            return try JSONValue.parse(shown.stdout)["attributes"]?["crash.number"]?.stringValue
        }
    }

    func crashText(number: Int, pid: pid_t) -> String {
        ["reporthost-crash 1", "session race", "signal 11", "code 1", "address 0x0", "thread 1", "pid \(pid)",
         "time \(Int(Date().timeIntervalSince1970))", "attribute crash.number=\(number)", "end", ""].joined(separator: "\n")
    }

    @Test("D-1: a .partial whose writer is alive is left for a later launch; once the writer is gone it is taken, once")
    func partialOfALiveWriter() throws {
        #expect(try run(["launch"]).status == 0)
        let writer = try SpawnedChild(["/bin/sleep", "60"], log: folder.appendingPathComponent("sleep.log"))
        let name = "race-\(Int(Date().timeIntervalSince1970))-\(writer.pid)-\(writer.pid)-1.crash.partial"
        let path = repository + "/crashes/" + name
        try crashText(number: 1, pid: writer.pid).write(toFile: path, atomically: false, encoding: .utf8)
        let early = try run(["launch"])
        #expect(early.status == 0, "\(early.stderr)")
        #expect(FileManager.default.fileExists(atPath: path), "taken while its writer was alive")
        #expect(try crashNumbers().isEmpty)
        writer.kill()
        let later = try run(["launch"])
        #expect(later.status == 0, "\(later.stderr)")
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(try crashNumbers() == ["1"])
    }

    /// Writes `count` crash files as the capture does: each a `.partial`, a line at a time
    /// (with pauses that keep the window open), synced, then renamed.
    static let writerSource = """
        #include <fcntl.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        #include <time.h>
        #include <unistd.h>
        int main(int argc, char **argv) {
            int count = atoi(argv[2]);
            for (int i = 0; i < count; i++) {
                char final[4096], partial[4200];
                snprintf(final, sizeof final, "%s/race-%ld-%d-%d-%d.crash", argv[1], (long)time(NULL), getpid(), getpid(), i);
                snprintf(partial, sizeof partial, "%s.partial", final);
                int fd = open(partial, O_WRONLY | O_CREAT | O_TRUNC, 0600);
                char line[256];
                const char *lines[] = {"reporthost-crash 1\\n", "session race\\n", "signal 11\\n", "code 1\\n", "thread 1\\n"};
                for (int l = 0; l < 5; l++) { write(fd, lines[l], strlen(lines[l])); usleep(2000); }
                snprintf(line, sizeof line, "pid %d\\ntime %ld\\nattribute crash.number=%d\\nend\\n", getpid(), (long)time(NULL), i);
                write(fd, line, strlen(line));
                fsync(fd);
                close(fd);
                rename(partial, final);
            }
            return 0;
        }
        """

    @Test("D-1, D-2: launches and reports racing a live crash writer: every launch exits 0, every report is stored, each crash is stored once")
    func launchesRacingAWriter() async throws {
        try await offPool { [self] in
            #expect(try run(["launch"]).status == 0)
            let source = folder.appendingPathComponent("writer.c")
            try Self.writerSource.write(to: source, atomically: true, encoding: .utf8)
            let program = folder.appendingPathComponent("writer")
            try Fixtures.compile([source.path, "-o", program.path])
            let count = 100
            let writer = try SpawnedChild([program.path, repository + "/crashes", String(count)], log: folder.appendingPathComponent("writer.log"))
            var reports = 0
            var round = 0
            while writer.isRunning {
                round += 1
                let result = try run(round % 2 == 0 ? ["launch"] : ["report", "error", "--summary", "own \(round)"])
                #expect(result.status == 0, "round \(round): \(result.stderr)")
                if round % 2 == 1 && result.status == 0 { reports += 1 }
            }
            _ = writer.wait()
            #expect(try run(["launch"]).status == 0)
            let numbers = try crashNumbers()
            #expect(numbers.count == count, "\(numbers.count) crash records for \(count) crash files")
            #expect(Set(numbers) == Set((0..<count).map(String.init)))
            let status = try JSONValue.parse(try run(["status", "--json", "--all"]).stdout)
            let own = status["records"]?.arrayValue?.filter { $0["trigger"] == .string("log_error") }.count ?? 0
            #expect(own == reports && reports > 0, "\(own) of \(reports) reports stored")
            let left = (try? FileManager.default.contentsOfDirectory(atPath: repository + "/crashes")) ?? []
            #expect(left.allSatisfy { $0 == "rejected" } && !left.contains { $0.hasSuffix(".crash") || $0.hasSuffix(".partial") }, "\(left)")
            let rejected = (try? FileManager.default.contentsOfDirectory(atPath: repository + "/crashes/rejected")) ?? []
            #expect(rejected.isEmpty, "\(rejected)")
        }
    }

    /// Blocks every call for a minute and never completes, saying so first on stderr.
    static let blocker = fixtureHandler(
        name: "blocker", before: "on_before",
        extra: """
            #include <stdio.h>
            #include <unistd.h>
            static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                (void)c; (void)r; (void)t; (void)done;
                fprintf(stderr, "blocker: blocking\\n");
                fflush(stderr);
                sleep(60);
            }
            """)

    @Test("D-2, I-4: SIGTERM during recovery ends `launch` within its grace, whatever the chain does; the next launch recovers what was left")
    func terminatedDuringRecovery() async throws {
        try await offPool { [self] in
            #expect(try run(["launch"]).status == 0)
            for number in 0..<6 {
                let name = "race-\(Int(Date().timeIntervalSince1970))-1-1-\(number).crash"
                try crashText(number: number, pid: 1).write(toFile: repository + "/crashes/" + name, atomically: false, encoding: .utf8)
            }
            let config = folder.appendingPathComponent("slow.json")
            try #"{"limits": {"callbackTimeoutMs": 60000, "recoveredReturnMs": 60000}}"#.write(to: config, atomically: true, encoding: .utf8)
            let blocker = try Fixtures.plugin("blocker", source: Self.blocker)
            let log = folder.appendingPathComponent("launch.log")
            let launch = try SpawnedChild(
                [Products.reporthost.path, "launch", "--handler", blocker.path, "--config", config.path, "--repository", repository], log: log)
            // Waits (at most 30 s) for the first recovered chain to reach the blocking call.
            var polls = 0
            while !launch.log.contains("blocker: blocking") && launch.isRunning && polls < 3_000 {
                polls += 1
                usleep(10_000)
            }
            #expect(launch.log.contains("blocker: blocking"), "\(launch.log)")
            kill(launch.pid, SIGTERM)
            polls = 0
            while launch.isRunning && polls < 3_000 {
                polls += 1
                usleep(10_000)
            }
            #expect(!launch.isRunning, "launch still running 30 s after SIGTERM")
            launch.kill()
            let next = try run(["launch"])
            #expect(next.status == 0, "\(next.stderr)")
            #expect(Set(try crashNumbers()) == Set((0..<6).map(String.init)))
        }
    }
}
