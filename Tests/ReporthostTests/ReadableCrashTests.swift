import Foundation
import Glibc
import Host
import HostSupport
import HostTestSupport
import Receiver
import Testing

/// A crash a person can read (SPEC report document `crash`, wire format): real programs built
/// here with `-g`, crashed under `reporthost run`, read back from the stored document, from
/// the Backtrace JSON a loopback receiver gets, and from `show`.
@Suite struct ReadableCrashTests {
    let folder = makeTemporaryDirectory("readable")
    var repository: String { folder.appendingPathComponent("repo").path }

    /// The build id the library is linked with, so the test knows what the crash must say.
    static let libraryBuildID = "5a11ce0ddba11ca7f00d0000000000000000cafe"

    /// `libzq.so`: zq_outer → zq_middle → zq_inner, which writes through a null pointer on the
    /// line marked CRASH. Built with -g -O0 and a fixed build id.
    static let librarySource = """
        #include <stdio.h>
        void zq_inner(int depth) {
            volatile int *p = (volatile int *)0;
            fprintf(stderr, "zq: depth %d\\n", depth);
            *p = depth; /* CRASH */
        }
        void zq_middle(int depth) { zq_inner(depth + 1); }
        void zq_outer(void) { zq_middle(1); }
        """

    static var crashLine: Int {
        librarySource.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0.contains("CRASH") }! + 1
    }

    /// A program that loads libzq.so with dlopen after it started (so the host's own module
    /// map never saw it) and calls zq_outer.
    static let dlopenProgram = Result { () throws -> (program: String, library: String) in
        let output = makeTemporaryDirectory("readable-programs")
        let library = output.appendingPathComponent("libzq.so").path
        try Fixtures.compile([
            "-std=gnu11", "-g", "-O0", "-fPIC", "-shared", try Fixtures.file("zq.c", librarySource).path,
            "-Wl,--build-id=0x\(libraryBuildID)", "-o", library,
        ])
        let program = output.appendingPathComponent("dlhost").path
        let source = """
            #include <dlfcn.h>
            #include <stdio.h>
            int main(int argc, char **argv) {
                if (argc < 2) return 2;
                void *library = dlopen(argv[1], RTLD_NOW);
                if (!library) { fprintf(stderr, "%s\\n", dlerror()); return 3; }
                void (*outer)(void) = (void (*)(void))dlsym(library, "zq_outer");
                outer();
                return 0;
            }
            """
        try Fixtures.compile(["-std=gnu11", "-g", "-O0", try Fixtures.file("dlhost.c", source).path, "-o", program, "-ldl"])
        return (program, library)
    }

    /// C++: a namespaced member function that faults.
    static let cplusplusProgram = Result { () throws -> String in
        let program = makeTemporaryDirectory("readable-programs").appendingPathComponent("widget").path
        let source = """
            namespace zq {
            struct Widget {
                int *target = nullptr;
                void crash(int value) { *target = value; }
            };
            }
            int main() { zq::Widget widget; widget.crash(7); return 0; }
            """
        try Fixtures.compile(["-std=gnu++17", "-g", "-O0", try Fixtures.file("widget.cpp", source).path, "-o", program], compiler: "g++")
        return program
    }

    /// Sends itself SIGSEGV with kill (`kill`), or calls abort() (`abort`).
    static let sendsProgram = Result { () throws -> String in
        let program = makeTemporaryDirectory("readable-programs").appendingPathComponent("sends").path
        let source = """
            #include <signal.h>
            #include <stdio.h>
            #include <stdlib.h>
            #include <string.h>
            #include <unistd.h>
            int main(int argc, char **argv) {
                printf("%d\\n", (int)getpid());
                fflush(stdout);
                if (argc > 1 && strcmp(argv[1], "abort") == 0) abort();
                kill(getpid(), SIGSEGV);
                return 0;
            }
            """
        try Fixtures.compile(["-std=gnu11", "-g", try Fixtures.file("sends.c", source).path, "-o", program])
        return program
    }

    func configuration(_ receiver: LocalReceiver) throws -> String {
        let file = folder.appendingPathComponent("c-\(UUID().uuidString).json")
        try #"{"submission": {"url": "\#(receiver.url)", "timeoutMs": 5000}, "retry": {"intervalSeconds": 0}}"#
            .write(to: file, atomically: true, encoding: .utf8)
        return file.path
    }

    /// Runs `program` under `reporthost run` with no submission URL: the report stays stored
    /// with its crash payload (a delivered report keeps none, D-9).
    func run(_ program: [String]) throws -> ChildProcess.Result {
        try ChildProcess.run(Products.reporthost.path, ["run", "--repository", repository, "--"] + program, directory: folder)
    }

    /// Delivers what is stored to `receiver`, by a host whose home folder is `home`.
    func deliver(to receiver: LocalReceiver, home: String? = nil) throws {
        let launched = try ChildProcess.reporthost(
            ["launch", "--repository", repository, "--config", try configuration(receiver)],
            environment: home.map { ["HOME": $0] } ?? [:], directory: folder)
        #expect(launched.status == 0, "\(launched.stderr)")
    }

    /// The stored document of the latest report (`show latest --json`) and `show latest`.
    func shown() throws -> (document: JSONValue, text: String) {
        let json = try ChildProcess.reporthost(["show", "latest", "--json", "--repository", repository], directory: folder)
        let text = try ChildProcess.reporthost(["show", "latest", "--repository", repository], directory: folder)
        return (try JSONValue.parse(json.stdout), text.stdout)
    }

    func crashedFrames(_ crash: JSONValue?) -> [JSONValue] {
        let main = crash?["main_thread"]?.stringValue ?? ""
        return crash?["threads"]?[main]?["frames"]?.arrayValue ?? []
    }

    @Test("D-1, wire format: a crash three calls deep in a library loaded with dlopen after start: every frame has its module, offset, build id, function and line, in the document, the Backtrace JSON and show")
    func dlopenedLibrary() async throws {
        try await offPool { [self] in
            let (program, library) = try Self.dlopenProgram.get()
            let result = try run([program, library])
            #expect(result.status == 139, "\(result.stderr)")

            let (document, text) = try shown()
            let crash = document["crash"]
            #expect(crash?["code_name"]?.stringValue == "SEGV_MAPERR")
            #expect(crash?["address"]?.stringValue == "0x0")
            let module = crash?["modules"]?.arrayValue?.first { $0["path"]?.stringValue == library }
            #expect(module?["build_id"]?.stringValue == Self.libraryBuildID, "the dlopen'ed library is in the module list")
            let frames = crashedFrames(crash)
            #expect(frames.prefix(3).map { $0["function"]?.stringValue } == ["zq_inner", "zq_middle", "zq_outer"], "\(frames)")
            #expect(frames.first?["line"]?.intValue == Self.crashLine)
            #expect(frames.first?["file"]?.stringValue?.hasSuffix("zq.c") == true)
            #expect(frames.prefix(3).allSatisfy { $0["module"]?.stringValue == library && $0["build_id"]?.stringValue == Self.libraryBuildID })
            #expect(frames.prefix(3).allSatisfy { $0["offset"]?.stringValue?.hasPrefix("0x") == true })
            #expect(frames.dropFirst(3).first?["function"]?.stringValue == "main")
            #expect(document["attributes"]?["reporthost.crashed_in_module"]?.stringValue == "libzq.so", "a file name, not a local path")

            // The same in Backtrace's own fields.
            let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got"))
            defer { receiver.stop() }
            // Delivered by a host whose home folder holds the program: what is sent writes it `~`.
            let home = URL(fileURLWithPath: library).deletingLastPathComponent().path
            try deliver(to: receiver, home: home)
            let sent = try #require(receiver.received.first?.report, "\(result.stderr)")
            let main = try #require(sent["mainThread"]?.stringValue)
            let stack = sent["threads"]?[main]?["stack"]?.arrayValue ?? []
            let top = try #require(stack.first)
            #expect(top["funcName"]?.stringValue == "zq_inner")
            #expect(top["library"]?.stringValue == "~/libzq.so", "the home folder leaves the machine as ~")
            #expect(top["debug_identifier"]?.stringValue == Self.libraryBuildID)
            #expect(top["line"]?.stringValue == String(Self.crashLine))
            let key = try #require(top["sourceCode"]?.stringValue)
            #expect(sent["sourceCode"]?[key]?["path"]?.stringValue?.hasSuffix("zq.c") == true)
            let sentModules = sent["annotations"]?["Crash"]?["modules"]?.arrayValue ?? []
            #expect(sentModules.contains { $0["path"]?.stringValue == "~/libzq.so" && $0["build_id"]?.stringValue == Self.libraryBuildID })
            #expect(!sent.serialized().contains(home), "no path under the home folder is sent")

            // And as a person reads it (read before delivery: a delivered report keeps no payload).
            #expect(text.contains("crash: SIGSEGV (SEGV_MAPERR) at 0x0"), "\(text)")
            // The fixture's file is `<uuid>-zq.c`.
            let lines = text.split(separator: "\n").map(String.init)
            for (index, function, line) in [(0, "zq_inner", Self.crashLine), (1, "zq_middle", 7), (2, "zq_outer", 8)] {
                let frame = lines.first { $0.hasPrefix("  #\(index) ") } ?? ""
                #expect(frame.hasPrefix("  #\(index) \(function) (") && frame.contains("zq.c:\(line)) in libzq.so+0x"), "\(text)")
            }
        }
    }

    @Test("D-1, what leaves: recovery never asks a debuginfod server for what is not on the machine, even with DEBUGINFOD_URLS set (as Debian's login shells set it)")
    func noDebuginfod() async throws {
        try await offPool { [self] in
            let server = try RawHTTPServer(.respond("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"))
            defer { server.stop() }
            // Built without -g: its debug file is nowhere on the machine.
            let program = folder.appendingPathComponent("nodebug").path
            let source = "int main(void) { volatile int *p = (volatile int *)0; *p = 1; return 0; }\n"
            try Fixtures.compile(["-O0", try Fixtures.file("nodebug.c", source).path, "-o", program])
            let environment = [
                "DEBUGINFOD_URLS": "http://127.0.0.1:\(server.port)",
                "DEBUGINFOD_CACHE_PATH": folder.appendingPathComponent("debuginfod-cache").path,
            ]
            let result = try ChildProcess.run(
                Products.reporthost.path, ["run", "--repository", repository, "--", program], environment: environment, directory: folder)
            #expect(result.status == 139, "\(result.stderr)")
            #expect(server.requests == 0)
            // Still symbolicated from what the file itself has (its symbol table).
            let frames = crashedFrames(try shown().document["crash"])
            #expect(frames.contains { $0["function"]?.stringValue == "main" }, "\(frames)")
        }
    }

    @Test("D-1: a C++ crash names the namespaced member function, demangled, with its line")
    func cplusplusMember() async throws {
        try await offPool { [self] in
            let result = try run([try Self.cplusplusProgram.get()])
            #expect(result.status == 139, "\(result.stderr)")
            let top = crashedFrames(try shown().document["crash"]).first
            #expect(top?["function"]?.stringValue == "zq::Widget::crash(int)", "\(String(describing: top))")
            #expect(top?["line"]?.intValue == 4)
            let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got"))
            defer { receiver.stop() }
            try deliver(to: receiver)
            #expect(receiver.received.first?.report["threads"]?.objectValue?.first?.1["stack"]?.arrayValue?.first?["funcName"]?.stringValue == "zq::Widget::crash(int)")
        }
    }

    @Test("report document: a sent signal names its sender (SI_USER, sender_pid), never an address; abort() is recognised")
    func sentSignals() async throws {
        try await offPool { [self] in
            let program = try Self.sendsProgram.get()
            let killed = try run([program])
            #expect(killed.status == 139, "\(killed.stderr)")
            let pid = try #require(Int(killed.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
            var (document, text) = try shown()
            #expect(document["crash"]?["code_name"]?.stringValue == "SI_USER")
            #expect(document["crash"]?["sender_pid"]?.intValue == pid)
            #expect(document["crash"]?["address"] == nil, "a sent signal has no fault address")
            #expect(document["summary"]?.stringValue == "SEGV (SI_USER, signal 11) sent by pid \(pid)")
            #expect(text.contains("crash: SIGSEGV (SI_USER) sent by pid \(pid)"), "\(text)")

            let aborted = try run([program, "abort"])
            #expect(aborted.status == 134, "\(aborted.stderr)")
            (document, text) = try shown()
            #expect(document["crash"]?["code"]?.intValue == -6, "signed, not 4294967290")
            #expect(document["crash"]?["code_name"]?.stringValue == "SI_TKILL")
            #expect(document["crash"]?["abort"]?.boolValue == true)
            #expect(document["summary"]?.stringValue == "ABRT (abort() called, signal 6)")
            #expect(text.contains("crash: SIGABRT (SI_TKILL): abort() called"), "\(text)")
            let frames = crashedFrames(document["crash"]).compactMap { $0["function"]?.stringValue }
            #expect(frames.contains("main"), "\(frames)")
        }
    }

    @Test("I: one id per report: every id the log names for a watched program's end is the one the report is stored under")
    func oneIDPerReport() async throws {
        try await offPool { [self] in
            let result = try ChildProcess.run(
                Products.reporthost.path, ["run", "--repository", repository, "--log-level", "debug", "--", "/bin/sh", "-c", "kill -9 $$"],
                directory: folder)
            #expect(result.status == 137, "\(result.stderr)")
            let stored = try shown().document["report_id"]?.stringValue
            let pattern = try NSRegularExpression(pattern: "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
            let named = Set(pattern.matches(in: result.stderr, range: NSRange(result.stderr.startIndex..., in: result.stderr))
                .compactMap { Range($0.range, in: result.stderr).map { String(result.stderr[$0]) } })
            let sessions = Set(result.stderr.split(separator: "\n").filter { $0.contains("session") }.flatMap { line in
                named.filter { line.contains($0) }
            })
            #expect(stored != nil && named.subtracting(sessions) == [stored!], "\(result.stderr)")
        }
    }

    @Test("D-1: a module whose file on disk no longer has the crash's build id is not symbolicated, and the report says why")
    func changedModuleIsNotSymbolicated() async throws {
        try await offPool { [self] in
            let (_, library) = try Self.dlopenProgram.get()
            let crashes = folder.appendingPathComponent("repo/crashes")
            try FileManager.default.createDirectory(at: crashes, withIntermediateDirectories: true)
            let wrong = String(repeating: "ab", count: 20)
            let crashFile = """
                reporthost-crash 1
                session 11111111-2222-3333-4444-555555555555
                signal 11
                code 1
                address 0x0
                thread 7
                time \(Int(Date().timeIntervalSince1970))
                register rip 0x7f0000001139
                frame 0x7f0000001139
                modules_at_crash
                module 0x7f0000000000 0x7f0000010000 \(library)
                build_id \(wrong)
                end

                """
            try crashFile.write(to: crashes.appendingPathComponent("11111111-2222-3333-4444-555555555555-1-1-1-1.crash"), atomically: true, encoding: .utf8)
            let launched = try ChildProcess.reporthost(["launch", "--repository", repository], directory: folder)
            #expect(launched.status == 0, "\(launched.stderr)")
            let (document, _) = try shown()
            let top = crashedFrames(document["crash"]).first
            #expect(top?["function"] == nil, "a different file's symbols would lie")
            #expect(top?["build_id"]?.stringValue == wrong)
            #expect(top?["offset"]?.stringValue == "0x1139")
            let notes = document["internal_log"]?.arrayValue?.compactMap { $0["message"]?.stringValue } ?? []
            #expect(notes.contains { $0.hasPrefix("frames not symbolicated: libzq.so") && $0.contains(wrong) }, "\(notes)")
        }
    }

    @Test("D-1: a module path that is a FIFO, or ends in ' (deleted)' (a program that unlinked its library and left a FIFO there), is never opened: recovery goes on at once and says why")
    func fifoModulesNeverWaitedOn() async throws {
        try await offPool { [self] in
            let crashes = folder.appendingPathComponent("repo/crashes")
            try FileManager.default.createDirectory(at: crashes, withIntermediateDirectories: true)
            let fifo = folder.appendingPathComponent("libfifo.so").path
            let deleted = folder.appendingPathComponent("libgone.so").path + " (deleted)"
            for path in [fifo, deleted] { #expect(mkfifo(path, 0o600) == 0, "\(path)") }
            let crashFile = """
                reporthost-crash 1
                session 11111111-2222-3333-4444-666666666666
                signal 11
                code 1
                address 0x0
                thread 7
                time \(Int(Date().timeIntervalSince1970))
                register rip 0x7f0000001139
                frame 0x7f0000001139
                frame 0x7f0000021139
                modules_at_crash
                module 0x7f0000000000 0x7f0000010000 \(fifo)
                module 0x7f0000020000 0x7f0000030000 \(deleted.replacing(" ", with: "%20"))
                end

                """
            try crashFile.write(to: crashes.appendingPathComponent("11111111-2222-3333-4444-666666666666-1-1-1-1.crash"), atomically: true, encoding: .utf8)
            // Bounded from outside: a symbolizer that opens the FIFO waits for a writer for ever.
            let launched = try ChildProcess.run(
                "/usr/bin/timeout", ["-k", "5", "60", Products.reporthost.path, "launch", "--repository", repository], directory: folder)
            #expect(launched.status == 0, "exit \(launched.status) (124: still waiting after 60 s): \(launched.stderr)")
            let (document, _) = try shown()
            let notes = document["internal_log"]?.arrayValue?.compactMap { $0["message"]?.stringValue } ?? []
            #expect(notes.contains { $0.contains("libfifo.so: not a regular file") }, "\(notes)")
            #expect(notes.contains { $0.contains("(deleted)") && $0.contains("deleted after the process mapped it") }, "\(notes)")
        }
    }
}
