import Foundation
import HostTestSupport
import Testing

/// Every command the README and the guides show is run as written, from an installation made
/// by `scripts/install` and a clone whose folder has another name, and its output is compared
/// with what the page shows (`DocPage`). A reader who follows a page gets what it says.
@Suite struct DocsTests {
    /// The pages whose console blocks are run.
    static let pages: [String] = {
        let docs = Products.packageRoot.appendingPathComponent("docs")
        let guides = ((try? FileManager.default.contentsOfDirectory(atPath: docs.path)) ?? []).filter { $0.hasSuffix(".md") }.sorted()
        return ["README.md"] + guides.map { "docs/\($0)" }
    }()

    /// What a reader has after the install step: `scripts/install --from` the tested build
    /// into a fresh prefix (the README's `scripts/install ~/.local` builds a release first,
    /// which the suite's debug build stands in for), and a clone under a name of its own.
    struct Reader: Sendable {
        let prefix: URL
        let clone: URL
        /// The reader's home, one for every page, as a person has one.
        let home: URL

        var environment: [String: String] {
            [
                "PATH": "\(prefix.path)/bin:/usr/local/bin:/usr/bin:/bin",
                "PKG_CONFIG_PATH": "\(prefix.path)/lib/pkgconfig",
                "REPORTHOST": clone.path,
                "HOME": home.path,
            ]
        }
    }

    static let reader: Result<Reader, Error> = Result {
        let folder = makeTemporaryDirectory("docs-reader")
        let prefix = folder.appendingPathComponent("prefix")
        let installed = try ChildProcess.run(
            Products.packageRoot.appendingPathComponent("scripts/install").path, ["--from", Products.directory.path, prefix.path])
        guard installed.status == 0 else { throw InstallFailed(description: installed.stderr) }
        // A clone named otherwise: the checkout's files, with the tested build standing in
        // for the release a clone's own `scripts/install` builds.
        let clone = folder.appendingPathComponent("my-checkout-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(at: clone.appendingPathComponent(".build"), withIntermediateDirectories: true)
        for entry in try FileManager.default.contentsOfDirectory(atPath: Products.packageRoot.path) where entry != ".build" {
            try FileManager.default.createSymbolicLink(
                at: clone.appendingPathComponent(entry), withDestinationURL: Products.packageRoot.appendingPathComponent(entry))
        }
        for configuration in ["release", "debug"] {
            try FileManager.default.createSymbolicLink(
                at: clone.appendingPathComponent(".build/\(configuration)"), withDestinationURL: Products.directory)
        }
        let reader = Reader(prefix: prefix, clone: clone, home: folder.appendingPathComponent("home"))
        // scrub-pii compiles its rules at its first report into the reader's cache (about a
        // second; several while the whole suite runs, past the host's 5 s "still running"
        // note): once here, as a reader who has used it before, not in each page's output.
        try FileManager.default.createDirectory(at: reader.home, withIntermediateDirectories: true)
        let warmed = try ChildProcess.run(
            "\(prefix.path)/bin/reporthost",
            ["report", "error", "--summary", "warm-up", "--handler", "\(prefix.path)/lib/reporthost/libscrub-pii.so", "--repository", folder.appendingPathComponent("warm-up").path],
            environment: reader.environment)
        guard warmed.status == 0 else { throw InstallFailed(description: "scrub-pii's first report: \(warmed.stderr)") }
        return reader
    }

    struct InstallFailed: Error, CustomStringConvertible {
        var description: String
    }

    static func page(_ name: String) throws -> DocPage {
        DocPage(name: name, text: try String(contentsOf: Products.packageRoot.appendingPathComponent(name), encoding: .utf8))
    }

    @Test("Docs: every console block of the page runs as written and prints what the page shows", arguments: pages)
    func pageRunsAsWritten(_ name: String) async throws {
        let page = try Self.page(name)
        let reader = try Self.reader.get()
        try await offPool {
            let folder = makeTemporaryDirectory("docs-page")
            for step in page.steps {
                switch step {
                case .file(let file, let text):
                    let url = folder.appendingPathComponent(file)
                    try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
                    try text.write(to: url, atomically: true, encoding: .utf8)
                case .console(.notRun, _):
                    continue
                case .console(let place, let commands):
                    for command in commands {
                        // Standard error with standard output, in the order written, as a terminal shows them.
                        let result = try ChildProcess.run(
                            "/bin/bash", ["-c", "exec 2>&1\n" + command.text], environment: reader.environment,
                            directory: place == .clone ? reader.clone : folder)
                        var actual = result.stdout.components(separatedBy: "\n")
                        if actual.last == "" { actual.removeLast() }
                        #expect(
                            DocPage.matches(expected: command.expected, actual: actual),
                            "\(name):\(command.line): `\(command.text)` printed\n\(actual.joined(separator: "\n"))\n--- the page shows\n\(command.expected.joined(separator: "\n"))"
                        )
                    }
                }
            }
        }
    }

