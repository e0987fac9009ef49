import Foundation
import Host
import HostSupport
import HostTestSupport
import Testing

/// The README's examples are code users copy: they must build and do what the text says.
@Suite struct ReadmeTests {
    /// The text of the README section titled `title` (up to the next `## `).
    static func section(_ title: String) throws -> String {
        let readme = try String(contentsOf: Products.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let start = try #require(readme.range(of: "## \(title)"))
        return readme[start.upperBound...].components(separatedBy: "\n## ").first ?? ""
    }

    /// The code blocks of `text` opened with `fence` (e.g. "```sh\n"), in order.
    static func blocks(_ text: String, _ fence: String) -> [String] {
        text.components(separatedBy: fence).dropFirst().map { $0.components(separatedBy: "```").first ?? "" }
    }

    /// A temporary folder with a link named `reporthost` to this checkout, as the walkthroughs
    /// assume ("beside your ReportHost checkout").
    static func besideCheckout(_ label: String) throws -> URL {
        let folder = makeTemporaryDirectory(label)
        try FileManager.default.createSymbolicLink(at: folder.appendingPathComponent("reporthost"), withDestinationURL: Products.packageRoot)
        return folder
    }

    @Test("README: the C plugin example builds with the documented command, tags the report and keeps the labels set before it")
    func cExample() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool {
            let readme = try String(contentsOf: Products.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
            let block = try #require(readme.components(separatedBy: "```c\n").dropFirst().first?.components(separatedBy: "```").first)
            let library = try Fixtures.plugin("readme-c", source: block)
            let result = try ChildProcess.reporthost(["report", "bug", "--summary", "hi", "--handler", library.path, "--print"])
            #expect(result.status == 0, "\(result.stderr)")
            let json = try JSONValue.parse(result.stdout)
            #expect(json["attributes"]?["team"] == .string("payments"))
            #expect(json["labels"] == .array([.string("triaged")]))
            // It adds its label: the wrapper's and the user's stay.
            let checked = try ChildProcess.reporthost(["check", library.path, "--include", "^(keeps-others-changes|idempotent)$"])
            #expect(checked.status == 0 && checked.stdout.contains("2 passed, 0 failed"), "\(checked.stdout)")
            try Self.expectFuzzPasses(library.path)
        }
    }

    /// The walkthrough's plugin passes 200 fuzz cases, as a team's CI would run it.
    static func expectFuzzPasses(_ library: String) throws {
        let fuzz = try ChildProcess.reporthost(["check", library, "--fuzz", "200", "--include", "^fuzz$"])
        #expect(fuzz.status == 0 && fuzz.stdout.contains("200 generated report(s)"), "\(fuzz.stdout) \(fuzz.stderr)")
    }

    static let cargoAvailable = (try? ChildProcess.run("/usr/bin/env", ["cargo", "--version"]).status) == 0

    @Test("README: the Rust walkthrough, followed literally with current cargo (edition 2024, offline), builds a plugin on the SDK crate that tags the report and passes check",
          .enabled(if: cargoAvailable, "cargo is not installed on this machine"))
    func rustWalkthrough() async throws {
        try await offPool {
            let section = try Self.section("Writing a plugin in Rust")
            let shell = Self.blocks(section, "```sh\n")
            let rust = try #require(Self.blocks(section, "```rust\n").first)
            try #require(shell.count == 2)
            let folder = try Self.besideCheckout("readme-rust")
            let create = try ChildProcess.run("/bin/bash", ["-euc", shell[0]], directory: folder)
            #expect(create.status == 0, "\(create.stderr)")
            let plugin = folder.appendingPathComponent("my_plugin")
            #expect(try String(contentsOf: plugin.appendingPathComponent("Cargo.toml"), encoding: .utf8).contains("edition = \"2024\""))
            try rust.write(to: plugin.appendingPathComponent("src/lib.rs"), atomically: true, encoding: .utf8)
            // Each command as written; the tested build stands in for the checkout's.
            let lines = shell[1].split(separator: "\n").map {
                $0.replacingOccurrences(of: "../reporthost/.build/debug/reporthost", with: Products.reporthost.path)
            }
            try #require(lines.count == 3)
            let results = try lines.map { try ChildProcess.run("/bin/bash", ["-euc", $0], directory: plugin) }
            #expect(results.allSatisfy { $0.status == 0 }, "\(results.map(\.stderr))")
            let document = try JSONValue.parse(results[1].stdout)
            #expect(document["attributes"]?["team"] == .string("payments"))
            #expect(document["labels"] == .array([.string("triaged")]))
            #expect(results[2].stdout.contains(" 0 failed"), "\(results[2].stdout)")
            let built = try FileManager.default.contentsOfDirectory(atPath: plugin.appendingPathComponent("target/release").path)
            let library = try #require(built.first { $0.hasSuffix(".so") }, "\(built)")
            try Self.expectFuzzPasses(plugin.appendingPathComponent("target/release/\(library)").path)
        }
    }

    @Test("README: the Swift walkthrough, followed literally in its own package folder, builds a plugin that tags the report and passes check without a warning")
    func swiftWalkthrough() async throws {
        try await offPool {
            let section = try Self.section("Writing a plugin in Swift")
            let swift = Self.blocks(section, "```swift\n")
            let map = try #require(Self.blocks(section, "```\n{").first)
            try #require(swift.count == 2)
            // Its own package: a build of its own (its own .build and lock), never this package's.
            let folder = try Self.besideCheckout("readme-swift")
            let plugin = folder.appendingPathComponent("my-plugin")
            try FileManager.default.createDirectory(at: plugin.appendingPathComponent("Sources/MyPlugin"), withIntermediateDirectories: true)
            try swift[0].write(to: plugin.appendingPathComponent("Package.swift"), atomically: true, encoding: .utf8)
            try ("{" + map).write(to: plugin.appendingPathComponent("exports.map"), atomically: true, encoding: .utf8)
            try swift[1].write(to: plugin.appendingPathComponent("Sources/MyPlugin/MyPlugin.swift"), atomically: true, encoding: .utf8)
            let build = try ChildProcess.run("/usr/bin/env", ["swift", "build"], directory: plugin)
            #expect(build.status == 0, "\(build.stdout)\n\(build.stderr)")
            #expect(!(build.stdout + build.stderr).contains("warning:"), "\(build.stdout)")
            let library = plugin.appendingPathComponent(".build/debug/libmy-plugin.so").path
            let report = try ChildProcess.reporthost(["report", "bug", "--handler", library, "--print"])
            #expect(try JSONValue.parse(report.stdout)["attributes"]?["team"] == .string("payments"))
            let checked = try ChildProcess.reporthost(["check", library])
            #expect(checked.status == 0 && !checked.stdout.contains("WARNING"), "\(checked.stdout)")
            try Self.expectFuzzPasses(library)
        }
    }
}
