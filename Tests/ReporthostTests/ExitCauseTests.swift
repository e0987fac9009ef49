import Foundation
import Glibc
import Host
import HostSupport
import HostTestSupport
import Testing

/// SPEC B-5: a program `run` watched, or an embedding session, that SIGKILL ended carries
/// `reporthost.exit_cause`, read from its memory cgroup's `oom_kill` counter: a real cgroup v1
/// with a 64 MB limit where the machine allows one, and a cgroup tree of files named by
/// `REPORTHOST_CGROUP_ROOT` for the rest.
@Suite struct ExitCauseTests {
    let fixture = CommandFixture("exit-cause")

    /// A program that allocates and touches 16 MB at a time, 1 GB in all.
    static let hog: Result<URL, Fixtures.CompileError> = Result {
        let output = makeTemporaryDirectory("hog").appendingPathComponent("hog")
        try Fixtures.compile([
            try Fixtures.file("hog.c", """
                #include <stdlib.h>
                #include <string.h>
                int main(void) {
                    for (int i = 0; i < 64; i++) { char *p = malloc(16 << 20); if (!p) return 2; memset(p, 1, 16 << 20); }
                    return 0;
                }
                """).path, "-o", output.path,
        ])
        return output
    }.mapError { $0 as? Fixtures.CompileError ?? Fixtures.CompileError(description: "\($0)") }

