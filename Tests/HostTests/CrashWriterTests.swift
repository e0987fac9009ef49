import Foundation
import Glibc
import Host
import HostRecovery
import HostTestSupport
import Testing

/// The signal-safe writer itself (SPEC D-1), driven by small C programs compiled at test
/// time from `Sources/CrashCapture`: it never hangs on a second signal, ends the process
/// with the original signal, and hands the signal to the handler installed before it.
@Suite struct CrashWriterTests {
    let folder = makeTemporaryDirectory("crash-writer")

    /// A program linking the writer; `body` is the C code of `scenario(const char *crashes)`.
    static func driver(_ name: String, body: String) throws -> URL {
        let source = """
            #define _GNU_SOURCE
            #include "crash_capture.h"
            #include <malloc.h>
            #include <pthread.h>
            #include <signal.h>
            #include <stdio.h>
            #include <stdlib.h>
            #include <string.h>
            #include <unistd.h>
            \(body)
            int main(int argc, char **argv) {
                if (argc < 2) return 2;
                scenario(argv[1]);
                return 3; /* the scenario should have ended the process */
            }
            """
        let library = Products.packageRoot.appendingPathComponent("Sources/CrashCapture")
        let sourceFile = try Fixtures.file("\(name).c", source)
        let output = sourceFile.deletingPathExtension()
        try Fixtures.compile([
            "-std=c11", "-O1", "-Wall", "-Werror", "-pthread", "-I", library.appendingPathComponent("include").path,
            sourceFile.path,
        ] + (try FileManager.default.contentsOfDirectory(atPath: library.path)).filter { $0.hasSuffix(".c") }.sorted()
            .map { library.appendingPathComponent($0).path } + ["-o", output.path])
        return output
    }

    /// Runs `program` with the crash folder; gives up (SIGKILL) after `limitSeconds`.
    func run(_ program: URL, limitSeconds: Int = 20) throws -> (result: ChildProcess.Result, crashes: [CrashFile]) {
        let crashes = folder.appendingPathComponent("crashes-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: crashes, withIntermediateDirectories: true)
        let result = try ChildProcess.run("/usr/bin/timeout", ["-s", "KILL", String(limitSeconds), program.path, crashes.path])
        let files = try FileManager.default.contentsOfDirectory(atPath: crashes.path).sorted()
        return (result, files.compactMap { CrashFile(path: crashes.appendingPathComponent($0).path, modifiedAt: Date(), system: .live) })
    }

    @Test("D-1: a fault inside the writer ends the process with the original signal, keeping what was written")
    func faultInsideTheWriter() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool { [self] in
            let program = try Self.driver("writer-fault", body: """
                static void fault(int stage) { (void)stage; volatile int *p = NULL; *p = 1; }
                static void scenario(const char *crashes) {
                    rh_crash_install(crashes, "writer-fault");
                    rh_crash_set_writer_hook(fault);
                    abort();
                }
                """)
            let (result, crashes) = try run(program)
            #expect(result.signal == SIGABRT, "\(result)")
            #expect(crashes.count == 1)
            let crash = try #require(crashes.first)
            #expect(crash.signal == SIGABRT)
            #expect(!crash.complete)  // ended where the fault happened
            #expect(crash.session == "writer-fault")
        }
    }