    @Test("Docs: a block not run says why, and the pages run most of what they show")
    func blocksNotRunSayWhy() throws {
        var run = 0
        var notRun: [String] = []
        for name in Self.pages {
            for case .console(let place, let commands) in try Self.page(name).steps {
                guard case .notRun(let why) = place else {
                    run += commands.count
                    continue
                }
                #expect(why.hasPrefix("never, because ") || why.hasPrefix("by "), "\(name): `run: \(why)` gives no reason")
                if why.hasPrefix("by ") {
                    // The test named runs these commands itself.
                    let test = String(why.dropFirst(3).prefix { $0 != " " && $0 != "," })
                    let source = Products.packageRoot.appendingPathComponent("Tests/ReporthostTests/\(test).swift")
                    #expect(FileManager.default.fileExists(atPath: source.path), "\(name): `run: \(why)` names no test file")
                }
                notRun.append("\(name): \(why)")
            }
        }
        #expect(run >= 40, "only \(run) commands are run")
        #expect(notRun.count <= 14, "\(notRun.count) blocks are not run:\n\(notRun.joined(separator: "\n"))")
    }

    @Test("Docs: the README is at most 250 lines, and its first screen links each reader's start-here section")
    func readmeShort() throws {
        let lines = try String(contentsOf: Products.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
            .components(separatedBy: "\n")
        #expect(lines.count <= 251, "the README has \(lines.count) lines")  // its last line ends with a newline
        let firstScreen = lines.prefix(24).joined(separator: "\n")
        for anchor in ["#start-here-a-plugin-in-c", "#start-here-your-program-embedding-reporthost", "#start-here-your-scrubber-on-your-own-data"] {
            #expect(firstScreen.contains("(\(anchor))"), "the first screen does not link \(anchor)")
            let heading = "## " + anchor.dropFirst().split(separator: "-").joined(separator: " ")
            #expect(lines.contains { $0.lowercased().replacingOccurrences(of: ",", with: "").replacingOccurrences(of: ":", with: "") == heading }, "no section \(heading)")
        }
    }

    @Test("Docs: the output pattern matches what it shows and refuses what differs")
    func patternCanFail() {
        let expected = ["report …", "...", "9 passed, 0 failed"]
        #expect(DocPage.matches(expected: expected, actual: ["report 1f2e", "a", "b", "9 passed, 0 failed"]))
        #expect(DocPage.matches(expected: expected, actual: ["report 1f2e", "9 passed, 0 failed  "]))
        #expect(!DocPage.matches(expected: expected, actual: ["report 1f2e", "8 passed, 1 failed"]))
        #expect(!DocPage.matches(expected: expected, actual: ["status …", "9 passed, 0 failed"]))
        #expect(!DocPage.matches(expected: [], actual: ["cc: error: no such file"]), "a command shown without output must print nothing")
        let page = DocPage(name: "t", text: "<!-- file: a.c -->\n```c\nint x;\n```\n\n<!-- run: in the clone -->\n```console\n$ ls \\\n  -d .\n.\n$ true\n```\n")
        #expect(page.steps.count == 2)
        if case .console(let place, let commands) = page.steps.last {
            #expect(place == .clone && commands.map(\.text) == ["ls \\\n  -d .", "true"] && commands[0].expected == ["."])
        } else {
            Issue.record("the console block was not read")
        }
    }
}
