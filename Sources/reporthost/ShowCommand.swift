import FoundationEssentials
import Glibc
import Host
import HostStore
import HostSupport

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
            records = try Repository.openForReading(existingFolder: folder, system: Switches.system)?.records() ?? []
        } catch {
            throw HostError.io(path: error.path, reason: error.message)
        }
        let record = try find(wanted, in: records, folder: folder)
        if arguments.flag("json") {
            var json = record.document.json
            if case .object(var fields) = json {
                fields.append(("crash", record.crash ?? .null))
                json = .object(fields)
            }
            output.write(json.serialized(pretty: true) + "\n")
        } else {
            output.writeText(text(record))
        }
        return 0
    }

    /// `latest` (the one stored last: a crash's report is dated at the crash, maybe earlier), a
    /// whole id, or, as git takes a commit, a prefix of one that no other id has.
    static func find(_ wanted: String, in records: [ReportRecord], folder: URL) throws -> ReportRecord {
        if wanted == "latest" {
            guard let last = records.max(by: { $0.rowID < $1.rowID }) else { throw HostError.io(path: folder.path, reason: "no report is stored") }
            return last
        }
        let id = wanted.lowercased()
        if let exact = records.first(where: { $0.reportID == id }) { return exact }
        let matching = records.filter { $0.reportID.hasPrefix(id) }
        guard !id.isEmpty, let first = matching.first else {
            throw HostError.io(path: folder.path, reason: "no report \(wanted) is stored (\(records.count) report(s) are: `reporthost status` lists them)")
        }
        guard matching.count == 1 else {
            throw UsageError("'\(wanted)' is ambiguous: \(matching.count) reports begin with it (\(matching.prefix(4).map(\.reportID).joined(separator: ", "))\(matching.count > 4 ? ", …" : "")); give more of the id")
        }
        return first
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
        if document.duplicates > 1 {
            lines.append("  \(document.duplicates) identical crashes (same signal, top frames and build ids) counted on this record")
        }
        if record.state == .terminal {
            // Terminal rows keep their id, type and outcome only (SPEC D-9).
            lines.append("  its content was removed when it became terminal (\(ReportDocument.timestamp(record.updatedAt))): only its id, type and outcome are kept")
        }
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
        lines += changeLines(document.changes)
        lines += breadcrumbLines(content.breadcrumbs)
        if let crash = record.crash { lines += CrashText.lines(crash) }
        return lines.joined(separator: "\n") + "\n"
    }

    /// What the program did before the report (SPEC B-1), oldest first, under `breadcrumbs:`;
    /// nothing when there are none.
    static func breadcrumbLines(_ breadcrumbs: [Breadcrumb]) -> [String] {
        breadcrumbs.isEmpty ? [] : ["breadcrumbs (\(breadcrumbs.count), oldest first):"] + breadcrumbs.map { crumb in
            "  \(Breadcrumb.timestamp(crumb.timestamp)) \(crumb.level.name.padded(toLength: 5)) [\(TerminalText.visible(crumb.category))] \(TerminalText.visible(crumb.message))"
        }
    }

    /// The change trail, an entry a line (SPEC T-1), under `changes:`; nothing when empty.
    static func changeLines(_ changes: [TrailEntry]) -> [String] {
        changes.isEmpty ? [] : ["changes:"] + changes.map { "  \($0.text)" }
    }
}
