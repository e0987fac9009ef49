import Foundation
import Glibc
import Host
import HostTestSupport
import Testing

/// `reporthost check` as CI runs it: the JUnit file written where the user named it, a plugin
/// reached through a link, a selection that runs nothing.
@Suite struct CheckOutputTests {
    let folder = makeTemporaryDirectory("check-output")

    var plugin: String { Products.directory.appendingPathComponent("libwrapper-sim.so").path }

    func check(_ arguments: [String]) throws -> ChildProcess.Result {
        // Bounded from outside: a FIFO waited on would never return.
        try ChildProcess.run(
            "/usr/bin/timeout", ["-k", "5", "60", Products.reporthost.path, "check", plugin, "--slot", "wrapper", "--include", "^loads$"] + arguments,
            directory: folder)
    }

    @Test("I-8 --junit: written through a symbolic link (the link stays), to /dev/stdout as the caller gave it, to a character device as it is; a FIFO is refused at once")
    func junitPathRules() throws {
        let target = folder.appendingPathComponent("results.xml")
        try Data().write(to: target)
        let link = folder.appendingPathComponent("link.xml")
        try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: "results.xml")
        let linked = try check(["--junit", link.path])
        #expect(linked.status == 0, "\(linked.stderr)")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link.path) == "results.xml", "the link was replaced")
        #expect(try String(contentsOf: target, encoding: .utf8).contains("<testsuites"))

        let stdout = try check(["--junit", "/dev/stdout", "--json"])
        #expect(stdout.status == 0 && stdout.stdout.hasPrefix("<?xml"), "\(stdout.stdout.prefix(80)) \(stdout.stderr)")

        let full = try check(["--junit", "/dev/full"])
        #expect(full.status == 1 && full.stderr.contains("/dev/full: cannot write"), "\(full.stderr)")
        var info = stat()
        #expect(stat("/dev/full", &info) == 0 && info.st_mode & S_IFMT == S_IFCHR, "/dev/full is still a device")

        let fifo = folder.appendingPathComponent("fifo").path
        #expect(mkfifo(fifo, 0o600) == 0)
        let refused = try check(["--junit", fifo])
        #expect(refused.status == 2 && refused.stderr.contains("is a FIFO"), "\(refused.status) \(refused.stderr)")
        #expect(!refused.stderr.contains("passed"), "it ran the checks before refusing")
    }

    @Test("I-8: a plugin reached through a relative symbolic link (libfoo.so -> libfoo.so.1.0) is checked as the file it names")
    func pluginThroughALink() throws {
        try FileManager.default.copyItem(atPath: plugin, toPath: folder.appendingPathComponent("libws.so.1.0").path)
        try FileManager.default.createSymbolicLink(atPath: folder.appendingPathComponent("libws.so").path, withDestinationPath: "libws.so.1.0")
        let result = try ChildProcess.run(Products.reporthost.path, ["check", "./libws.so", "--slot", "wrapper"], directory: folder)
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        #expect(result.stdout.contains(" 0 failed"), "\(result.stdout)")
    }

    @Test("I-8: an --include or --exclude that selects no check is a usage error (exit 2), never a pass with nothing run")
    func emptySelection() throws {
        let result = try ChildProcess.reporthost(["check", plugin, "--include", "no-such-check"])
        #expect(result.status == 2 && result.stderr.contains("select no check"), "\(result.status) \(result.stderr)")
    }
}
