import Dispatch
import FoundationEssentials
import Glibc
import Host
import HostPlugins
import HostSupport
import Receiver

/// `reporthost demo`: the whole flow on embedded defaults, in a fresh repository: starts a
/// local receiver, crashes a child process and recovers it, runs a bug, an error and an
/// exception report through the sample plugins, delivers everything, and tells each report's
/// story: its text before and after, what each plugin changed in words, and for the crash its
/// stack as `show` prints it. `--json` adds each stored document. It ends with the next step:
/// the inbox on what the demo's receiver got.
///
/// The wrapper slot holds wrapper-sim for every report. A host has one user handler (SPEC
/// H-1), so the user's slot changes between reports: account-context for the recovered
/// crash and the error, scrub-pii for the bug and the exception (free text a person typed, an
/// exception message).
enum DemoCommand {
    static let options: [String: Bool] = ["log-level": true, "repository": true, "json": false]

    static func run(_ arguments: Arguments, output: DocumentOutput) throws -> Int32 {
        let folder = try pluginFolder()
        var configuration = Configuration()
        if let repository = arguments.value("repository") {
            configuration.repository = Paths.absolute(repository)
        } else {
            configuration.repository = try makeRepository()
        }
        let json = arguments.flag("json")
        let received = Locked<[String]>([])
        let receivedFolder = URL(fileURLWithPath: configuration.repository).appendingPathComponent("received")
        let receiver = try LocalReceiver(folder: receivedFolder, keepInMemory: false) { report in
            let type = report.report["attributes"]?["error.type"]?.stringValue ?? "report"
            received.withLock { $0.append("  \(report.uuid)  \(type), \(ReceiveCommand.counts(report))") }
        }
        defer { receiver.stop() }
        configuration.submission.url = receiver.url
        output.write("reporthost demo\nrepository: \(configuration.repository) (fresh)\nplugins: \(folder.path)\nreceiver: \(receiver.url)\n")

        // A child process crashes first; this launch recovers it (the lock is free until then).
        let crash = try crashChild(repository: configuration.repository)
        configuration.plugins[.wrapper] = folder.appendingPathComponent("libwrapper-sim.so").path
        configuration.plugins[.handler] = folder.appendingPathComponent("libaccount-context.so").path
        var options = RuntimeOptions(configuration: configuration, mainExecutor: DispatchQueue.main)
        options.logLevel = try arguments.logLevel() ?? .warn
        options.faults = Switches.faults
        options.delivery = .onePass(retries: true)
        let runtime = try Runtime.start(options)
        defer { runtime.stop() }
        try runtime.recover()
        for document in runtime.recovered {
            output.write("\n== 1. a crash, recovered by the next launch\n")
            output.writeText("""
                The demo's child process `reporthost crash --signal SEGV` crashes on purpose: it ended by \(crash).
                This launch found its crash file and made crash report \(document.id) of it,
                through wrapper-sim, then account-context.
                summary: \(document.content.summary ?? "")
                the crashed thread, as `reporthost show` prints it:

                """)
            output.writeText(DemoStory.crashLines(of: document.id, repository: configuration.repository).map { "  " + $0 }.joined(separator: "\n") + "\n")
            output.writeText(DemoStory.changes(document).joined(separator: "\n") + "\n")
            if json { output.write(document.json.serialized(pretty: true) + "\n") }
        }

        for (number, (title, handler, request)) in demoReports().enumerated() {
            try runtime.loadPlugin(at: folder.appendingPathComponent("lib\(handler).so").path, into: .handler)
            guard let document = try runtime.raise(request) else { continue }
            output.write("\n== \(number + 2). \(title), through wrapper-sim, then \(handler)\n")
            output.writeText((DemoStory.beforeAndAfter(request, document.content) + DemoStory.changes(document)).joined(separator: "\n") + "\n")
            if json { output.write(document.json.serialized(pretty: true) + "\n") }
        }
        let summary = try runtime.deliver()
        output.write("\n== delivered to the local receiver: \(summary.accepted) accepted, \(summary.retained) retained, \(summary.terminal) rejected\n")
        output.writeText(received.withLock { $0 }.joined(separator: "\n") + "\n")
        output.write("""

            Next: see them as a server got them, the trail drawn over the text, in a browser:
              reporthost receive --inbox --dir \(receivedFolder.path)
            and open the address it prints after "inbox on" (Ctrl-C stops it).\(json ? "" : "\n`reporthost demo --json` also prints each stored document.")

            """)
        return summary.retained == 0 && summary.terminal == 0 ? 0 : 1
    }

    /// Runs `reporthost crash` in a child process; returns how it ended.
    static func crashChild(repository: String) throws -> String {
        let arguments = [CheckCommand.ownExecutable, "crash", "--signal", "SEGV", "--repository", repository, "--log-level", "error"]
        switch Subprocess.spawn(arguments) {
        case .failure(let error): throw HostError.runtime("demo: cannot start the crashing child (\(error))")
        case .success(let child):
            switch child.wait() {
            case .signalled(let signal): return "signal \(signal)"
            case .exited(let status): return "exit \(status)"
            }
        }
    }

    static func demoReports() -> [(String, String, ReportRequest)] {
        var bug = ReportRequest(trigger: .upload)
        bug.summary = "Checkout button does nothing for alice@example.com"
        bug.description = "Card 4111 1111 1111 1111 was declined; my token=sk_live_51H8 is attached"
        bug.labels = ["checkout"]
        var error = ReportRequest(trigger: .logError)
        error.summary = "Sync failed: HTTP 503 from the billing service"
        error.severity = 3
        var exception = ReportRequest(trigger: .logException)
        exception.summary = "NullReferenceException in PaymentForm.submit"
        exception.description = "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig from 10.20.30.40"
        return [("bug report", "scrub-pii", bug), ("error report", "account-context", error), ("exception report", "scrub-pii", exception)]
    }

    /// The sample plugins' folder (`Shipped`: a build folder or an installation).
    static func pluginFolder() throws -> URL {
        let names = ["wrapper-sim", "scrub-pii", "account-context"].map { "lib\($0).so" }
        guard let folder = Shipped.folder(holding: names) else {
            throw HostError.runtime(
                "demo plugins \(names.joined(separator: ", ")) are missing beside reporthost: build everything first (scripts/demo does; `swift run` builds only the executable)")
        }
        return URL(fileURLWithPath: folder)
    }

    static func makeRepository() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("reporthost-demo-\(UUID().uuidString.prefix(8))").path
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            throw HostError.io(path: path, reason: "cannot create the demo repository")
        }
        return path
    }

}
