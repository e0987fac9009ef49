import FoundationEssentials
import Glibc
import HostSupport

/// A report's final content after bundling: what `--print` shows and what is stored and
/// sent (SPEC I, "Report document").
public struct ReportDocument: Sendable, Equatable {
    public var id: String
    public var trigger: Trigger
    public var content: ReportContent
    public var internalLog: [InternalLogEntry]
    public var createdAt: Date
    /// What plugins changed, and what the host dropped (SPEC T-1).
    public var changes: [TrailEntry]
    /// How many identical crashes this record stands for (SPEC B-3): 1 when unique.
    public var duplicates: Int = 1

    public var type: ReportType { trigger.type }

    public init(
        id: String, trigger: Trigger, content: ReportContent, internalLog: [InternalLogEntry], createdAt: Date,
        changes: [TrailEntry] = []
    ) {
        self.id = id
        self.trigger = trigger
        self.content = content
        self.internalLog = internalLog
        self.createdAt = createdAt
        self.changes = changes
    }

    /// The document as SPEC I shows it: absent strings are null, labels in order,
    /// attribute keys sorted.
    package var json: JSONValue {
        .object([
            ("report_id", .string(id)),
            ("type", .string(type.name)),
            ("trigger", .string(trigger.name)),
            ("summary", .optional(content.summary)),
            ("description", .optional(content.description)),
            ("email", .optional(content.email)),
            ("severity", .int(content.severity)),
            ("attributes", .object(content.attributes.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })),
            ("labels", .array(content.labels.map(JSONValue.string))),
            ("attachments", .array(content.attachments.map { attachment in
                .object([
                    ("name", .string(attachment.name)),
                    ("filename", .string(attachment.filename)),
                    ("size", .int(attachment.size)),
                    ("sha256", .string(attachment.sha256)),
                    ("source", .string(attachment.source.rawValue)),
                ])
            })),
            ("internal_log", .array(internalLog.map { entry in
                .object([
                    ("level", .string(entry.level.name)),
                    ("handler", .string(entry.handler)),
                    ("message", .string(entry.message)),
                ])
            })),
            ("changes", .array(changes.map(\.json))),
            ("breadcrumbs", .array(content.breadcrumbs.map(\.json))),
            ("duplicates", .int(duplicates)),
            ("created_at", .string(Self.timestamp(createdAt))),
        ])
    }

    /// `json.serialized()`, written without building `json`: the repository writes each
    /// report's document twice (its journal and its final form), and building the value
    /// (mostly breadcrumbs) was half of a report's second write. A test holds the two equal.
    package func serialized() -> String {
        var out = JSONWriter(reservingCapacity: 1_024 + 192 * content.breadcrumbs.count)
        write(to: &out, breadcrumbs: true)
        return out.text
    }

    /// The document as the repository stores it (schema 16): its text without the
    /// `breadcrumbs` member, and that member's array apart, nil when it is empty. `bytes` is
    /// the length of `serialized()`, which the two make up.
    package func serializedApart() -> (text: String, breadcrumbs: String?, bytes: Int) {
        let text = textWithoutBreadcrumbs()
        guard !content.breadcrumbs.isEmpty else { return (text, nil, text.utf8.count + Self.emptyBreadcrumbsMember.utf8.count) }
        var array = JSONWriter(reservingCapacity: 192 * content.breadcrumbs.count)
        content.breadcrumbs.writeJSON(to: &array)
        let breadcrumbs = array.text
        return (text, breadcrumbs, text.utf8.count + Self.breadcrumbsKey.utf8.count + breadcrumbs.utf8.count)
    }

    /// `serializedApart` without the breadcrumbs' array, for a record that holds them already:
    /// its text, and the length of `serialized()` (the array counted from each breadcrumb's
    /// rendering, not written).
    package func serializedWithoutBreadcrumbs() -> (text: String, bytes: Int) {
        let text = textWithoutBreadcrumbs()
        return (text, text.utf8.count + Self.breadcrumbsKey.utf8.count + content.breadcrumbs.jsonByteCount)
    }

    /// The stored row's text: the document without its `breadcrumbs` member.
    private func textWithoutBreadcrumbs() -> String {
        var out = JSONWriter(reservingCapacity: 1_024)
        write(to: &out, breadcrumbs: false)
        return out.text
    }

    /// What the `breadcrumbs` member adds to a document's text besides its array.
    private static let breadcrumbsKey = #","breadcrumbs":"#
    private static let emptyBreadcrumbsMember = breadcrumbsKey + "[]"

    /// The breadcrumbs `serializedApart` stored apart; nil when the text is not their array.
    package static func breadcrumbs(stored text: String) -> [Breadcrumb]? {
        guard let items = (try? JSONValue.parse(text))?.arrayValue else { return nil }
        return items.compactMap(Breadcrumb.init(json:))
    }

    private func write(to out: inout JSONWriter, breadcrumbs: Bool) {
        out.openObject()
        out.member("report_id", id)
        out.member("type", type.name)
        out.member("trigger", trigger.name)
        out.member("summary", optional: content.summary)
        out.member("description", optional: content.description)
        out.member("email", optional: content.email)
        out.member("severity", int: content.severity)
        out.key("attributes")
        out.openObject()
        for (key, value) in content.attributes.sorted(by: { $0.key < $1.key }) {
            out.member(key, value)
        }
        out.closeObject()
        out.key("labels")
        out.openArray()
        for label in content.labels { out.string(label) }
        out.closeArray()
        out.key("attachments")
        out.openArray()
        for attachment in content.attachments {
            out.openObject()
            out.member("name", attachment.name)
            out.member("filename", attachment.filename)
            out.member("size", int: attachment.size)
            out.member("sha256", attachment.sha256)
            out.member("source", attachment.source.rawValue)
            out.closeObject()
        }
        out.closeArray()
        out.key("internal_log")
        out.openArray()
        for entry in internalLog {
            out.openObject()
            out.member("level", entry.level.name)
            out.member("handler", entry.handler)
            out.member("message", entry.message)
            out.closeObject()
        }
        out.closeArray()
        out.key("changes")
        out.openArray()
        for change in changes { out.value(change.json) }
        out.closeArray()
        if breadcrumbs {
            out.key("breadcrumbs")
            content.breadcrumbs.writeJSON(to: &out)
        }
        out.member("duplicates", int: duplicates)
        out.member("created_at", Self.timestamp(createdAt))
        out.closeObject()
    }

    /// ISO 8601 in UTC with seconds, e.g. 2026-01-01T00:00:00Z.
    public static func timestamp(_ date: Date) -> String {
        utc(seconds: Int64(date.timeIntervalSince1970.rounded(.down)), milliseconds: nil)
    }

    /// `YYYY-MM-DDTHH:MM:SSZ`, or with `.mmm` before the `Z`: written digit by digit into the
    /// string's own buffer (`status` prints two per record; a plugin reading breadcrumbs, one
    /// per breadcrumb).
    package static func utc(seconds: Int64, milliseconds: Int?) -> String {
        var time = time_t(clamping: seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        return String(unsafeUninitializedCapacity: 24) { buffer in
            var at = 0
            // The separator as a byte: a Character's `asciiValue` checks grapheme boundaries
            // at every call.
            func put(_ value: Int32, _ digits: Int, then: UInt8) {
                var value = max(0, value)
                for position in stride(from: at + digits - 1, through: at, by: -1) {
                    buffer[position] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
                buffer[at + digits] = then
                at += digits + 1
            }
            put(parts.tm_year + 1900, 4, then: UInt8(ascii: "-"))
            put(parts.tm_mon + 1, 2, then: UInt8(ascii: "-"))
            put(parts.tm_mday, 2, then: UInt8(ascii: "T"))
            put(parts.tm_hour, 2, then: UInt8(ascii: ":"))
            put(parts.tm_min, 2, then: UInt8(ascii: ":"))
            put(parts.tm_sec, 2, then: UInt8(ascii: milliseconds == nil ? "Z" : "."))
            if let milliseconds { put(Int32(milliseconds), 3, then: UInt8(ascii: "Z")) }
            return at
        }
    }
}

extension ReportDocument {
    /// Reads a document written by `json`. Attachments come back without their bytes (the
    /// repository keeps those in its copies), with the size and sha256 the document names;
    /// nil when a required field is missing.
    package init?(json: JSONValue) {
        guard let id = json["report_id"]?.stringValue,
            let triggerName = json["trigger"]?.stringValue,
            let trigger = Trigger.allCases.first(where: { $0.name == triggerName }),
            let created = json["created_at"]?.stringValue,
            let createdAt = ReportDocument.parseTimestamp(created)
        else { return nil }
        var content = ReportContent()
        content.summary = json["summary"]?.stringValue
        content.description = json["description"]?.stringValue
        content.email = json["email"]?.stringValue
        // A stored severity outside 1-5 reads as none (R-3), never as a trap.
        content.severity = json["severity"]?.intValue.flatMap { Int32(exactly: $0) }
            .flatMap { ReportContent.severityRange.contains($0) ? $0 : nil } ?? 0
        for (key, value) in json["attributes"]?.objectValue ?? [] {
            if let value = value.stringValue { content.attributes[key] = value }
        }
        content.labels = json["labels"]?.arrayValue?.compactMap(\.stringValue) ?? []
        content.attachments = (json["attachments"]?.arrayValue ?? []).compactMap { item in
            guard let name = item["name"]?.stringValue else { return nil }
            let size = item["size"]?.intValue.map { min(max($0, 0), ReportContent.attachmentMaxBytes) } ?? 0
            return Attachment(
                name: name, filename: item["filename"]?.stringValue ?? name, size: size,
                sha256: item["sha256"]?.stringValue ?? "",
                source: item["source"]?.stringValue.flatMap(AttachmentSource.init(rawValue:)) ?? .recovered)
        }
        let log = (json["internal_log"]?.arrayValue ?? []).compactMap { entry -> InternalLogEntry? in
            guard let message = entry["message"]?.stringValue else { return nil }
            return InternalLogEntry(
                level: entry["level"]?.stringValue.flatMap(LogLevel.init(name:)) ?? .info,
                handler: entry["handler"]?.stringValue ?? "host", message: message)
        }
        // Entries this version cannot read (a newer one's) are left out, never a failure.
        let changes = (json["changes"]?.arrayValue ?? []).compactMap(TrailEntry.init(json:))
        content.breadcrumbs = (json["breadcrumbs"]?.arrayValue ?? []).compactMap(Breadcrumb.init(json:))
        self.init(id: id, trigger: trigger, content: content, internalLog: log, createdAt: createdAt, changes: changes)
        duplicates = max(1, json["duplicates"]?.intValue ?? 1)
    }
}
