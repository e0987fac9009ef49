import Foundation
import Glibc
import Host
import HostSupport
import HostTestSupport
import Receiver
import SignalForwarding
import Testing

/// `reporthost run -- PROGRAM`: unmodified C programs under the preloaded crash writer, real
/// signals, a real loopback receiver.
@Suite struct RunCommandTests {
    let folder = makeTemporaryDirectory("run")
    var repository: String { folder.appendingPathComponent("repo").path }

    /// A C program, compiled once per run.
    static func program(_ name: String, _ source: String, cplusplus: Bool = false, flags: [String] = []) throws -> String {
        let output = makeTemporaryDirectory("run-programs").appendingPathComponent(name)
        let file = try Fixtures.file(cplusplus ? "\(name).cpp" : "\(name).c", source)
        try Fixtures.compile(
            [cplusplus ? "-std=gnu++17" : "-std=gnu11", "-Wall"] + flags + [file.path, "-o", output.path], compiler: cplusplus ? "g++" : "cc")
        return output.path
    }

    static let segv = Result { try program("segv", """
        #include <stdio.h>
        int main(void) { fprintf(stderr, "segv: about to crash\\n"); volatile int *p = 0; *p = 1; return 0; }
        """) }
    static let killed = Result { try program("killed", """
        #include <signal.h>
        #include <stdio.h>
        #include <unistd.h>
        int main(void) { fprintf(stderr, "killed: goodbye\\n"); fflush(stderr); kill(getpid(), SIGKILL); return 0; }
        """) }
    /// Installs its own SIGSEGV handler after the capture library loaded, then crashes: the
    /// handler writes a marker and exits 3.
    static let ownHandler = Result { try program("own-handler", """
        #include <signal.h>
        #include <stdio.h>
        #include <string.h>
        #include <unistd.h>
        #include <fcntl.h>
        static const char *marker;
        static void mine(int s) { (void)s; int fd = open(marker, O_WRONLY | O_CREAT, 0600); if (fd >= 0) { write(fd, "mine", 4); close(fd); } _exit(3); }
        int main(int argc, char **argv) {
            if (argc < 2) return 2;
            marker = argv[1];
            struct sigaction action;
            memset(&action, 0, sizeof action);
            action.sa_handler = mine;
            sigaction(SIGSEGV, &action, NULL);
            volatile int *p = 0; *p = 1;
            return 0;
        }
        """) }

    /// Faults three times and recovers each time with `siglongjmp` from its own SIGSEGV
    /// handler (as a runtime that uses faults on purpose does); prints "recovered 3" and exits 0.
    static let recovers = Result { try program("recovers", """
        #include <setjmp.h>
        #include <signal.h>
        #include <stdio.h>
        #include <string.h>
        static sigjmp_buf back;
        static void escape(int s) { (void)s; siglongjmp(back, 1); }
        int main(void) {
            struct sigaction action;
            memset(&action, 0, sizeof action);
            action.sa_handler = escape;
            sigaction(SIGSEGV, &action, NULL);
            volatile int recovered = 0;
            for (volatile int i = 0; i < 3; i++) {
                if (sigsetjmp(back, 1) == 0) { volatile int *p = 0; *p = i; } else { recovered++; }
            }
            printf("recovered %d\\n", recovered);
            return 0;
        }
        """) }

    /// Says "ready" on stdout, then waits; SIGTERM ends it with status 42. It gives up by
    /// itself after 20 s (SIGALRM: status 142), so a signal that never arrives fails the test
    /// instead of hanging it.
    static let waitsForTerm = Result { try program("waits-for-term", """
        #include <signal.h>
        #include <stdio.h>
        #include <unistd.h>
        static void term(int s) { (void)s; _exit(42); }
        int main(void) {
            signal(SIGTERM, term);
            alarm(20);
            printf("ready\\n");
            fflush(stdout);
            for (;;) pause();
        }
        """) }

    /// Waits for SIGUSR1 (blocked from its start, taken with sigwait), then exits 42; gives up
    /// after 20 s (SIGALRM: 142).
    static let waitsForUSR1 = Result { try program("waits-for-usr1", """
        #include <signal.h>
        #include <unistd.h>
        int main(void) {
            sigset_t set;
            sigemptyset(&set);
            sigaddset(&set, SIGUSR1);
            sigprocmask(SIG_BLOCK, &set, NULL);
            alarm(20);
            int number = 0;
            return sigwait(&set, &number) == 0 && number == SIGUSR1 ? 42 : 1;
        }
        """) }

