import Foundation
import Glibc
import Host
import HostSupport
import HostTestSupport
import Receiver
import SignalForwarding
import Testing

/// `run` (continued): the program's descriptors, signals, forked workers and preloaded libraries.
extension RunCommandTests {
    @Test("D-1, run: the program's descriptors are its own: it sees only what run inherited, and a crash (through a smashed stack too) neither writes its output file nor moves its input")
    func descriptorsAreTheProgramsOwn() async throws {
        try await offPool { [self] in
            let program = try Self.daemon.get()
            for order in ["out-in", "in-out"] {
                for crash in ["null", "smash"] {
                    let label = "\(order) \(crash)"
                    let input = folder.appendingPathComponent("in-\(order)-\(crash)")
                    let output = folder.appendingPathComponent("out-\(order)-\(crash)")
                    try Data("ABCDEFGHIJ".utf8).write(to: input)
                    // Started with fds 0-2 only (tests in parallel leak descriptors into children).
                    let watched = try ChildProcess.run(
                        "/usr/bin/python3",
                        ["-c", "import os, sys; os.closerange(3, 65536); os.execv(sys.argv[1], sys.argv[1:])", Products.reporthost.path,
                         "run", "--repository", repository, "--", program, output.path, input.path, order, crash],
                        directory: folder)
                    #expect(watched.status == 139, "\(label): \(watched.stderr)")
                    let given = watched.stderr.split(separator: "\n").first { $0.hasPrefix("fds:") }
                    #expect(given == "fds: 0 1 2", "\(label): \(watched.stderr)")
                    let written = String(decoding: try Data(contentsOf: output), as: UTF8.self)
                    #expect(written == "PROGRAM-OUTPUT\nrest:FGHIJ\n", "\(label): \(written.debugDescription)")
                }
            }
            #expect(try crashCount() == 4)
        }
    }

    @Test("D-1, run: a forked worker's crash is a report although its master exits 0; a master killed after it is an abnormal exit as well")
    func forkedWorkerCrash() async throws {
        try await offPool { [self] in
            let program = try Self.forkingMaster.get()
            let clean = try run([], program: [program])
            #expect(clean.status == 0, "\(clean.stderr)")
            #expect(try records().map { $0["trigger"] } == [.string("crash")], "the worker's crash was discarded: \(clean.stderr)")
            let killed = try run([], program: [program, "die"])
            #expect(killed.status == 137, "\(killed.stderr)")
            // The two workers' crashes are the same crash: one record counting two (SPEC B-3).
            let triggers = try records().compactMap { $0["trigger"]?.stringValue }.sorted()
            #expect(triggers == ["abnormal_exit", "crash"], "\(triggers)")
            #expect(try crashCount() == 2)
        }
    }

    @Test("run: a setuid program, which the crash writer cannot be preloaded into, gets one warning at start (and --capture=ptrace is refused, exit 2); a static one is traced instead (B-6), without one; each still runs and run exits with its status")
    func unwatchablePrograms() async throws {
        try await offPool { [self] in
            let output = makeTemporaryDirectory("run-programs")
            let source = try Fixtures.file("exits.c", "int main(void) { return 5; }\n")
            let statically = output.appendingPathComponent("static-exits").path
            try Fixtures.compile(["-static", source.path, "-o", statically])
            let dynamic = output.appendingPathComponent("dynamic-exits").path
            try Fixtures.compile([source.path, "-o", dynamic])
            let setuid = output.appendingPathComponent("setuid-exits").path
            try Fixtures.compile([source.path, "-o", setuid])
            chmod(setuid, 0o4755)
            for (program, problem) in [(statically, nil), (setuid, "is setuid or setgid"), (dynamic, nil)] {
                let result = try run([], program: [program])
                #expect(result.status == 5, "\(program): \(result.stderr)")
                let warnings = result.stderr.split(separator: "\n").filter { $0.contains("warn") }
                if let problem {
                    #expect(warnings.count == 1 && warnings[0].contains("run: \(program) \(problem)"), "\(result.stderr)")
                } else {
                    #expect(warnings.isEmpty, "\(result.stderr)")
                }
            }
            // Traced, the kernel would run a setuid program without its privileges: refused.
            let traced = try run(["--capture=ptrace"], program: [setuid])
            #expect(traced.status == 2, "\(traced.stderr)")
            #expect(traced.stderr.contains("is setuid or setgid: it is never traced"), "\(traced.stderr)")
        }
    }

    @Test("run: a program started with standard input closed finds it closed: no pipe or file of the host lands on fd 0")
    func closedStandardInputStaysClosed() async throws {
        try await offPool { [self] in
            let inner = "\(Products.reporthost.path) run --repository \(repository) -- /bin/sh -c 'ls /proc/$$/fd'"
            let result = try ChildProcess.run("/bin/sh", ["-c", "exec 0<&-; exec \(inner)"], directory: folder)
            #expect(result.status == 0, "\(result.stderr)")
            let descriptors = Set(result.stdout.split(separator: "\n").compactMap { Int($0) })
            #expect(!descriptors.contains(0), "fd 0 stayed closed: \(descriptors.sorted())")
            #expect(descriptors.contains(1) && descriptors.contains(2))
        }
    }

