import Foundation
import Glibc
import Host
import HostTestSupport
import Receiver
import Testing

/// libreporthost.so (`reporthost/embed.h`) in real programs: the C and Python examples crash
/// for real, start again, and their recovered crash reports reach a loopback receiver changed
/// by a C plugin; the API refuses misuse; a second copy of a program runs as a secondary.
@Suite struct EmbedTests {
    let folder = makeTemporaryDirectory("embed")
    var repository: String { folder.appendingPathComponent("repo").path }

    /// The embedding library as `libreporthost.so` in a folder of its own (a link to the
    /// built `libreporthost-embed.so`: the name the examples link with).
    static let library: URL = {
        let folder = makeTemporaryDirectory("embed-lib")
        let link = folder.appendingPathComponent("libreporthost.so")
        try? FileManager.default.createSymbolicLink(
            at: link, withDestinationURL: Products.directory.appendingPathComponent("libreporthost-embed.so"))
        return link
    }()

    /// Examples/c-app, built with the README's line (once per run).
    static let cApp: Result<URL, Fixtures.CompileError> = {
        let output = makeTemporaryDirectory("c-app").appendingPathComponent("c-app")
        let lib = library.deletingLastPathComponent().path
        do {
            try Fixtures.compile([
                "-I", Products.pluginAPIInclude.path, Products.packageRoot.appendingPathComponent("Examples/c-app/main.c").path,
                "-o", output.path, "-L", lib, "-lreporthost", "-Wl,-rpath,\(lib)",
            ])
            return .success(output)
        } catch let error as Fixtures.CompileError {
            return .failure(error)
        } catch {
            return .failure(Fixtures.CompileError(description: "\(error)"))
        }
    }()

    func config(_ receiver: LocalReceiver, plugin: URL) throws -> String {
        let file = folder.appendingPathComponent("c-\(UUID().uuidString).json")
        try #"{"plugins": {"handler": "\#(plugin.path)"}, "submission": {"url": "\#(receiver.url)", "timeoutMs": 5000}, "retry": {"intervalSeconds": 0}}"#
            .write(to: file, atomically: true, encoding: .utf8)
        return file.path
    }

    /// Runs an example program (`command`: its words before the mode) with crash capture's
    /// child settings.
    func example(_ command: [String], _ arguments: [String], environment: [String: String] = [:]) throws -> ChildProcess.Result {
        guard let program = command.first else { throw Fixtures.CompileError(description: "no program") }
        return try ChildProcess.run(
            program, Array(command.dropFirst()) + arguments,
            environment: ["SWIFT_BACKTRACE": "enable=no"].merging(environment) { a, _ in a }, directory: folder)
    }

    /// The example crashes for real, starts again, and the recovered crash report arrives
    /// changed by the plugin, with the report raised by the second start.
    func crashThenReport(_ command: [String], environment: [String: String] = [:], attribute: String) throws {
        let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got"))
        defer { receiver.stop() }
        let plugin = try Fixtures.freshCopy(of: Fixtures.plugin("marker", source: markerHandler))
        let common = ["--config", try config(receiver, plugin: plugin), "--repository", repository]
        let crashed = try example(command, common + ["crash"], environment: environment)
        #expect(crashed.signal == SIGSEGV, "status \(crashed.status): \(crashed.stderr)")
        #expect(crashed.stdout.contains("crashing"))

        let again = try example(command, common + ["report"], environment: environment)
        #expect(again.status == 0 && again.signal == nil, "\(again.stderr)")
        let id = again.stdout.split(separator: "\n").first { $0.hasPrefix("report ") }.map { String($0.dropFirst(7)) }
        let received = receiver.received.map(\.report)
        let crash = received.first { $0["attributes"]?["error.type"] == .string("Crash") }
        #expect(crash?["attributes"]?["changed.by"] == .string("marker"), "\(received)")
        #expect(crash?["attributes"]?["example"] == .string(attribute), "the attribute set before the crash is in its crash file")
        let error = received.first { $0["uuid"]?.stringValue == id }
        #expect(error?["attributes"]?["changed.by"] == .string("marker"), "\(id ?? "no id"): \(received)")
        let status = try ChildProcess.reporthost(["status", "--json", "--repository", repository], directory: folder)
        let states = try JSONValue.parse(status.stdout)["records"]?.arrayValue?.map { $0["state"] } ?? []
        #expect(states == [.string("terminal"), .string("terminal")], "both delivered and settled: \(states)")
    }

    @Test("D-1, embed: Examples/c-app crashes with SIGSEGV; started again, its recovered crash report, changed by a C plugin, is stored and delivered")
    func cAppCrashAndRecovery() async throws {
        try await offPool { [self] in
            let app = try Self.cApp.get()
            try crashThenReport([app.path], attribute: "c-app")
        }
    }

    @Test("D-1, embed: Examples/python (ctypes) crashes with SIGSEGV; started again, its recovered crash report is changed by a C plugin and delivered")
    func pythonCrashAndRecovery() async throws {
        try await offPool { [self] in
            let script = Products.packageRoot.appendingPathComponent("Examples/python/app.py").path
            try crashThenReport(["/usr/bin/env", "python3", script], environment: ["REPORTHOST_LIB": Self.library.path], attribute: "python")
        }
    }
}
