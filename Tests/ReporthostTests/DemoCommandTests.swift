import Foundation
import Host
import HostStore
import HostTestSupport
import Testing

/// `reporthost demo` on embedded defaults, as the README's run command starts it.
@Suite struct DemoCommandTests {
    @Test("demo: a recovered child crash and three reports through the sample plugins, delivered to a local receiver")
    func demo() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool {
            let result = try ChildProcess.reporthost(["demo"])
            #expect(result.status == 0, "\(result.stderr)")
            let out = result.stdout
            #expect(out.contains("== bug report: wrapper-sim, then scrub-pii"))
            #expect(out.contains("== error report: wrapper-sim, then account-context"))
            #expect(out.contains("== exception report: wrapper-sim, then scrub-pii"))
            // The change trail, as `show` prints it (SPEC T-1): no change printer of the demo's own.
            #expect(out.contains("changes:\n  wrapper-sim (wrapper.before) attribute:wrapper.name: 0..11 added"))
            #expect(out.contains("  scrub-pii (handler.before) summary: 33..40 replaced (was 50 bytes)"))
            #expect(out.contains("  scrub-pii (handler.before) description: 5..11, 35..43 replaced (was 72 bytes)"))
            #expect(out.contains("  account-context (handler.before) attribute:account.plan: 0..4 added"))
            #expect(out.contains("Authorization: Bearer [secret] from [ip]"))
            #expect(!out.contains("alice@example.com\","))  // no document keeps the address
            let repository = try #require(out.split(separator: "\n").first { $0.hasPrefix("repository: ") })
            let path = repository.dropFirst("repository: ".count).replacingOccurrences(of: " (fresh)", with: "")
            var isDirectory: ObjCBool = false
            #expect(FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue)
            let stored = try Repository.openForReading(folder: URL(fileURLWithPath: path))?.records() ?? []
            #expect(Set(stored.map(\.trigger)) == [.crash, .upload, .logError, .logException])
            #expect(stored.allSatisfy { $0.state == .terminal && $0.outcome == "accepted (HTTP 200)" })
            #expect(out.contains("== delivered to the local receiver: 4 accepted, 0 retained, 0 rejected"))
            #expect(out.contains("recovered crash report"))
            let receivedFiles = try FileManager.default.contentsOfDirectory(atPath: path + "/received").filter { $0.hasSuffix(".json") }
            #expect(receivedFiles.count == 4)
        }
    }
}