    /// Throws and catches 1,000 C++ exceptions: the capture library (and the libunwind it
    /// opens) must leave the program's exception handling alone.
    static let thrower = Result { try program("thrower", """
            #include <cstdio>
            #include <stdexcept>
            int main() {
                int caught = 0;
                for (int i = 0; i < 1000; i++) {
                    try { throw std::runtime_error("again"); } catch (const std::exception &) { caught++; }
                }
                std::printf("caught %d\\n", caught);
                return caught == 1000 ? 0 : 1;
            }
            """, cplusplus: true) }

    /// A master that forks a worker, which segfaults; the master reaps it and exits 0 (as a
    /// server does at shutdown), or, with an argument, kills itself with SIGKILL.
    static let forkingMaster = Result { try program("forking-master", """
        #include <signal.h>
        #include <sys/wait.h>
        #include <unistd.h>
        int main(int argc, char **argv) {
            (void)argv;
            pid_t worker = fork();
            if (worker == 0) { volatile int *p = 0; *p = 1; _exit(9); }
            int status = 0;
            waitpid(worker, &status, 0);
            if (argc > 1) kill(getpid(), SIGKILL);
            return WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV ? 0 : 1;
        }
        """) }

    /// A daemon's housekeeping, then a crash: it prints the descriptors it was given, closes
    /// every one above 2, opens its own output and input at 3 and 4 (in either order), and
    /// crashes (a NULL write, or first a smashed frame pointer and return address, which
    /// sends libunwind down its validated fallback path). Its own SIGSEGV handler, chained
    /// behind the capture, appends the rest of its input to its output.
    static let daemon = Result { try program("daemon", #"""
        /* A program watched with the capture preloaded: it reports the descriptors it was given,
         * closes everything above 2, opens its own files at 3 and 4, and crashes.
         * usage: victim OUTPUT INPUT ORDER CRASH [seccomp]
         *   ORDER: out-in (output at 3, input at 4) or in-out (input at 3, output at 4)
         *   CRASH: null (a NULL write), smash (saved rbp and return address overwritten first) or
         *          callnull (a call through a NULL function pointer)
         *   seccomp: process_vm_readv is refused with EPERM before the crash (a sandbox) */
        #define _GNU_SOURCE
        #include <dirent.h>
        #include <fcntl.h>
        #include <linux/filter.h>
        #include <linux/seccomp.h>
        #include <stddef.h>
        #include <sys/prctl.h>
        #include <sys/syscall.h>
        #include <signal.h>
        #include <stdint.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        #include <unistd.h>

        static int out_fd = -1, in_fd = -1;

        static void on_segv(int signal_number) {
            /* Runs after the capture wrote its file (chained): the program's own descriptors must
               still be its own, at the position it left them. */
            char rest[64];
            ssize_t n = read(in_fd, rest, sizeof rest);
            const char head[] = "rest:";
            if (write(out_fd, head, 5) != 5) _exit(90);
            if (n > 0 && write(out_fd, rest, (size_t)n) != n) _exit(91);
            if (write(out_fd, "\n", 1) != 1) _exit(92);
            (void)head;
            signal(signal_number, SIG_DFL);
            raise(signal_number);
        }

        static uintptr_t junk[64];

        __attribute__((noinline)) static void crash_null(void) {
            *(volatile int *)0 = 1;
        }

        __attribute__((noinline)) static void crash_smashed(void) {
            /* The frame record: [rbp] the caller's rbp, [rbp+8] our return address. A return
               address without unwind info sends libunwind to its frame-chain fallback (validated
               reads) through a chain of mapped junk. */
            volatile uintptr_t *frame = __builtin_frame_address(0);
            for (int i = 0; i < 64; i++) junk[i] = (uintptr_t)&junk[(i + 2) % 64];
            frame[0] = (uintptr_t)&junk[0];
            frame[1] = (uintptr_t)&junk[8]; /* "code" in .bss: no FDE */
            *(volatile int *)0 = 1;
        }

        __attribute__((noinline)) static void call_null(void (*volatile function)(void)) {
            function();
            __asm__ volatile("");
        }

        static void refuse_process_vm_readv(void) {
            struct sock_filter code[] = {
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 0, 1),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 1 /* EPERM */),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
            };
            struct sock_fprog program = {sizeof code / sizeof *code, code};
            if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) _exit(7);
        }

        int main(int argc, char **argv) {
            if (argc != 5 && argc != 6) return 2;
            /* 1. what we were given */
            DIR *d = opendir("/proc/self/fd");
            if (!d) return 3;
            char list[512] = "fds:";
            struct dirent *e;
            int fds[256], count = 0;
            while ((e = readdir(d)) && count < 256) {
                if (e->d_name[0] == '.') continue;
                int fd = atoi(e->d_name);
                if (fd != dirfd(d)) fds[count++] = fd;
            }
            closedir(d);
            for (int i = 0; i < count; i++)
                for (int j = i + 1; j < count; j++)
                    if (fds[j] < fds[i]) { int t = fds[i]; fds[i] = fds[j]; fds[j] = t; }
            for (int i = 0; i < count; i++) snprintf(list + strlen(list), sizeof list - strlen(list), " %d", fds[i]);
            fprintf(stderr, "%s\n", list);
            /* 2. a daemon's housekeeping */
            for (int fd = 3; fd < 1024; fd++) close(fd);
            if (strcmp(argv[3], "out-in") == 0) {
                out_fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
                in_fd = open(argv[2], O_RDONLY);
            } else {
                in_fd = open(argv[2], O_RDONLY);
                out_fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
            }
            fprintf(stderr, "out=%d in=%d\n", out_fd, in_fd);
            char first[5];
            if (read(in_fd, first, 5) != 5) return 4;
            const char content[] = "PROGRAM-OUTPUT\n";
            if (write(out_fd, content, sizeof content - 1) != (ssize_t)sizeof content - 1) return 5;
            signal(SIGSEGV, on_segv);
            if (argc == 6 && strcmp(argv[5], "seccomp") == 0) refuse_process_vm_readv();
            if (strcmp(argv[4], "smash") == 0) crash_smashed();
            else if (strcmp(argv[4], "callnull") == 0) call_null(NULL);
            else crash_null();
            return 6;
        }
        """#, flags: ["-O0", "-fno-omit-frame-pointer"]) }

    func config(_ receiver: LocalReceiver) throws -> String {
        let plugin = try Fixtures.freshCopy(of: Fixtures.plugin("marker", source: markerHandler))
        let file = folder.appendingPathComponent("c-\(UUID().uuidString).json")
        try #"{"plugins": {"handler": "\#(plugin.path)"}, "attributes": {"deployment": "test"}, "submission": {"url": "\#(receiver.url)", "timeoutMs": 5000}, "retry": {"intervalSeconds": 0}}"#
            .write(to: file, atomically: true, encoding: .utf8)
        return file.path
    }

    func run(_ arguments: [String], program: [String], input: Data? = nil) throws -> ChildProcess.Result {
        try ChildProcess.run(
            Products.reporthost.path, ["run", "--repository", repository] + arguments + ["--"] + program,
            directory: folder, input: input)
    }

    func records() throws -> [JSONValue] {
        let status = try ChildProcess.reporthost(["status", "--json", "--repository", repository], directory: folder)
        return try JSONValue.parse(status.stdout)["records"]?.arrayValue ?? []
    }

    /// The crashes stored: identical ones count on one record (SPEC B-3), each counted.
    func crashCount() throws -> Int {
        try records().filter { $0["trigger"] == .string("crash") }.compactMap { $0["report_id"]?.stringValue }.reduce(0) { total, id in
            let shown = try ChildProcess.reporthost(["show", id, "--json", "--repository", repository], directory: folder)
            return total + (try JSONValue.parse(shown.stdout)["duplicates"]?.intValue ?? 0)
        }
    }

    @Test("D-1, run: a C program that segfaults: run exits 139, its crash is recovered at once, changed by a plugin, with its stderr, and delivered")
    func segfault() async throws {
        try await offPool { [self] in
            let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got"))
            defer { receiver.stop() }
            let result = try run(["--config", try config(receiver), "--attach-output", "1"], program: [try Self.segv.get()])
            #expect(result.status == 139 && result.signal == nil, "\(result.stderr)")
            #expect(result.stderr.contains("segv: about to crash"), "stderr passes through")
            let received = try #require(receiver.received.first, "\(result.stderr)")
            #expect(receiver.received.count == 1)
            #expect(received.report["attributes"]?["error.type"] == .string("Crash"))
            #expect(received.report["attributes"]?["changed.by"] == .string("marker"))
            #expect(received.report["attributes"]?["deployment"] == .string("test"), "the configuration's attributes reach the crash file")
            #expect(received.report["attributes"]?["reporthost.program"] == .string("segv"))
            #expect(received.attachments["stderr.txt"] == Data("segv: about to crash\n".utf8))
            #expect(try records().map { $0["state"] } == [.string("terminal")])
        }
    }

    @Test("D-16, run: a program killed with SIGKILL: run exits 137, and an abnormal_exit report names the signal and status")
    func sigkill() async throws {
        try await offPool { [self] in
            let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got"))
            defer { receiver.stop() }
            let result = try run(["--config", try config(receiver), "--attach-output", "1"], program: [try Self.killed.get()])
            #expect(result.status == 137 && result.signal == nil, "\(result.stderr)")
            let report = try #require(receiver.received.first?.report, "\(result.stderr)")
            #expect(report["attributes"]?["reporthost.trigger"] == .string("abnormal_exit"))
            #expect(report["attributes"]?["reporthost.exit_signal"] == .string("SIGKILL"))
            #expect(report["attributes"]?["reporthost.exit_status"] == .string("137"))
            #expect(report["attributes"]?["changed.by"] == .string("marker"))
            #expect(receiver.received.first?.attachments["stderr.txt"] == Data("killed: goodbye\n".utf8))
        }
    }

    @Test("D-16, run: --attach-output keeps exactly the last KB of a long stderr, which still passes through whole")
    func outputTail() async throws {
        try await offPool { [self] in
            let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got"))
            defer { receiver.stop() }
            let script = #"i=0; while [ $i -lt 5000 ]; do echo "line $i" >&2; i=$((i+1)); done; kill -9 $$"#
            let result = try run(["--config", try config(receiver), "--attach-output", "1"], program: ["/bin/sh", "-c", script])
            #expect(result.status == 137, "\(result.stderr.suffix(300))")
            let whole = (0..<5_000).map { "line \($0)\n" }.joined()
            #expect(result.stderr.contains(whole), "the whole stream passes through")
            let attached = try #require(receiver.received.first?.attachments["stderr.txt"])
            #expect(attached == Data(whole.utf8.suffix(1_024)))
        }
    }

    @Test("D-1, run: a program that installs its own SIGSEGV handler keeps it: the crash file is written, then its handler runs")
    func programHandlerChained() async throws {
        try await offPool { [self] in
            let marker = folder.appendingPathComponent("marker").path
            let result = try run([], program: [try Self.ownHandler.get(), marker])
            #expect(result.status == 3, "its handler's exit status: \(result.stderr)")
            #expect((try? String(contentsOfFile: marker, encoding: .utf8)) == "mine")
            let crash = try records().first { $0["trigger"] == .string("crash") }
            #expect(crash != nil, "the crash was captured before its handler ran")
        }
    }

    @Test("run: a program whose own SIGSEGV handler escapes with siglongjmp survives every fault under run, as it does alone; the faults it survived are not crashes")
    func siglongjmpRecovers() async throws {
        try await offPool { [self] in
            let program = try Self.recovers.get()
            let alone = try ChildProcess.run(program, [])
            #expect(alone.status == 0 && alone.stdout == "recovered 3\n")
            let result = try run(["--log-level", "debug"], program: [program])
            #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
            #expect(result.stdout == "recovered 3\n")
            // It went on after each fault and exited 0: the crash files its faults left are
            // discarded with a debug line, never stored.
            #expect(result.stderr.contains("discarded: recovers survived the fault"), "\(result.stderr)")
            #expect(try records().isEmpty)
            let left = try FileManager.default.contentsOfDirectory(atPath: repository + "/crashes").filter { $0.hasSuffix(".crash") }
            #expect(left.isEmpty, "\(left)")
        }
    }
}