    /// A cgroup tree of files under a folder of its own that mirrors this process's memory
    /// cgroup (v1 and v2 files both), its `oom_kill` counter at `kills`; the root and the
    /// counter files.
    func fakeCgroup(kills: Int) throws -> (root: URL, counters: [URL]) {
        let root = fixture.folder.appendingPathComponent("cgroup-\(UUID().uuidString)")
        let lines = try String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8).split(separator: "\n")
        let v1 = lines.first { $0.split(separator: ":").dropFirst().first?.split(separator: ",").contains("memory") == true }
            .map { String($0.split(separator: ":", maxSplits: 2)[2]) }
        let v2 = lines.first { $0.hasPrefix("0::") }.map { String($0.dropFirst(3)) }
        var counters: [URL] = []
        if let v1 {
            let folder = root.appendingPathComponent("memory" + v1)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            counters.append(folder.appendingPathComponent("memory.oom_control"))
            try "67108864\n".write(to: folder.appendingPathComponent("memory.limit_in_bytes"), atomically: true, encoding: .utf8)
            try "50331648\n".write(to: folder.appendingPathComponent("memory.max_usage_in_bytes"), atomically: true, encoding: .utf8)
        }
        if let v2 {
            let folder = root.appendingPathComponent(String(v2.dropFirst()))
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            counters.append(folder.appendingPathComponent("memory.events"))
        }
        for counter in counters { try Self.setKills(kills, counter) }
        return (root, counters)
    }

    static func setKills(_ kills: Int, _ counter: URL) throws {
        let text = counter.lastPathComponent == "memory.oom_control"
            ? "oom_kill_disable 0\nunder_oom 0\noom_kill \(kills)\n" : "low 0\nhigh 0\nmax 0\noom 0\noom_kill \(kills)\n"
        try text.write(to: counter, atomically: true, encoding: .utf8)
    }

    func run(_ program: [String], environment: [String: String] = [:]) throws -> ChildProcess.Result {
        try ChildProcess.reporthost(["run", "--repository", fixture.repository, "--"] + program, environment: environment, directory: fixture.folder)
    }

    func latest() throws -> JSONValue { try JSONValue.parse(try fixture.run(["show", "latest", "--json"]).stdout) }

    @Test("B-5: an OOM kill under run in a 64 MB memory cgroup: exit cause oom_kill, with the cgroup's peak and limit")
    func realCgroup() throws {
        let parent = "/sys/fs/cgroup/memory"
        let folder = "\(parent)/reporthost-test-\(UUID().uuidString)"
        let hog = try Self.hog.get().path
        guard mkdir(folder, 0o755) == 0 else {
            // No writable cgroup v1 here: the same attribution over a tree of files.
            let (root, counters) = try fakeCgroup(kills: 0)
            let script = fixture.folder.appendingPathComponent("oom.sh")
            let bumps = counters.map { "sed -i 's/oom_kill 0/oom_kill 1/' '\($0.path)'" }.joined(separator: "; ")
            // Run by /bin/sh, never executed itself (ETXTBSY while another test spawns a child).
            try "\(bumps)\nkill -KILL $$\n".write(to: script, atomically: true, encoding: .utf8)
            let ran = try run(["/bin/sh", script.path], environment: ["REPORTHOST_CGROUP_ROOT": root.path])
            #expect(ran.status == 137)
            #expect(try latest()["attributes"]?["reporthost.exit_cause"]?.stringValue == "oom_kill")
            return
        }
        defer { rmdir(folder) }
        for limit in ["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"] {
            _ = try? "64M".write(toFile: "\(folder)/\(limit)", atomically: false, encoding: .utf8)
        }
        let ran = try ChildProcess.run(
            "/bin/sh", ["-c", #"echo $$ > "$1/cgroup.procs" && shift && exec "$@""#, "sh", folder,
                        Products.reporthost.path, "run", "--repository", fixture.repository, "--", hog],
            directory: fixture.folder)
        #expect(ran.status == 137, "\(ran.stderr.suffix(1_000))")
        #expect(ran.stderr.contains("the kernel's OOM killer"), "\(ran.stderr.suffix(1_000))")
        let document = try latest()
        #expect(document["trigger"]?.stringValue == "abnormal_exit")
        #expect(document["attributes"]?["reporthost.exit_cause"]?.stringValue == "oom_kill")
        #expect(document["attributes"]?["reporthost.memory_limit_bytes"]?.stringValue == "67108864")
        #expect(Int(document["attributes"]?["reporthost.memory_peak_bytes"]?.stringValue ?? "") ?? 0 > 32 << 20)
        #expect(document["summary"]?.stringValue == "hog was killed by the kernel's OOM killer (SIGKILL)")
    }

    @Test("B-5: a SIGKILL the OOM killer did not send reads killed; a cgroup that cannot be read, unknown")
    func killedAndUnknown() throws {
        let (root, _) = try fakeCgroup(kills: 4)
        let script = fixture.folder.appendingPathComponent("killed.sh")
        // Run by /bin/sh, never executed itself (ETXTBSY while another test spawns a child).
        try "kill -KILL $$\n".write(to: script, atomically: true, encoding: .utf8)
        #expect(try run(["/bin/sh", script.path], environment: ["REPORTHOST_CGROUP_ROOT": root.path]).status == 137)
        let killed = try latest()
        #expect(killed["attributes"]?["reporthost.exit_cause"]?.stringValue == "killed")
        #expect(killed["attributes"]?["reporthost.memory_limit_bytes"]?.stringValue == "67108864" || !FileManager.default.fileExists(atPath: root.appendingPathComponent("memory").path))
        let nowhere = fixture.folder.appendingPathComponent("no-cgroups").path
        #expect(try run(["/bin/sh", script.path], environment: ["REPORTHOST_CGROUP_ROOT": nowhere]).status == 137)
        #expect(try latest()["attributes"]?["reporthost.exit_cause"]?.stringValue == "unknown")
    }

    @Test("B-5: an embedding session killed while its memory cgroup counts an OOM kill is an abnormal exit with exit cause oom_kill; without one, unknown")
    func embeddingSession() throws {
        let driver = try BreadcrumbCommandTests.driver.get().path
        for (bump, cause) in [(true, "oom_kill"), (false, "unknown")] {
            let (root, counters) = try fakeCgroup(kills: 2)
            let environment = ["REPORTHOST_CGROUP_ROOT": root.path]
            let killed = try ChildProcess.run(driver, ["-", fixture.repository, "kill", "3"], environment: environment, directory: fixture.folder)
            #expect(killed.status == SIGKILL)
            if bump { for counter in counters { try Self.setKills(3, counter) } }
            let launched = try ChildProcess.reporthost(["launch", "--repository", fixture.repository], environment: environment, directory: fixture.folder)
            #expect(launched.status == 0, "\(launched.stderr.suffix(1_000))")
            let document = try latest()
            #expect(document["trigger"]?.stringValue == "abnormal_exit")
            #expect(document["attributes"]?["reporthost.exit_cause"]?.stringValue == cause, "\(document["attributes"] ?? .null)")
        }
    }
}
