import Foundation
import Host
import HostTestSupport
import Testing

/// The README's examples are code users copy: they must build and do what the text says.
@Suite struct ReadmeTests {
    @Test("README: the C plugin example builds with the documented command and tags the report")
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
        }
    }
}
