import Foundation

/// A report's final content after bundling: what `--print` shows and what is stored and
/// sent (SPEC I, "Report document").
public struct ReportDocument: Sendable, Equatable {
    public var id: String
    public var trigger: Trigger
    public var content: ReportContent
    public var internalLog: [InternalLogEntry]
    public var createdAt: Date

    public var type: ReportType { trigger.type }

    /// The document as SPEC I shows it: absent strings are null, labels in order,
    /// attribute keys sorted.
    public var json: JSONValue {
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
                    ("size", .int(attachment.data.count)),
                    ("sha256", .string(SHA256.hex(attachment.data))),
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
            ("created_at", .string(Self.timestamp(createdAt))),
        ])
    }

    /// ISO 8601 in UTC with seconds, e.g. 2026-01-01T00:00:00Z.
    public static func timestamp(_ date: Date) -> String {
        var time = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&time, &parts)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
            parts.tm_hour, parts.tm_min, parts.tm_sec)
    }
}
