import Dispatch
import Host

/// `reporthost demo`: until the sample plugins exist, runs a bug report through two
/// built-in Swift handlers (one per slot) and prints the document.
enum DemoCommand {
    static let options: [String: Bool] = ["log-level": true]

    static func run(_ arguments: Arguments, output: DocumentOutput) throws(HostError) -> Int32 {
        let configuration = Configuration()
        let logger = try configuration.makeLogger(overrideLevel: try arguments.logLevel())
        let host = try ReportHost(configuration: configuration, logger: logger, mainExecutor: DispatchQueue.main)
        defer { host.stop() }
        host.setHandler(
            .swift(SwiftHandler(
                name: "demo-wrapper",
                before: .completion { report, _, completion in
                    try? report.setAttribute("wrapper.name", "demo-wrapper")
                    if (try? report.hasLabel("wrapper")) != true { try? report.addLabel("wrapper") }
                    DispatchQueue.global().async { completion() }
                })),
            for: .wrapper)
        host.setHandler(
            .swift(SwiftHandler(
                name: "demo-handler",
                after: .completion { report, _, completion in
                    let summary = (try? report.summary()) ?? ""
                    try? report.setSummary(summary.replacingOccurrences(of: "alice@example.com", with: "[email]"))
                    try? report.setSeverity(3)
                    completion()
                })),
            for: .handler)
        var request = ReportRequest(trigger: .upload)
        request.summary = "Checkout fails for alice@example.com"
        request.labels = ["checkout"]
        if let document = try host.raise(request) { output.write(document.json.serialized(pretty: true) + "\n") }
        return 0
    }
}
