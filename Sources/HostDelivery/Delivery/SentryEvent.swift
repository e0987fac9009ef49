import FoundationEssentials
import HostModel
import HostSupport
import HostStore

/// Our report document as a Sentry event (SPEC S-2), the payload of an envelope's `event` item:
///
/// | our document | Sentry event |
/// |---|---|
/// | `report_id` | `event_id` (32 lowercase hex digits) |
/// | `created_at` | `timestamp` |
/// | `summary`, `description` | `logentry.formatted` (the description after a blank line) |
/// | `severity` 1–5 | `level` debug, info, warning, error, fatal (a crash: fatal) |
/// | the release (`release`, else the `version` attribute) | `release` |
/// | `email` | `user.email` |
/// | `attributes` | `tags` (a key over 32 or a value over 200 characters: `extra`) |
/// | `breadcrumbs` | `breadcrumbs.values` |
/// | `type`, `trigger`, `labels`, `changes`, `internal_log` | `contexts.reporthost` |
/// | a crash's signal | `exception.values[0]`: `type` SIGSEGV…, `mechanism` `signalhandler` |
/// | a crash's frames (innermost first) | `stacktrace.frames` (outermost first) |
/// | a hang's threads | `threads.values` |
/// | modules | `debug_meta.images` (`code_id`: the build id) |
package enum SentryEvent {
    package static func json(_ document: ReportDocument, crash: JSONValue?, release: String?, sendChanges: Bool) -> JSONValue {
        var fields: [(String, JSONValue)] = [
            ("event_id", .string(eventID(document.id))),
            ("timestamp", .string(ReportDocument.timestamp(document.createdAt))),
            ("platform", .string("native")),
            ("level", .string(level(document))),
            ("logger", .string("reporthost")),
            ("sdk", .object([("name", .string("reporthost")), ("version", .string(HostVersion.current))])),
        ]
        if let release { fields.append(("release", .string(release))) }
        if let text = message(document) { fields.append(("logentry", .object([("formatted", .string(text))]))) }
        if let email = document.content.email { fields.append(("user", .object([("email", .string(email))]))) }
        let (tags, extra) = tagsAndExtra(document)
        if !tags.isEmpty { fields.append(("tags", .object(tags))) }
        if !extra.isEmpty { fields.append(("extra", .object(extra))) }
        if !document.content.breadcrumbs.isEmpty {
            fields.append(("breadcrumbs", .object([("values", .array(document.content.breadcrumbs.map(breadcrumb)))])))
        }
        fields.append(("contexts", .object([("reporthost", context(document, sendChanges: sendChanges))])))
        fields += crashFields(document, crash: crash)
        return .object(fields)
    }

    /// 32 lowercase hex digits: the report id without its dashes.
    package static func eventID(_ id: String) -> String { id.lowercased().filter { $0 != "-" } }

    static func level(_ document: ReportDocument) -> String {
        if document.trigger == .crash { return "fatal" }
        switch document.content.severity {
        case 1: return "debug"
        case 2: return "info"
        case 3: return "warning"
        case 4: return "error"
        case 5: return "fatal"
        default: return document.trigger == .dialog || document.trigger == .upload ? "info" : "error"
        }
    }

    static func message(_ document: ReportDocument) -> String? {
        let parts = [document.content.summary, document.content.description].compactMap { $0 }.filter { !$0.isEmpty }
        return parts.isEmpty ? nil : parts.joined(separator: "\n\n")
    }

    /// Sentry keeps a tag's key to 32 characters and its value to 200: the others go in `extra`.
    static func tagsAndExtra(_ document: ReportDocument) -> (tags: [(String, JSONValue)], extra: [(String, JSONValue)]) {
        var tags: [(String, JSONValue)] = [], extra: [(String, JSONValue)] = []
        for (key, value) in document.content.attributes.sorted(by: { $0.key < $1.key }) {
            let fits = key.count <= 32 && value.count <= 200 && !value.contains("\n")
            if fits { tags.append((key, .string(value))) } else { extra.append((key, .string(value))) }
        }
        return (tags, extra)
    }

    static func breadcrumb(_ crumb: Breadcrumb) -> JSONValue {
        let level = switch crumb.level {
        case .debug: "debug"
        case .info: "info"
        case .warn: "warning"
        case .error: "error"
        }
        return .object([
            ("timestamp", .string(Breadcrumb.timestamp(crumb.timestamp))), ("level", .string(level)),
            ("category", .string(crumb.category)), ("message", .string(crumb.message)),
        ])
    }

    static func context(_ document: ReportDocument, sendChanges: Bool) -> JSONValue {
        var fields: [(String, JSONValue)] = [
            ("report_type", .string(document.type.name)), ("trigger", .string(document.trigger.name)),
            ("report_id", .string(document.id)),
        ]
        if !document.content.labels.isEmpty { fields.append(("labels", .array(document.content.labels.map(JSONValue.string)))) }
        if document.trigger == .crash { fields.append(("duplicates", .int(Int64(document.duplicates)))) }
        if sendChanges && !document.changes.isEmpty { fields.append(("changes", .array(document.changes.map(\.json)))) }
        if !document.internalLog.isEmpty {
            fields.append(("internal_log", .array(document.internalLog.map { entry in
                .string("\(entry.level.name) \(entry.handler): \(entry.message)")
            })))
        }
        return .object(fields)
    }
}
