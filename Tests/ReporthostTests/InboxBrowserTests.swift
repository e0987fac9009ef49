import Foundation
import Host
import HostSupport
import HostTestSupport
import Receiver
import Testing

/// SPEC T-2 in a real browser: headless Chromium (Debian's chromium and chromium-driver,
/// which scripts/setup installs) driven through selenium by Tests/Browser/inbox_browser.py,
/// against a receiver with its inbox, fed by the real `reporthost` and by Backtrace's
/// official Python client.
@Suite struct InboxBrowserTests {
    let fixture = CommandFixture("reporthost-inbox-browser")

    @Test("T-2 in Chromium: a report appears live, a crash shows its frames, the trail names the plugin, breadcrumbs are a list apart from the attachments, the list marks changed reports, an attachment downloads intact, a planted script makes nothing, Backtrace's Python client reads the same")
    func browser() async throws {
        try await offPool { [self] in
            try #require(FileManager.default.isExecutableFile(atPath: Products.python.path), "run scripts/test: it installs selenium into .build/venv")
            try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/chromedriver"), "run scripts/setup: it installs chromium-driver")
            let receiver = try LocalReceiver(folder: fixture.folder.appendingPathComponent("inbox"), keepInMemory: false, inbox: true)
            defer { receiver.stop() }
            let configuration = try fixture.configuration(url: receiver.url)

            // The crash is recovered first with nowhere to send it, so `show` can print its stack
            // (a delivered report keeps only its id), then delivered.
            _ = try fixture.run(["crash"])
            _ = try fixture.run(["launch"])
            let crashID = try #require(try fixture.records().first?["report_id"]?.stringValue)
            let shown = try fixture.run(["show", crashID]).stdout
            let launched = try fixture.run(["launch", "--config", configuration])
            #expect(launched.status == 0, "\(launched.stderr)")

            var random = SplitMix64(seed: 3)
            let attachment = Data((0..<200_000).map { _ in UInt8(truncatingIfNeeded: random.next()) })
            let file = fixture.folder.appendingPathComponent("capture.bin")
            try attachment.write(to: file)
            let planted = "mail alice@example.com <script id=planted>window.plantedRan=1</script><img id=plantedimg src=x onerror=\"window.plantedRan=2\">"
            let bug = try fixture.run([
                "report", "bug", "--summary", planted, "--attach", file.path, "--config", configuration, "--print",
                "--handler", Products.directory.appendingPathComponent("libscrub-pii.so").path,
            ])
            #expect(bug.status == 0, "\(bug.stderr)")
            let bugID = try #require(try JSONValue.parse(bug.stdout)["report_id"]?.stringValue)

            let downloads = fixture.folder.appendingPathComponent("downloads")
            try FileManager.default.createDirectory(at: downloads, withIntermediateDirectories: true)
            let inputs = JSONValue.object([
                ("base", .string(receiver.inboxURL)), ("reporthost", .string(Products.reporthost.path)),
                ("repository", .string(fixture.repository)), ("config", .string(configuration)), ("crash_id", .string(crashID)),
                ("bug_id", .string(bugID)), ("attachment", .string("capture.bin")), ("sha256", .string(SHA256.hex(attachment))),
                ("downloads", .string(downloads.path)),
            ])
            let script = Products.packageRoot.appendingPathComponent("Tests/Browser/inbox_browser.py").path
            let run = try ChildProcess.run(
                "/usr/bin/timeout", ["-s", "KILL", "180", Products.python.path, script, inputs.serialized()],
                environment: ["SE_OFFLINE": "true"], directory: fixture.folder)
            #expect(run.status == 0, "\(run.stderr.suffix(3_000))")
            let results = try JSONValue.parse(run.stdout.split(separator: "\n").last.map(String.init) ?? "")
            for check in ["live", "crash_stack", "crash_modules", "trail", "breadcrumbs", "attachments_apart", "changed_marked", "download", "planted", "planted_list", "python_client", "console"] {
                #expect(results[check]?["ok"]?.boolValue == true, "\(check): \(results[check]?["detail"]?.stringValue ?? "not reported")")
            }

            // The page's stack is `show`'s, line for line.
            let stack = results["crash_stack"]?["detail"]?.stringValue ?? ""
            let shownStack = shown.split(separator: "\n").drop { !$0.hasPrefix("crash: ") }.map { String($0) }
            #expect(!shownStack.isEmpty && stack.split(separator: "\n").map(String.init) == shownStack, "page:\n\(stack)\nshow:\n\(shown)")
        }
    }
}