    @Test("D-1: a signal on another thread while the writer runs waits for it; the process ends with the original signal and a complete file")
    func abortFromAnotherThread() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool { [self] in
            let program = try Self.driver("other-thread", body: """
                static void *aborter(void *unused) { (void)unused; abort(); return NULL; }
                static void start_aborter(int stage) {
                    (void)stage;
                    pthread_t thread;
                    pthread_create(&thread, NULL, aborter, NULL);
                    /* Go on only once the other thread waits in the handler. */
                    for (int i = 0; i < 2000 && rh_crash_waiting_threads() == 0; i++) usleep(1000);
                    if (rh_crash_waiting_threads() == 0) _exit(4);
                }
                static void scenario(const char *crashes) {
                    rh_crash_install(crashes, "other-thread");
                    rh_crash_set_writer_hook(start_aborter);
                    rh_crash_now(SIGSEGV);
                }
                """)
            let (result, crashes) = try run(program)
            #expect(result.signal == SIGSEGV, "\(result)")
            #expect(crashes.count == 1)
            #expect(crashes.first?.complete == true)
            #expect(crashes.first?.signal == SIGSEGV)
        }
    }

    @Test("D-1: the stack is unwound by libunwind from the signal's context: it starts at the faulting instruction, not in the handler")
    func unwindsFromTheFault() async throws {
        try await offPool { [self] in
            let program = try Self.driver("unwind", body: """
                __attribute__((noinline)) static void fault_here(volatile int *nothing) { *nothing = 1; }
                __attribute__((noinline)) static void caller(void) { fault_here(NULL); __asm__ volatile(""); }
                static void scenario(const char *crashes) {
                    rh_crash_install(crashes, "unwind");
                    caller();
                }
                """)
            let (result, crashes) = try run(program)
            #expect(result.signal == SIGSEGV, "\(result)")
            let crash = try #require(crashes.first, "\(result.stderr)")
            let pc = try #require(crash.programCounter)
            // backtrace() would start with the writer's own frames and the signal trampoline.
            #expect(crash.frames.first == pc, "frames \(crash.frames.prefix(4).map { String($0, radix: 16) }), pc \(String(pc, radix: 16))")
            #expect(crash.frames.count >= 4, "the fault, its caller, scenario, main: \(crash.frames.count)")

            // A call through a NULL function pointer faults at 0: the stack still goes on.
            let null = try Self.driver("unwind-null", body: """
                __attribute__((noinline)) static void call_null(void (*volatile function)(void)) { function(); __asm__ volatile(""); }
                static void scenario(const char *crashes) {
                    rh_crash_install(crashes, "unwind-null");
                    call_null(NULL);
                }
                """)
            let (nullResult, nullCrashes) = try run(null)
            #expect(nullResult.signal == SIGSEGV, "\(nullResult)")
            let nullCrash = try #require(nullCrashes.first, "\(nullResult.stderr)")
            #expect(nullCrash.frames.first == 0 && nullCrash.frames.count >= 3, "\(nullCrash.frames.map { String($0, radix: 16) })")
        }
    }

    @Test("D-1: host-wide attributes set and removed from 8 threads at once end in the crash file exactly as last set")
    func attributesFromManyThreads() async throws {
        try await offPool { [self] in
            let program = try Self.driver("attributes", body: """
                static void *churn(void *argument) {
                    long id = (long)argument;
                    char key[16], value[32];
                    /* Keys come and go, so threads race for the same emptied slots. */
                    for (int i = 0; i < 20000; i++) {
                        char churned[16];
                        snprintf(churned, sizeof churned, "c%ld-%d", id, i % 4);
                        snprintf(value, sizeof value, "v%d", i);
                        rh_crash_set_attribute(churned, value);
                        rh_crash_remove_attribute(churned);
                    }
                    snprintf(key, sizeof key, "k%ld", id);
                    snprintf(value, sizeof value, "final%ld", id);
                    rh_crash_set_attribute(key, value);
                    return NULL;
                }
                static void scenario(const char *crashes) {
                    rh_crash_install(crashes, "attributes");
                    pthread_t threads[8];
                    for (long i = 0; i < 8; i++) pthread_create(&threads[i], NULL, churn, (void *)i);
                    for (int i = 0; i < 8; i++) pthread_join(threads[i], NULL);
                    rh_crash_now(SIGSEGV);
                }
                """)
            let (result, crashes) = try run(program)
            #expect(result.signal == SIGSEGV, "\(result)")
            let crash = try #require(crashes.first, "\(result.stderr)")
            let expected = Dictionary(uniqueKeysWithValues: (0..<8).map { ("k\($0)", "final\($0)") })
            #expect(crash.attributes == expected)
        }
    }

    @Test("D-1: after writing, the handler installed before ours gets the signal")
    func chainsToThePreviousHandler() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool { [self] in
            let program = try Self.driver("chain", body: """
                static void previous(int signal_number, siginfo_t *info, void *context) {
                    (void)info; (void)context;
                    static const char text[] = "previous handler ran\\n";
                    write(1, text, sizeof text - 1);
                    signal(signal_number, SIG_DFL);
                    raise(signal_number);
                }
                static void scenario(const char *crashes) {
                    struct sigaction action;
                    memset(&action, 0, sizeof action);
                    action.sa_sigaction = previous;
                    action.sa_flags = SA_SIGINFO;
                    sigaction(SIGSEGV, &action, NULL);
                    sigaction(SIGABRT, &action, NULL);
                    rh_crash_install(crashes, "chain");
                    rh_crash_now(strcmp(getenv("CRASH") ? getenv("CRASH") : "", "ABRT") == 0 ? SIGABRT : SIGSEGV);
                }
                """)
            for (name, number) in [("SEGV", SIGSEGV), ("ABRT", SIGABRT)] {
                let crashes = folder.appendingPathComponent("chain-\(name)")
                try FileManager.default.createDirectory(at: crashes, withIntermediateDirectories: true)
                let result = try ChildProcess.run(program.path, [crashes.path], environment: ["CRASH": name])
                #expect(result.signal == number, "\(name): \(result)")
                #expect(result.stdout == "previous handler ran\n", "\(name)")
                let files = try FileManager.default.contentsOfDirectory(atPath: crashes.path).filter { $0.hasSuffix(".crash") }
                #expect(files.count == 1, "\(name): \(files)")
            }
        }
    }

    @Test("D-1: an earlier handler that recovers keeps the program going; ours stays installed and captures the next signal too")
    func earlierHandlerRecovers() async throws {
        try await offPool { [self] in
            let program = try Self.driver("recovers", body: """
                static volatile int traps;
                static void previous(int signal_number) { (void)signal_number; traps++; }
                static void scenario(const char *crashes) {
                    signal(SIGTRAP, previous);
                    rh_crash_install(crashes, "recovers");
                    __asm__ volatile("int3");
                    __asm__ volatile("int3");
                    printf("survived %d traps\\n", traps);
                    fflush(stdout);
                    _exit(0);
                }
                """)
            let (result, crashes) = try run(program)
            #expect(result.status == 0 && result.stdout == "survived 2 traps\n", "\(result)")
            #expect(crashes.count == 2)
            #expect(crashes.allSatisfy { $0.signal == SIGTRAP && $0.complete })
        }
    }

    @Test("D-1: a thread's alternate stack is freed when the thread ends; a stack overflow on a prepared thread is captured")
    func threadStacks() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool { [self] in
            let program = try Self.driver("stacks", body: """
                static void *short_lived(void *unused) {
                    (void)unused;
                    rh_crash_prepare_thread();
                    return NULL;
                }
                static int deeper(volatile char *previous, int depth) {
                    volatile char frame[4096];
                    frame[0] = previous ? previous[0] + 1 : 0;
                    if (depth > (1 << 30)) return 0;  /* never: the stack ends long before */
                    return deeper(frame, depth + 1) + frame[0];
                }
                static void *overflow(void *unused) {
                    (void)unused;
                    rh_crash_prepare_thread();
                    rh_crash_enter_plugin(rh_crash_register_plugin("/plugins/deep.so", "abc"), RH_CRASH_CALL_BEFORE);
                    deeper(NULL, 0);
                    return NULL;
                }
                static void scenario(const char *crashes) {
                    mallopt(M_ARENA_MAX, 1); /* every thread allocates where mallinfo2 counts */
                    rh_crash_install(crashes, "stacks");
                    size_t before = mallinfo2().uordblks;
                    /* 2,000 threads of 64 KB stacks: 128 MB in use if they leaked; the limit is 16 MB. */
                    for (int i = 0; i < 2000; i++) {
                        pthread_t thread;
                        if (pthread_create(&thread, NULL, short_lived, NULL) != 0) _exit(5);
                        pthread_join(thread, NULL);
                    }
                    if (mallinfo2().uordblks - before > 16u * 1024 * 1024) _exit(6);
                    pthread_t thread;
                    pthread_create(&thread, NULL, overflow, NULL);
                    pthread_join(thread, NULL);
                }
                """)
            let (result, crashes) = try run(program)
            #expect(result.status != 5 && result.status != 6, "\(result)")
            #expect(result.signal == SIGSEGV, "\(result)")
            let crash = try #require(crashes.first)
            #expect(crash.plugin == CrashFile.PluginCall(path: "/plugins/deep.so", digest: "abc", name: nil, callback: "on_before_report_created"))
        }
    }
}