    @Test("I-1, run: standard input and output are the program's, its exit status is run's, and a clean exit stores nothing")
    func passThrough() async throws {
        try await offPool { [self] in
            let result = try run([], program: ["/bin/sh", "-c", "read line; echo \"got $line\"; exit 7"], input: Data("hello\n".utf8))
            #expect(result.status == 7)
            #expect(result.stdout == "got hello\n")
            #expect(try records().isEmpty)
        }
    }

    @Test("I-1, run: a SIGTERM sent to run reaches the program, even when run started with the signal blocked, and run exits with its status")
    func signalPassedOn() async throws {
        try await offPool { [self] in
            let words = [Products.reporthost.path, "run", "--repository", repository, "--", try Self.waitsForTerm.get()]
            // The mask a parent spawning from a libdispatch worker thread hands down.
            let run = try SpawnedChild(words, log: folder.appendingPathComponent("run.log"), blocking: [SIGTERM])
            #expect(run.readLine() == "ready", "\(run.log)")
            kill(run.pid, SIGTERM)
            #expect(run.wait() == 42, "the program's own SIGTERM status, not 142 (it never heard the signal): \(run.log)")
            #expect(try records().isEmpty, "a program that ended itself on SIGTERM is no abnormal exit")
        }
    }

    @Test("I-1, run: a signal sent before the child's pid is known reaches the child once it is; one sent after goes straight on")
    func signalBeforeChildStarts() async throws {
        try await offPool { [self] in
            // This process stands in for `run`: its own thread takes the signal, synchronously.
            // The test process's own SIGUSR1 disposition comes back afterwards.
            var previous = sigaction()
            sigaction(SIGUSR1, nil, &previous)
            defer {
                rh_forward_stop()
                sigaction(SIGUSR1, &previous, nil)
            }
            rh_forward_install([SIGUSR1], 1)
            var set = sigset_t()
            sigemptyset(&set)
            sigaddset(&set, SIGUSR1)
            pthread_sigmask(SIG_UNBLOCK, &set, nil)
            pthread_kill(pthread_self(), SIGUSR1)
            let early = try SpawnedChild([try Self.waitsForUSR1.get()], log: folder.appendingPathComponent("early.log"), blocking: [SIGUSR1])
            rh_forward_start(early.pid)
            #expect(early.wait() == 42, "the early signal was kept and sent (142: it never came)")
            rh_forward_stop()

            // Stop gave the signal back its earlier disposition: install again.
            rh_forward_install([SIGUSR1], 1)
            let late = try SpawnedChild([try Self.waitsForUSR1.get()], log: folder.appendingPathComponent("late.log"), blocking: [SIGUSR1])
            rh_forward_start(late.pid)
            pthread_kill(pthread_self(), SIGUSR1)
            #expect(late.wait() == 42)
        }
    }

    @Test("D-1, run: a C++ program's exceptions still work with the capture library preloaded")
    func cppExceptions() async throws {
        try await offPool { [self] in
            let result = try run([], program: [try Self.thrower.get()])
            #expect(result.status == 0 && result.stdout == "caught 1000\n", "\(result.stdout) \(result.stderr)")
        }
    }

    @Test("D-1, run: the capture library's libunwind is loaded privately: its exception ABI is not in the program's global scope")
    func unwinderIsPrivate() async throws {
        try await offPool { [self] in
            let probe = try Self.program("unwinder-probe", """
                #define _GNU_SOURCE
                #include <dlfcn.h>
                #include <stdio.h>
                int main(void) {
                    int loaded = dlopen("libunwind.so.8", RTLD_NOW | RTLD_NOLOAD) != NULL;
                    int global = dlsym(RTLD_DEFAULT, "_ULx86_64_step") != NULL || dlsym(RTLD_DEFAULT, "_Unwind_RaiseException") == dlsym(dlopen("libunwind.so.8", RTLD_NOW | RTLD_NOLOAD), "_Unwind_RaiseException");
                    printf("loaded=%d global=%d\\n", loaded, global);
                    return 0;
                }
                """)
            let result = try run([], program: [probe])
            #expect(result.status == 0 && result.stdout == "loaded=1 global=0\n", "\(result.stdout) \(result.stderr)")
        }
    }

    @Test("I-4, run: a missing program or a bad --attach-output is a usage error (exit 2), a program that cannot start is exit 1")
    func badInput() async throws {
        try await offPool { [self] in
            let missing = try ChildProcess.reporthost(["run", "--repository", repository], directory: folder)
            #expect(missing.status == 2 && missing.stderr.contains("missing program"))
            let size = try run(["--attach-output", "0"], program: ["/bin/true"])
            #expect(size.status == 2 && size.stderr.contains("--attach-output '0'"))
            let absent = try run([], program: [folder.appendingPathComponent("no-such-program").path])
            #expect(absent.status == 1 && absent.stderr.contains("cannot start"), "\(absent.stderr)")
        }
    }
}
