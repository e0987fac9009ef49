import Foundation
import Glibc
import Host
import HostSupport
import HostTestSupport
import Testing

/// SPEC B-4: a C program linked with libreporthost.so watches its main loop; when the loop
/// blocks, one `app_hang` report with the hung thread's stack, read from outside while the
/// program goes on.
@Suite struct AppHangTests {
    let fixture = CommandFixture("app-hang")

    /// `hang REPOSITORY TIMEOUT_MS BLOCK_MS [BLOCKS [AT_ONCE]]`: watches its main thread, prints
    /// `thread <tid>`, heartbeats ten times 50 ms apart, then BLOCKS times (default 1) leaves a
    /// breadcrumb and blocks BLOCK_MS in `wait_for_the_lock` (nanosleep), heartbeating ten
    /// times between blocks (with AT_ONCE 1, once after the last block, then it stops at once);
    /// prints `slept <ms>` for each block (how long the call really took), stops and prints
    /// `done`.
    static let program: Result<URL, Fixtures.CompileError> = EmbedTests.linked("hang-driver", source: {
        try Fixtures.file("hang-driver.c", #"""
            #define _GNU_SOURCE
            #include <reporthost/embed.h>
            #include <stdio.h>
            #include <stdlib.h>
            #include <time.h>
            #include <unistd.h>

            static double now_ms(void) {
                struct timespec t;
                clock_gettime(CLOCK_MONOTONIC, &t);
                return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
            }

            __attribute__((noinline)) void wait_for_the_lock(int ms) {
                struct timespec wait = {ms / 1000, (ms % 1000) * 1000000L};
                nanosleep(&wait, NULL);
            }

            static void beat(rh_embed *h) {
                for (int i = 0; i < 10; i++) {
                    rh_embed_heartbeat(h);
                    usleep(50000);
                }
            }

            int main(int argc, char **argv) {
                if (argc < 4) return 2;
                char error[256];
                rh_embed *h = rh_embed_start(NULL, argv[1], error, sizeof error);
                if (!h) { printf("start failed: %s\n", error); return 1; }
                if (rh_embed_watch_thread(h, atoi(argv[2])) != RH_EMBED_OK) return 3;
                printf("thread %d\n", (int)gettid());
                beat(h);
                int blocks = argc > 4 ? atoi(argv[4]) : 1;
                int at_once = argc > 5 && atoi(argv[5]);
                for (int i = 0; i < blocks; i++) {
                    rh_embed_breadcrumb(h, RH_LOG_INFO, "loop", "waiting for the lock");
                    double start = now_ms();
                    wait_for_the_lock(atoi(argv[3]));
                    printf("slept %.0f\n", now_ms() - start);
                    if (at_once && i == blocks - 1) rh_embed_heartbeat(h);
                    else beat(h);
                }
                rh_embed_stop(h);
                printf("done\n");
                return 0;
            }
            """#)
    }, flags: ["-g", "-O1", "-Wall", "-Werror"])

    func records() throws -> [JSONValue] { try fixture.records().filter { $0["trigger"]?.stringValue == "app_hang" } }

    func document(_ record: JSONValue) throws -> JSONValue {
        try JSONValue.parse(try fixture.run(["show", try #require(record["report_id"]?.stringValue), "--json"]).stdout)
    }

    @Test("B-4: a heartbeat followed at once by rh_embed_stop keeps the hang's end: its length is on the report")
    func hangEndedJustBeforeStop() throws {
        let ran = try ChildProcess.run(try Self.program.get().path, [fixture.repository, "500", "1500", "1", "1"], directory: fixture.folder)
        #expect(ran.status == 0 && ran.stdout.hasSuffix("done\n"), "\(ran.stdout) \(ran.stderr.suffix(2_000))")
        let hangs = try records()
        #expect(hangs.count == 1)
        let document = try document(try #require(hangs.first))
        #expect(Int(document["attributes"]?["reporthost.hang_ms"]?.stringValue ?? "") ?? 0 >= 1_000, "\(document["attributes"] ?? .null)")
    }

    @Test("B-4: a program that heartbeats, then blocks 5 s with a 1 s timeout: one app_hang report naming the blocking function; the call lasts its 5 s and the program exits 0")
    func blockedMainLoop() throws {
        let ran = try ChildProcess.run(try Self.program.get().path, [fixture.repository, "1000", "5000"], directory: fixture.folder)
        #expect(ran.status == 0 && ran.stdout.hasSuffix("done\n"), "\(ran.stdout) \(ran.stderr.suffix(2_000))")
        let slept = ran.stdout.split(separator: "\n").first { $0.hasPrefix("slept ") }.flatMap { Int($0.dropFirst(6)) } ?? 0
        #expect(slept >= 4_990, "the blocking call was not cut short by the capture: \(slept) ms")
        let thread = try #require(ran.stdout.split(separator: "\n").first?.split(separator: " ").last.map(String.init))
        let hangs = try records()
        #expect(hangs.count == 1)
        let document = try document(try #require(hangs.first))
        #expect(document["type"]?.stringValue == "error")
        #expect(document["attributes"]?["_mod_faulting_tid"]?.stringValue == thread)
        #expect(Int(document["attributes"]?["reporthost.hang_ms"]?.stringValue ?? "") ?? 0 >= 4_000, "the length, set once the heartbeat came back")
        let frames = (document["crash"]?["threads"]?[thread]?["frames"]?.arrayValue ?? []).compactMap { $0["function"]?.stringValue }
        #expect(frames.contains("wait_for_the_lock") && frames.contains("main"), "\(frames)")
        let crumbs = (document["breadcrumbs"]?.arrayValue ?? []).compactMap { $0["message"]?.stringValue }
        #expect(crumbs.last == "waiting for the lock", "\(crumbs)")
        #expect(ran.stderr.contains("missed its heartbeat for 1000 ms"))
        let shown = try fixture.run(["show", try #require(hangs.first?["report_id"]?.stringValue)]).stdout
        #expect(shown.contains("stack of the hung thread") && shown.contains("wait_for_the_lock"), "\(shown)")
    }

    @Test("B-4: one report per hang, not per timeout: a 2 s block with a 300 ms timeout is one report; two blocks are two")
    func onePerHang() throws {
        let ran = try ChildProcess.run(try Self.program.get().path, [fixture.repository, "300", "2000", "2"], directory: fixture.folder)
        #expect(ran.status == 0, "\(ran.stderr.suffix(2_000))")
        #expect(try records().count == 2)
        let none = CommandFixture("app-hang-none")
        let quick = try ChildProcess.run(try Self.program.get().path, [none.repository, "2000", "100"], directory: none.folder)
        #expect(quick.status == 0)
        #expect(try none.records().filter { $0["trigger"]?.stringValue == "app_hang" }.isEmpty, "a block shorter than the timeout is no hang")
    }
}
