import Foundation
import Glibc
import Host
import HostSupport
import HostTestSupport
import Testing

/// SPEC B-6: `reporthost run` captures from outside (ptrace and libunwind-ptrace) what the
/// preload cannot reach: a statically linked program, a program with its own SIGSEGV handler,
/// a stack overflow on a thread with no alternate stack. Real programs compiled with `cc`.
@Suite struct OutsideCaptureTests {
    let folder = makeTemporaryDirectory("outside")
    var repository: String { folder.appendingPathComponent("repo").path }

    /// `crasher MODE`: `fault` writes through NULL in `write_through` (called by
    /// `parse_config`); `handled` installs its own SIGSEGV handler that prints `handled` and
    /// exits 3, then faults the same way; `overflow` recurses in `descend` on a thread of its
    /// own (no alternate stack) until the stack overflows; `fine` prints `fine` and exits 0.
    static let source = #"""
        #include <pthread.h>
        #include <signal.h>
        #include <stdio.h>
        #include <string.h>
        #include <unistd.h>

        __attribute__((noinline)) void write_through(int *p) { *(volatile int *)p = 42; }
        __attribute__((noinline)) void after_exec(int *p) { *(volatile int *)p = 43; }
        __attribute__((noinline)) void after_vfork(int *p) { *(volatile int *)p = 44; }
        __attribute__((noinline)) void parse_config(const char *s) { if (strlen(s) > 2) write_through(0); }
        __attribute__((noinline)) int descend(int depth) {
            volatile char pad[512];
            pad[0] = (char)depth;
            return descend(depth + 1) + pad[0];
        }
        static void *overflow(void *arg) { (void)arg; descend(0); return NULL; }
        static void on_segv(int signal) { (void)signal; static const char text[] = "handled\n"; write(1, text, sizeof text - 1); _exit(3); }

        int main(int argc, char **argv) {
            const char *mode = argc > 1 ? argv[1] : "fault";
            fprintf(stderr, "mode %s\n", mode);
            if (strcmp(mode, "fine") == 0) { printf("fine\n"); return 0; }
            if (strcmp(mode, "handled") == 0) signal(SIGSEGV, on_segv);
            if (strcmp(mode, "overflow") == 0) {
                pthread_t thread;
                pthread_create(&thread, NULL, overflow, NULL);
                pthread_join(thread, NULL);
            }
            parse_config("abc");
            return 0;
        }
        """#

    static func build(_ name: String, flags: [String]) -> Result<URL, Fixtures.CompileError> {
        Result {
            let output = makeTemporaryDirectory(name).appendingPathComponent(name)
            try Fixtures.compile(["-g", "-O1", "-pthread"] + flags + [try Fixtures.file("\(name).c", source).path, "-o", output.path])
            return output
        }.mapError { $0 as? Fixtures.CompileError ?? Fixtures.CompileError(description: "\($0)") }
    }

    /// `family`: a child that faults after `fork`, one after `fork`+`exec` (`family exec`), one
    /// after `vfork`+`exec` (`family vfork`), each waited for and each in a function of its
    /// own (identical crashes would be one record), then 16 threads that fault at once.
    static let familySource = #"""
        #include <pthread.h>
        #include <string.h>
        #include <sys/wait.h>
        #include <unistd.h>

        static pthread_barrier_t together;
        __attribute__((noinline)) void write_through(int *p) { *(volatile int *)p = 42; }
        __attribute__((noinline)) void after_exec(int *p) { *(volatile int *)p = 43; }
        __attribute__((noinline)) void after_vfork(int *p) { *(volatile int *)p = 44; }
        static void *fault_together(void *arg) { (void)arg; pthread_barrier_wait(&together); write_through(0); return NULL; }
        static void wait_for(pid_t child) { int status; waitpid(child, &status, 0); }

