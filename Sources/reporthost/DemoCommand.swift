import Dispatch
import FoundationEssentials
import Glibc
import Host
import HostPlugins
import HostSupport
import Receiver

/// `reporthost demo`: the whole flow on embedded defaults, in a fresh repository: starts a
/// local receiver, crashes a child process and recovers it, runs a bug, an error and an
/// exception report through the sample plugins built beside this executable, delivers
/// everything, and prints each document with its change trail (what each plugin changed, as
/// `show` prints it) and what was received.
///
/// The wrapper slot holds wrapper-sim for every report. A host has one user handler (SPEC
/// H-1), so the user's slot changes between reports: account-context for the recovered
/// crash and the error, scrub-pii for the bug and the exception (free text a person typed, an
/// exception message).
enum DemoCommand {
    static let options: [String: Bool] = ["log-level": true, "repository": true]

    static func run(_ arguments: Arguments, output: DocumentOutput) throws -> Int32 {
        let folder = try pluginFolder()
        var configuration = Configuration()
        if let repository = arguments.value("repository") {
            configuration.repository = Paths.absolute(repository)
        } else {
            configuration.repository = try makeRepository()
        }
        let received = Locked<[String]>([])
        let receiver = try LocalReceiver(
            folder: URL(fileURLWithPath: configuration.repository).appendingPathComponent("received"), keepInMemory: false
        ) { report in
            let type = report.report["attributes"]?["error.type"]?.stringValue ?? "report"
            received.withLock { $0.append("  \(report.uuid)  \(type), \(report.attachments.count) attachment(s)") }
        }
        defer { receiver.stop() }
        configuration.submission.url = receiver.url
        output.write("reporthost demo\nrepository: \(configuration.repository) (fresh)\nplugins: \(folder.path)\nreceiver: \(receiver.url)\n")

        // A child process crashes first; this launch recovers it (the lock is free until then).
        let crash = try crashChild(repository: configuration.repository)
        output.write("\n== a child process crashed (\(crash)); its crash file is recovered by this launch\n")

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
            output.writeText("recovered \(document.trigger.name) report \(document.id): \(document.content.summary ?? "")\n")
            output.writeText(trail(document))
        }

        for (title, handler, request) in demoReports() {
            try runtime.loadPlugin(at: folder.appendingPathComponent("lib\(handler).so").path, into: .handler)
            guard let document = try runtime.raise(request) else { continue }
            output.write("\n== \(title): wrapper-sim, then \(handler)\n")
            output.writeText(trail(document))
            output.write(document.json.serialized(pretty: true) + "\n")
        }
        let summary = try runtime.deliver()
        output.write("\n== delivered to the local receiver: \(summary.accepted) accepted, \(summary.retained) retained, \(summary.terminal) rejected\n")
        output.writeText(received.withLock { $0 }.joined(separator: "\n") + "\n")
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

    /// The folder of this executable, where the build put the sample plugins.
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

    /// The document's change trail, as `show` prints it.
    static func trail(_ document: ReportDocument) -> String {
        ShowCommand.changeLines(document.changes).joined(separator: "\n") + "\n"
    }
}
