import Foundation
import Glibc
import Host
import HostSupport
import HostTestSupport
import Testing

/// SPEC B-4, bounded: a hang the stack helper cannot stop, a stop during a hang, a watched
/// thread that ends, and many threads hung at once.
@Suite struct AppHangBoundsTests {
    let fixture = CommandFixture("app-hang-bounds")

    /// `hang-family REPOSITORY MODE TIMEOUT_MS ARG...`, each mode watching with TIMEOUT_MS:
    /// - `vfork BLOCK_MS STOP_AFTER_MS`: the main thread, watched, blocks BLOCK_MS as the parent
    ///   of a vfork (a wait ptrace cannot interrupt). With STOP_AFTER_MS > 0 another thread
    ///   calls rh_embed_stop that long after the block began and prints `stop <ms>` (how long
    ///   it took).
    /// - `ended`: a thread watches itself and ends; the main thread waits 4 timeouts.
    /// - `many COUNT BLOCK_MS`: COUNT threads watch themselves, then block BLOCK_MS at once in
    ///   `wait_for_the_lock`.
    /// Prints `done` after its stop.
    static let program: Result<URL, Fixtures.CompileError> = EmbedTests.linked("hang-family", source: {
        try Fixtures.file("hang-family.c", #"""
            #define _GNU_SOURCE
            #include <reporthost/embed.h>
            #include <pthread.h>
            #include <stdio.h>
            #include <stdlib.h>
            #include <string.h>
            #include <time.h>
            #include <unistd.h>

            static rh_embed *h;
            static int timeout, block, stop_after;
            static pthread_barrier_t together;

            static double now_ms(void) {
                struct timespec t;
                clock_gettime(CLOCK_MONOTONIC, &t);
                return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
            }

            static void pause_ms(int ms) {
                struct timespec wait = {ms / 1000, (ms % 1000) * 1000000L};
                while (nanosleep(&wait, &wait) != 0) {}
            }

            __attribute__((noinline)) void wait_for_the_lock(int ms) { pause_ms(ms); }

            static void *stopper(void *unused) {
                (void)unused;
                pause_ms(stop_after);
                double start = now_ms();
                rh_embed_stop(h);
                printf("stop %.0f\n", now_ms() - start);
                return NULL;
            }

            static void *ending(void *unused) {
                (void)unused;
                rh_embed_watch_thread(h, timeout);
                rh_embed_heartbeat(h);
                return NULL;
            }

            static void *blocking(void *unused) {
                (void)unused;
                rh_embed_watch_thread(h, timeout);
                pthread_barrier_wait(&together);
                rh_embed_heartbeat(h);
                wait_for_the_lock(block);
                rh_embed_heartbeat(h);
                rh_embed_watch_thread(h, 0);
                return NULL;
            }

            int main(int argc, char **argv) {
                if (argc < 4) return 2;
                char error[256];
                h = rh_embed_start(NULL, argv[1], error, sizeof error);
                if (!h) { printf("start failed: %s\n", error); return 1; }
                timeout = atoi(argv[3]);
                setvbuf(stdout, NULL, _IONBF, 0);
                if (strcmp(argv[2], "vfork") == 0 && argc == 6) {
                    block = atoi(argv[4]);
                    stop_after = atoi(argv[5]);
                    rh_embed_watch_thread(h, timeout);
                    rh_embed_heartbeat(h);
                    pthread_t thread;
                    if (stop_after > 0) pthread_create(&thread, NULL, stopper, NULL);
                    if (vfork() == 0) {
                        pause_ms(block);
                        _exit(0);
                    }
                    if (stop_after > 0) {
                        pthread_join(thread, NULL);
                        printf("done\n");
                        return 0;
                    }
                    rh_embed_heartbeat(h);
                } else if (strcmp(argv[2], "ended") == 0) {
                    pthread_t thread;
                    pthread_create(&thread, NULL, ending, NULL);
                    pthread_join(thread, NULL);
                    pause_ms(4 * timeout);
                } else if (strcmp(argv[2], "many") == 0 && argc == 6) {
                    int count = atoi(argv[4]);
                    block = atoi(argv[5]);
                    pthread_barrier_init(&together, NULL, count);
                    pthread_t threads[count];
                    for (int i = 0; i < count; i++) pthread_create(&threads[i], NULL, blocking, NULL);
                    for (int i = 0; i < count; i++) pthread_join(threads[i], NULL);
                } else {
                    return 2;
                }
                rh_embed_stop(h);
                printf("done\n");
                return 0;
            }
            """#)
    }, flags: ["-g", "-O1", "-Wall", "-Werror", "-pthread"])

    func hangs() throws -> [JSONValue] {
        try fixture.records().filter { $0["trigger"]?.stringValue == "app_hang" }.map { record in
            try JSONValue.parse(try fixture.run(["show", try #require(record["report_id"]?.stringValue), "--json"]).stdout)
        }
    }

    func run(_ arguments: [String]) throws -> ChildProcess.Result {
        let ran = try ChildProcess.run(try Self.program.get().path, [fixture.repository] + arguments, directory: fixture.folder)
        #expect(ran.status == 0 && ran.stdout.hasSuffix("done\n"), "\(ran.stdout) \(ran.stderr.suffix(2_000))")
        return ran
    }

    @Test("B-4: a thread hung where ptrace cannot stop it (the parent of a vfork) is reported within the helper's 1 s, without a stack, saying why")
    func unstoppableHang() throws {
        let ran = try run(["vfork", "300", "4000", "0"])
        let hangs = try hangs()
        #expect(hangs.count == 1)
        let attributes = try #require(hangs.first?["attributes"])
        #expect(attributes["reporthost.hang_stack_missing"]?.stringValue?.contains("did not stop within 1000 ms") == true, "\(attributes)")
        #expect(hangs.first?["crash"] == nil || hangs.first?["crash"] == .null, "no stack was taken")
        #expect(ran.stderr.contains("app hang: no stack for"), "\(ran.stderr.suffix(2_000))")
    }

    @Test("B-4: rh_embed_stop during a hang's capture returns within 2 s; the hang is still reported, with its cause")
    func stopIsBounded() throws {
        // The helper could wait for the vfork's 6 s: the stop killed it.
        let ran = try run(["vfork", "300", "6000", "600"])
        let took = ran.stdout.split(separator: "\n").first { $0.hasPrefix("stop ") }.flatMap { Int($0.dropFirst(5)) }
        let stop = try #require(took, "\(ran.stdout)")
        #expect(stop <= 2_000, "rh_embed_stop took \(stop) ms")
        let hangs = try hangs()
        #expect(hangs.count == 1)
        #expect(hangs.first?["attributes"]?["reporthost.hang_stack_missing"]?.stringValue?.isEmpty == false)
    }

    @Test("B-4: a watch ends with its thread: a watched thread that exits is never reported as hung")
    func watchEndsWithThread() throws {
        let ran = try run(["ended", "300"])
        #expect(try hangs().isEmpty)
        #expect(ran.stderr.contains("ended while watched; its watch ended with it"), "\(ran.stderr.suffix(2_000))")
    }

    @Test("B-4: 12 threads hung at once are captured together: few reports, each saying how many threads, with every thread's stack")
    func manyAtOnce() throws {
        // Each stays hung long enough for the watchdog to see it, even on a loaded machine.
        _ = try run(["many", "300", "12", "6000"])
        let hangs = try hangs()
        let counts = hangs.map { Int($0["attributes"]?["reporthost.hang_threads"]?.stringValue ?? "") ?? 0 }
        #expect(counts.reduce(0, +) == 12, "\(counts)")
        #expect(hangs.count <= 3, "one report per wake-up of the watchdog, not per thread: \(counts)")
        for (hang, count) in zip(hangs, counts) {
            let threads = hang["crash"]?["threads"]?.objectValue ?? []
            #expect(threads.count == count, "every thread's stack: \(threads.map(\.0))")
            for (_, thread) in threads {
                let frames = (thread["frames"]?.arrayValue ?? []).compactMap { $0["function"]?.stringValue }
                #expect(frames.contains("wait_for_the_lock"), "\(frames)")
            }
        }
    }
}
