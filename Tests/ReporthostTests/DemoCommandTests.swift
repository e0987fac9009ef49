import Foundation
import Host
import HostStore
import HostTestSupport
import Testing

/// `reporthost demo` on embedded defaults, as the README's run command starts it.
@Suite struct DemoCommandTests {
    @Test("demo: a recovered child crash and three reports through the sample plugins, delivered to a local receiver, each told as a story in under 150 lines")
    func demo() async throws {
        // Off the cooperative pool: child processes must not starve async handler tests.
        try await offPool {
            let result = try ChildProcess.reporthost(["demo"])
            #expect(result.status == 0, "\(result.stderr)")
            let out = result.stdout
            #expect(out.split(separator: "\n", omittingEmptySubsequences: false).count <= 150, "\(out)")
            #expect(out.contains("== 2. bug report, through wrapper-sim, then scrub-pii"))
            #expect(out.contains("== 3. error report, through wrapper-sim, then account-context"))
            #expect(out.contains("== 4. exception report, through wrapper-sim, then scrub-pii"))
            // The crash: the program named, its stack as `show` prints it.
            #expect(out.contains("The demo's child process `reporthost crash --signal SEGV` crashes on purpose: it ended by signal 11."))
            #expect(out.contains("  crash: SIGSEGV (SEGV_MAPERR) at 0x0\n  thread "))
            #expect(out.contains("    #0 rh_crash_now in reporthost+0x"), "\(out)")
            // Before and after, and each change in words.
            #expect(out.contains("before:\n  summary      Checkout button does nothing for alice@example.com\n"))
            #expect(out.contains("after:\n  summary      Checkout button does nothing for [email]\n"))
            #expect(out.contains("what the plugins changed:\n  wrapper-sim added attribute wrapper.name\n"))
            #expect(out.contains("  wrapper-sim added label wrapper\n"))
            #expect(out.contains("  scrub-pii replaced an e-mail address in the summary\n"))
            #expect(out.contains("  scrub-pii replaced a card number and a secret in the description\n"))
            #expect(out.contains("  account-context added attribute account.plan\n"))
            #expect(out.contains("  scrub-pii replaced a secret and an IP address in the description\n"))
            #expect(!out.contains("\"report_id\""), "documents only with --json")
            let repository = try #require(out.split(separator: "\n").first { $0.hasPrefix("repository: ") })
            let path = repository.dropFirst("repository: ".count).replacingOccurrences(of: " (fresh)", with: "")
            var isDirectory: ObjCBool = false
            #expect(FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue)
            let stored = try Repository.openForReading(folder: URL(fileURLWithPath: path))?.records() ?? []
            #expect(Set(stored.map(\.trigger)) == [.crash, .upload, .logError, .logException])
            #expect(stored.allSatisfy { $0.state == .terminal && $0.outcome == "accepted (HTTP 200)" })
            #expect(out.contains("== delivered to the local receiver: 4 accepted, 0 retained, 0 rejected"))
            // One count of attachments, as `receive` prints it: breadcrumbs apart.
            #expect(out.contains("  Bug report, 0 attachment(s), 1 breadcrumb(s)\n"), "\(out)")
            let receivedFiles = try FileManager.default.contentsOfDirectory(atPath: path + "/received").filter { $0.hasSuffix(".json") }
            #expect(receivedFiles.count == 4)
            // The next step, one command, on the demo's own folder.
            #expect(out.contains("Next: see them as a server got them, the trail drawn over the text, in a browser:\n  reporthost receive --inbox --dir \(path)/received\n"))
        }
    }

    @Test("demo --json: the same story, with each stored document after its report")
    func demoJSON() async throws {
        try await offPool {
            let result = try ChildProcess.reporthost(["demo", "--json"])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.components(separatedBy: "\"report_id\"").count - 1 == 4, "\(result.stdout)")
            #expect(result.stdout.contains("  \"summary\": \"Checkout button does nothing for [email]\","))
            #expect(!result.stdout.contains("alice@example.com\","))  // no document keeps the address
        }
    }
}