        int main(int argc, char **argv) {
            if (argc > 1 && strcmp(argv[1], "exec") == 0) after_exec(0);
            if (argc > 1 && strcmp(argv[1], "vfork") == 0) after_vfork(0);
            char *exec[] = {argv[0], "exec", NULL}, *vforked[] = {argv[0], "vfork", NULL};
            pid_t child = fork();
            if (child == 0) write_through(0);
            wait_for(child);
            child = fork();
            if (child == 0) { execv("/proc/self/exe", exec); _exit(127); }
            wait_for(child);
            child = vfork();
            if (child == 0) { execv("/proc/self/exe", vforked); _exit(127); }
            wait_for(child);
            pthread_barrier_init(&together, NULL, 16);
            pthread_t threads[16];
            for (int i = 0; i < 16; i++) pthread_create(&threads[i], NULL, fault_together, NULL);
            for (int i = 0; i < 16; i++) pthread_join(threads[i], NULL);
            return 0;
        }
        """#

    static let staticCrasher = build("static-crasher", flags: ["-static"])
    static let dynamicCrasher = build("dynamic-crasher", flags: [])
    static let family: Result<URL, Fixtures.CompileError> = Result {
        let output = makeTemporaryDirectory("family").appendingPathComponent("family")
        try Fixtures.compile(["-g", "-O1", "-pthread", try Fixtures.file("family.c", familySource).path, "-o", output.path])
        return output
    }.mapError { $0 as? Fixtures.CompileError ?? Fixtures.CompileError(description: "\($0)") }

    func run(_ options: [String], _ program: [String]) throws -> ChildProcess.Result {
        try ChildProcess.run(Products.reporthost.path, ["run", "--repository", repository] + options + ["--"] + program, directory: folder)
    }

    /// The newest crash report's document.
    func latestCrash() throws -> JSONValue? {
        let status = try ChildProcess.reporthost(["status", "--json", "--repository", repository], directory: folder)
        let records = try JSONValue.parse(status.stdout)["records"]?.arrayValue ?? []
        guard let id = records.last(where: { $0["trigger"] == .string("crash") })?["report_id"]?.stringValue else { return nil }
        return try JSONValue.parse(try ChildProcess.reporthost(["show", id, "--json", "--repository", repository], directory: folder).stdout)
    }

    /// The crashed thread's functions, innermost first.
    func functions(_ document: JSONValue?) -> [String] {
        let threads = document?["crash"]?["threads"]?.objectValue ?? []
        let crashed = threads.first { $0.1["fault"]?.boolValue == true }?.1
        return (crashed?["frames"]?.arrayValue ?? []).compactMap { $0["function"]?.stringValue }
    }

    @Test("B-6: a `cc -static` crasher under run is traced: a crash report naming its faulting function, its caller, exit 139")
    func staticProgram() throws {
        let ran = try run([], [try Self.staticCrasher.get().path])
        #expect(ran.status == 139, "\(ran.stderr)")
        #expect(!ran.stderr.contains("statically linked"), "no warning: it is traced instead")
        let document = try #require(try latestCrash())
        #expect(document["crash"]?["signal_name"]?.stringValue == "SEGV")
        let names = functions(document)
        #expect(names.first == "write_through", "\(names)")
        #expect(names.contains("parse_config") && names.contains("main"), "\(names)")
        #expect(document["summary"]?.stringValue?.contains("static-crasher") == true)
    }

    @Test("B-6: --capture=ptrace captures a program that installed its own SIGSEGV handler; its handler still runs and its status stays its own")
    func ownHandler() throws {
        let ran = try run(["--capture=ptrace"], [try Self.dynamicCrasher.get().path, "handled"])
        #expect(ran.status == 3, "\(ran.stderr)")
        #expect(ran.stdout == "handled\n")
        #expect(functions(try latestCrash()).first == "write_through")
    }

    @Test("B-6: a stack overflow on a thread with no alternate stack is captured from outside, at the recursing function")
    func stackOverflow() throws {
        let ran = try run(["--capture=ptrace"], [try Self.dynamicCrasher.get().path, "overflow"])
        #expect(ran.status == 139, "\(ran.stderr)")
        let document = try #require(try latestCrash())
        #expect(functions(document).first == "descend", "\(functions(document).prefix(5))")
    }

    @Test("B-6: the tracer follows the whole family: a child crashing after fork, fork+exec or vfork+exec is a record each; 16 threads crashing at once are one")
    func wholeFamily() throws {
        let ran = try run(["--capture=ptrace"], [try Self.family.get().path])
        #expect(ran.status == 139, "\(ran.stderr)")
        let status = try ChildProcess.reporthost(["status", "--json", "--repository", repository], directory: folder)
        let records = try JSONValue.parse(status.stdout)["records"]?.arrayValue ?? []
        let crashes = records.filter { $0["trigger"] == .string("crash") }
        #expect(crashes.count == 4, "3 children and the program: \(crashes.map { $0["summary"]?.stringValue ?? "" })")
    }

    @Test("B-6: a traced program that does not crash runs as it would: its output, its status, no report; a bad --capture is a usage error")
    func untouched() throws {
        let ran = try run(["--capture=ptrace"], [try Self.dynamicCrasher.get().path, "fine"])
        #expect(ran.status == 0 && ran.stdout == "fine\n", "\(ran.stderr)")
        #expect(try latestCrash() == nil)
        let bad = try run(["--capture=gdb"], ["/bin/true"])
        #expect(bad.status == 2 && bad.stderr.contains("--capture 'gdb'"), "\(bad.stderr)")
    }
}
