import Dispatch
import Foundation
import Host

/// `reporthost report bug|error|exception`: raises a running-app report, runs it through
/// the handler chain and prints the bundled document with `--print` (SPEC I).
enum ReportCommand {
    static let options: [String: Bool] = Arguments.common.merging([
        "summary": true, "description": true, "email": true, "severity": true, "label": true, "attribute": true,
        "attach": true, "terminating": false, "print": false,
    ]) { a, _ in a }

    static func run(_ arguments: Arguments, output: DocumentOutput) throws(HostError) -> Int32 {
        guard arguments.positionals.count == 1, let kind = arguments.positionals.first else {
            throw .usage("'report' needs exactly one kind: bug, error or exception")
        }
        let trigger: Trigger
        switch kind {
        case "bug": trigger = .upload
        case "error": trigger = .logError
        case "exception": trigger = .logException
        default: throw .usage("unknown report kind '\(kind)' (expected bug, error or exception)")
        }
        // Everything the command line can get wrong is checked before the host starts.
        let request = try makeRequest(trigger: trigger, arguments)
        let configuration = try arguments.configuration()
        let logger = try configuration.makeLogger(overrideLevel: try arguments.logLevel())

        let host = try ReportHost(configuration: configuration, logger: logger, mainExecutor: DispatchQueue.main)
        defer { host.stop() }
        for slot in [PluginSlot.wrapper, .handler] {
            if let path = configuration.plugins[slot] { try host.loadPlugin(at: path, into: slot) }
        }
        let document = try host.raise(request)
        logger.info("report \(document.id) (\(document.type.name), \(document.trigger.name)) bundled; not stored: this build has no repository yet")
        if arguments.flag("print") { output.write(document.json.serialized(pretty: true) + "\n") }
        return 0
    }

    static func makeRequest(trigger: Trigger, _ arguments: Arguments) throws(HostError) -> ReportRequest {
        var request = ReportRequest(trigger: trigger)
        request.summary = arguments.value("summary")
        request.description = arguments.value("description")
        request.email = arguments.value("email")
        if let text = arguments.value("severity") {
            guard let severity = Int32(text), ReportContent.severityRange.contains(severity) else {
                throw .usage("--severity '\(text)' is not an integer from 1 to 5")
            }
            request.severity = severity
        }
        request.labels = arguments.values("label")
        for pair in arguments.values("attribute") {
            guard let equals = pair.firstIndex(of: "="), equals != pair.startIndex else {
                throw .usage("--attribute '\(pair)' is not KEY=VALUE")
            }
            request.attributes[String(pair[..<equals])] = String(pair[pair.index(after: equals)...])
        }
        for path in arguments.values("attach") {
            let url = URL(fileURLWithPath: PluginLoader.absolutePath(path))
            guard let data = FileManager.default.contents(atPath: url.path) else {
                throw .usage("--attach '\(path)': the file is missing or unreadable")
            }
            request.attachments.append(.init(name: url.lastPathComponent, filename: url.lastPathComponent, data: data))
        }
        request.isTerminating = arguments.flag("terminating")
        return request
    }
}
