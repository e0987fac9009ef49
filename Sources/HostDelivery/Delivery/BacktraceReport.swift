import FoundationEssentials
import HostModel
import HostSupport
import HostStore

/// Our report document in Backtrace's submission format (the JSON its SDKs send):
///
/// | our document | Backtrace |
/// |---|---|
/// | `report_id` | `uuid` |
/// | `created_at` (a crash: the crash time) | `timestamp`, integer Unix seconds |
/// | `attributes` | `attributes` (strings) |
/// | `summary` | `attributes["error.message"]` |
/// | `type`, `trigger` | `attributes["error.type"]`, `attributes["reporthost.trigger"]` |
/// | `severity` (1–5) | `attributes["severity"]` |
/// | `email` | `attributes["user.email"]` |
/// | `labels` | `classifiers` |
/// | `description` | `annotations["Description"]` |
/// | `internal_log` | `annotations["ReportHost internal log"]` |
/// | `changes` (unless `privacy.sendChanges` is false) | `annotations["reporthost.changes"]` |
/// | attachments | `attachment_<name>` parts, metadata in `annotations["Attachments"]` |
/// | crash payload | `threads`, `mainThread`, `sourceCode`, `annotations["Crash"]` (signal, registers, modules) |
///
/// A crash frame becomes Backtrace's: `address`, `library` (the module's path), `offset`,
/// `debug_identifier` (the module's build id, which a Backtrace server matches uploaded debug
/// files by), and where recovery symbolicated it `funcName`, `line` and `sourceCode` (a key of
/// the top-level `sourceCode`, whose entry holds `path`).
package enum BacktraceReport {
    static let agentVersion = HostVersion.current
    static let languageVersion: String = {
        #if swift(>=6.3)
        "6.3"
        #else
        "6"
        #endif
    }()

    /// - Parameter sendChanges: whether the change trail goes too (`privacy.sendChanges`).
    package static func json(_ document: ReportDocument, crash: JSONValue?, sendChanges: Bool = true) -> JSONValue {
        var attributes: [(String, JSONValue)] = document.content.attributes.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) }
        func set(_ key: String, _ value: String?) {
            guard let value else { return }
            attributes.removeAll { $0.0 == key }
            attributes.append((key, .string(value)))
        }
        set("error.message", document.content.summary)
        set("error.type", errorType(document))
        set("reporthost.trigger", document.trigger.name)
        set("severity", document.content.severity > 0 ? String(document.content.severity) : nil)
        set("user.email", document.content.email)
        // Backtrace's SDKs name the last breadcrumb sent with the report.
        set("breadcrumbs.lastId", document.content.breadcrumbs.last.map { String($0.sequence) })
        if document.trigger == .crash { set("reporthost.duplicates", String(document.duplicates)) }

        var annotations: [(String, JSONValue)] = []
        if let description = document.content.description { annotations.append(("Description", .string(description))) }
        if !document.internalLog.isEmpty {
            annotations.append(("ReportHost internal log", .array(document.internalLog.map { entry in
                .object([("level", .string(entry.level.name)), ("handler", .string(entry.handler)), ("message", .string(entry.message))])
            })))
        }
        if let list = document.json["attachments"]?.arrayValue, !list.isEmpty {
            annotations.append(("Attachments", .array(list)))
        }
        if sendChanges && !document.changes.isEmpty {
            annotations.append(("reporthost.changes", .array(document.changes.map(\.json))))
        }

        var fields: [(String, JSONValue)] = [
            ("uuid", .string(document.id.lowercased())),
            ("timestamp", .int(Int64(document.createdAt.timeIntervalSince1970))),
            ("lang", .string("swift")),
            ("langVersion", .string(languageVersion)),
            ("agent", .string("reporthost")),
            ("agentVersion", .string(agentVersion)),
            ("attributes", .object(attributes)),
        ]
        if document.type == .crash {
            var sources = SourceFiles()
            let stored = crash?["threads"]?.objectValue ?? []
            let threads: [(String, JSONValue)] = stored.isEmpty
                ? [("0", .object([("name", .string("unknown")), ("stack", .array([]))]))]
                : stored.map { id, thread in (id, backtraceThread(thread, sources: &sources)) }
            let main = crash?["main_thread"]?.stringValue ?? threads.first?.0 ?? "0"
            fields.append(("threads", .object(threads)))
            fields.append(("mainThread", .string(main)))
            if !sources.entries.isEmpty { fields.append(("sourceCode", .object(sources.entries))) }
            if let crash { annotations.append(("Crash", crashAnnotation(crash))) }
        }
        fields.append(("annotations", .object(annotations)))
        fields.append(("classifiers", .array(document.content.labels.map(JSONValue.string))))
        return .object(fields)
    }

    /// The report's breadcrumbs as Backtrace's own SDKs send them: an attachment named
    /// `bt-breadcrumbs-0` holding a JSON array of `{id, timestamp (Unix ms), level, type,
    /// message, attributes}`, oldest first. nil when the report has none.
    package static let breadcrumbsAttachment = "bt-breadcrumbs-0"

    package static func breadcrumbsPart(_ document: ReportDocument) -> MultipartBody.InlinePart? {
        guard !document.content.breadcrumbs.isEmpty else { return nil }
        let entries = document.content.breadcrumbs.map { crumb -> JSONValue in
            .object([
                ("id", .int(Int(clamping: crumb.sequence))),
                ("timestamp", .int(Int(Breadcrumb.milliseconds(crumb.timestamp)))),
                ("level", .string(backtraceLevel(crumb.level))),
                ("type", .string(crumb.category == Breadcrumb.hostCategory ? "system" : crumb.category == Breadcrumb.standardErrorCategory ? "log" : "manual")),
                ("message", .string(crumb.message)),
                ("attributes", .object([("category", .string(crumb.category))])),
            ])
        }
        return MultipartBody.InlinePart(
            name: "attachment_" + breadcrumbsAttachment, filename: breadcrumbsAttachment, type: "application/json",
            bytes: Array(JSONValue.array(entries).serialized().utf8))
    }

    /// Backtrace's breadcrumb level names.
    private static func backtraceLevel(_ level: LogLevel) -> String {
        switch level {
        case .debug: "debug"
        case .info: "info"
        case .warn: "warning"
        case .error: "error"
        }
    }

    /// The crash payload but its threads, as `annotations["Crash"]`: module paths with the
    /// home folder as `~` (the stored document keeps real paths, for local symbolication).
    static func crashAnnotation(_ crash: JSONValue) -> JSONValue {
        .object((crash.objectValue ?? []).compactMap { key, value -> (String, JSONValue)? in
            switch key {
            case "threads", "main_thread": return nil
            case "fault_module": return (key, value.stringValue.map { .string(LocalPaths.forServer($0)) } ?? value)
            case "modules":
                return (key, .array((value.arrayValue ?? []).map { module in
                    .object((module.objectValue ?? []).map { field, text in
                        (field, field == "path" ? text.stringValue.map { .string(LocalPaths.forServer($0)) } ?? text : text)
                    })
                }))
            default: return (key, value)
            }
        })
    }

    /// The source files frames name, each under a key of its own (`sourceCode`).
    struct SourceFiles {
        var entries: [(String, JSONValue)] = []
        var keys: [String: String] = [:]

        mutating func key(for path: String) -> String {
            if let key = keys[path] { return key }
            let key = String(entries.count + 1)
            keys[path] = key
            entries.append((key, .object([("path", .string(LocalPaths.forServer(path)))])))
            return key
        }
    }

    /// A stored thread (`frames` in our document; `stack` with `library` in reports stored by earlier versions) as
    /// Backtrace's: `name`, `fault`, `stack`.
    static func backtraceThread(_ thread: JSONValue, sources: inout SourceFiles) -> JSONValue {
        let frames = thread["frames"]?.arrayValue ?? thread["stack"]?.arrayValue ?? []
        let stack: [JSONValue] = frames.map { frame in
            var fields: [(String, JSONValue)] = [("address", frame["address"] ?? .string("0x0"))]
            if let library = (frame["module"] ?? frame["library"])?.stringValue {
                fields.append(("library", .string(LocalPaths.forServer(library))))
            }
            if let offset = frame["offset"] { fields.append(("offset", offset)) }
            if let id = frame["build_id"]?.stringValue { fields.append(("debug_identifier", .string(id))) }
            if let function = frame["function"]?.stringValue { fields.append(("funcName", .string(function))) }
            if let line = frame["line"]?.intValue { fields.append(("line", .string(String(line)))) }
            if let file = frame["file"]?.stringValue { fields.append(("sourceCode", .string(sources.key(for: file)))) }
            return .object(fields)
        }
        return .object([
            ("name", thread["name"] ?? .string("crashed")), ("fault", thread["fault"] ?? .bool(true)), ("stack", .array(stack)),
        ])
    }

    static func errorType(_ document: ReportDocument) -> String {
        switch document.trigger {
        case .crash: "Crash"
        case .abnormalExit: "Abnormal exit"
        case .logException: "Exception"
        case .logError: "Error"
        case .appHang: "Hang"
        case .dialog, .upload: "Bug report"
        }
    }
}
