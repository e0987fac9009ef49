import Foundation
import Host

/// `reporthost show ID|latest [--json]`: one stored report as a person reads it (SPEC I);
/// `--json` prints its stored document with its `crash` payload. Only reads: works while
/// another host holds the repository, and creates nothing.
enum ShowCommand {
    static let options: [String: Bool] = ["config": true, "repository": true, "json": false, "log-level": true]

    static func run(_ arguments: Arguments, output: DocumentOutput) throws -> Int32 {
        guard let wanted = arguments.positionals.first else { throw UsageError("'show' needs a report id, or latest") }
        let folder = URL(fileURLWithPath: Paths.absolute(try arguments.configuration().repository))
        let records: [ReportRecord]
        do {
            records = try Repository.openForReading(existingFolder: folder)?.records() ?? []
        } catch {
            throw HostError.io(path: error.path, reason: error.message)
        }
        // `latest`: the one stored last (a crash's report is dated at the crash, maybe earlier).
        let record = wanted == "latest" ? records.max { $0.rowID < $1.rowID } : records.first { $0.reportID == wanted.lowercased() }
        guard let record else {
            throw HostError.io(path: folder.path, reason: wanted == "latest" ? "no report is stored" : "no report \(wanted) is stored")
        }
        if arguments.flag("json") {
            var json = record.document.json
            if case .object(var fields) = json {
                fields.append(("crash", record.crash ?? .null))
                json = .object(fields)
            }
            output.write(json.serialized(pretty: true) + "\n")
        } else {
            output.write(text(record))
        }
        return 0
    }

    /// The report, a field a line; a crash's signal and stack after its attributes.
    static func text(_ record: ReportRecord) -> String {
        let document = record.document
        let content = document.content
        var lines = [
            "report \(record.reportID)",
            "  \(document.type.name), trigger \(document.trigger.name), created \(ReportDocument.timestamp(document.createdAt))",
            "  state \(record.state.rawValue), attempts \(record.attempts)"
                + (record.nextAttemptAt.map { ", next \(ReportDocument.timestamp($0))" } ?? "")
                + (record.outcome.map { ", \($0)" } ?? "") + (record.held.map { ", held: \($0)" } ?? ""),
        ]
        if let summary = content.summary { lines.append("summary: \(summary)") }
        if let description = content.description { lines.append("description: \(description)") }
        if let email = content.email { lines.append("email: \(email)") }
        if content.severity != 0 { lines.append("severity: \(content.severity)") }
        if !content.labels.isEmpty { lines.append("labels: \(content.labels.joined(separator: ", "))") }
        if !content.attributes.isEmpty {
            lines.append("attributes:")
            lines += content.attributes.sorted { $0.key < $1.key }.map { "  \($0.key) = \($0.value)" }
        }
        if !content.attachments.isEmpty {
            lines.append("attachments:")
            lines += content.attachments.map { "  \($0.name)  \($0.size) bytes  (\($0.source.rawValue))" }
        }
        if !document.internalLog.isEmpty {
            lines.append("internal log:")
            lines += document.internalLog.map { "  \($0.level.name) [\($0.handler)] \($0.message)" }
        }
        if let crash = record.crash { lines += crashLines(crash) }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The signal line, then the crashed thread's stack one frame per line.
    static func crashLines(_ crash: JSONValue) -> [String] {
        let name = crash["signal_name"]?.stringValue ?? "?"
        let code = crash["code"]?.intValue.map { " code \($0)" } ?? ""
        let address = crash["address"]?.stringValue.map { " at \($0)" } ?? ""
        var lines = ["crash: SIG\(name)\(code)\(address)"]
        let main = crash["main_thread"]?.stringValue ?? ""
        let stack = crash["threads"]?[main]?["stack"]?.arrayValue ?? []
        lines.append("thread \(main) (crashed):")
        for (index, frame) in stack.enumerated() {
            let place = frame["library"]?.stringValue.map { library in
                " in \(URL(fileURLWithPath: library).lastPathComponent)+\(frame["offset"]?.stringValue ?? "?")"
            } ?? ""
            let function = frame["function"]?.stringValue.map { " \($0)" } ?? ""
            lines.append("  #\(index) \(frame["address"]?.stringValue ?? "?")\(function)\(place)")
        }
        return lines
    }
}
