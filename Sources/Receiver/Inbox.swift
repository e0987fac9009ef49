import FoundationEssentials
import Glibc
import Host
import HostDelivery
import HostSupport

/// What `reporthost receive --inbox` shows (SPEC T-2): the reports the receiver stored, newest
/// first, the requests it answered, and a stream of both as they happen.
///
/// It keeps a short entry per report (what the list shows and filters on); a report's page
/// reads the stored file itself. Reports already in the folder when it starts are listed too.
///
/// Its memory is bounded whatever clients send: at most `entriesKept` entries (the newest;
/// older reports stay in the folder, unlisted), each cut to a few kilobytes (`Kept` below),
/// and at most `requestsKept` requests and `eventsKept` events.
///
/// # Thread safety
/// All state is behind one `Condition`, which also wakes the event streams.
package final class Inbox: @unchecked Sendable {
    /// One received report, as the list shows it.
    package struct Entry: Sendable {
        package var uuid: String
        package var type: String
        package var summary: String
        package var receivedAt: Date
        /// The first attachments' names (at most `namesKept` bytes of them), and how many came:
        /// files, Backtrace's breadcrumb attachment apart (as `show` and `receive` count them).
        package var attachments: [String]
        package var attachmentCount: Int
        /// Whether it came with breadcrumbs (Backtrace's `bt-breadcrumbs-0`).
        package var hasBreadcrumbs = false
        /// Whether a plugin changed it (its change trail is not empty).
        package var changed = false
        package var attributes: [String: String]
        package var labels: [String]
        /// The description, cut to a few kilobytes: searched by the text filter.
        package var description: String
        /// How many times it arrived (a client resending after a lost answer).
        package var arrivals = 1
    }

    /// One answered request.
    package struct Request: Sendable {
        package var at: Date
        package var method: String
        package var path: String
        package var status: Int
        /// `reset` or `stall` when no status was sent.
        package var answer: String?
        package var chaos: Bool
        package var report: String?
    }

    /// What the list is filtered by: every given filter must match.
    package struct Filter: Sendable {
        package var type: String?
        /// `key` (present) or `key=value`.
        package var attribute: String?
        package var label: String?
        /// Text in the summary, the description, the id, an attribute value or a label.
        package var text: String?

        package init(type: String? = nil, attribute: String? = nil, label: String? = nil, text: String? = nil) {
            self.type = type
            self.attribute = attribute
            self.label = label
            self.text = text
        }

        var isEmpty: Bool { [type, attribute, label, text].allSatisfy { $0?.isEmpty ?? true } }

        func matches(_ entry: Entry) -> Bool {
            if let type, !type.isEmpty, entry.type.lowercased() != type.lowercased() { return false }
            if let attribute, !attribute.isEmpty {
                // `key` or `key=value`; any text is one of the two (`=` alone is an empty key).
                let parts = attribute.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                guard let value = entry.attributes[parts[0]] else { return false }
                if parts.count == 2 && value != parts[1] { return false }
            }
            if let label, !label.isEmpty, !entry.labels.contains(label) { return false }
            if let text, !text.isEmpty {
                let wanted = text.lowercased()
                let haystack = [entry.uuid, entry.summary, entry.description] + entry.labels + Array(entry.attributes.values)
                return haystack.contains { $0.lowercased().contains(wanted) }
            }
            return true
        }
    }

    /// Requests kept for `/api/requests` (the oldest go first).
    static let requestsKept = 1_000
    /// Events kept for streams that fell behind.
    static let eventsKept = 1_000
    /// Reports listed (the oldest leave the list, never the folder).
    static let entriesKept = 5_000
    /// What an entry keeps of a report, in bytes of UTF-8: an entry stays under ~12 KB.
    enum Kept {
        static let summary = 1_024
        static let description = 4_096
        /// Attributes: at most `attributes` of them, `attributeText` bytes of keys and values
        /// together, each value at most `attributeValue`.
        static let attributes = 64
        static let attributeText = 4_096
        static let attributeValue = 256
        /// Labels and attachment names: their bytes together.
        static let labels = 1_024
        static let names = 2_048
        /// A request's path as `/api/requests` lists it.
        static let path = 512
    }
    /// The largest stored report read back (a request body's limit).
    static let reportMaxBytes = 64 << 20

    let folder: URL
    private let condition = Condition()
    private var entries: [Entry] = []
    private var requests: [Request] = []
    private var events: [(sequence: Int, text: String)] = []
    private var sequence = 0
    private var stopped = false

    init(folder: URL, system: SystemCalls) {
        self.folder = folder
        entries = Self.load(folder, system: system)
    }

    // MARK: Recording

    /// A report the receiver stored (again, when its uuid is known: it moves to the top).
    func add(_ received: LocalReceiver.Received, at date: Date) {
        var entry = Self.entry(received.report, uuid: received.uuid, attachments: received.attachments.keys.sorted(), at: date)
        locked {
            if let index = entries.firstIndex(where: { $0.uuid.lowercased() == received.uuid.lowercased() }) {
                entry.arrivals = entries[index].arrivals + 1
                entries.remove(at: index)
            }
            entries.append(entry)
            if entries.count > Self.entriesKept { entries.removeFirst(entries.count - Self.entriesKept) }
            publish("report", Self.listJSON(entry))
        }
    }

    func record(_ request: Request) {
        var request = request
        request.path = ReportContent.bounded(request.path, limit: Kept.path).text
        locked {
            requests.append(request)
            if requests.count > Self.requestsKept { requests.removeFirst(requests.count - Self.requestsKept) }
            publish("request", Self.requestJSON(request))
        }
    }

    /// Forgets every report and removes its files (`DELETE /api/reports`).
    func removeAll() {
        let removed = locked { () -> [Entry] in
            defer {
                entries = []
                publish("cleared", .object([]))
            }
            return entries
        }
        for entry in removed {
            unlink(folder.appendingPathComponent("\(entry.uuid).json").path)
            // Every file of the folder: the entry lists only the first names.
            let attachments = folder.appendingPathComponent(entry.uuid)
            for name in (try? FileManager.default.contentsOfDirectory(atPath: attachments.path)) ?? [] {
                unlink(attachments.appendingPathComponent(name).path)
            }
            rmdir(attachments.path)
        }
    }

    /// Wakes every stream so it ends.
    func stop() { locked { stopped = true } }

    private func publish(_ event: String, _ data: JSONValue) {
        sequence += 1
        events.append((sequence, "event: \(event)\ndata: \(data.serialized())\n\n"))
        if events.count > Self.eventsKept { events.removeFirst(events.count - Self.eventsKept) }
        condition.broadcast()
    }

    private func locked<T>(_ body: () -> T) -> T {
        condition.lock()
        defer { condition.unlock() }
        return body()
    }

    // MARK: Reading

    /// `GET /api/reports`: newest first, filtered, one page.
    func list(_ filter: Filter, limit: Int, offset: Int) -> JSONValue {
        let (page, total) = locked { () -> ([Entry], Int) in
            // Unfiltered, the page is a slice: its cost does not grow with the reports kept.
            guard !filter.isEmpty else { return (Array(entries.reversed().dropFirst(offset).prefix(limit)), entries.count) }
            let matching = entries.reversed().filter(filter.matches)
            return (Array(matching.dropFirst(offset).prefix(limit)), matching.count)
        }
        return .object([
            ("reports", .array(page.map(Self.listJSON))), ("total", .int(total)), ("offset", .int(offset)), ("limit", .int(limit)),
        ])
    }

    /// The report with this uuid, in any case.
    func entry(_ uuid: String) -> Entry? {
        let wanted = uuid.lowercased()
        return locked { entries.first { $0.uuid.lowercased() == wanted } }
    }

    /// `GET /api/requests`, oldest first; those about one report when `report` is given.
    func requestList(report: String? = nil) -> JSONValue {
        let list = locked { requests.filter { report == nil || $0.report == report } }
        return .object([("requests", .array(list.map(Self.requestJSON)))])
    }

    /// Events after `sequence` (waiting until `deadline` for one), and the last one's number;
    /// nil once the inbox stopped.
    func events(after sequence: Int, until deadline: HostInstant) -> (texts: [String], last: Int)? {
        locked {
            while !stopped, self.sequence <= sequence, SystemClock().now() < deadline {
                condition.wait(untilMonotonic: deadline.nanoseconds)
            }
            guard !stopped else { return nil }
            return (events.filter { $0.sequence > sequence }.map(\.text), self.sequence)
        }
    }

    var lastEvent: Int { locked { sequence } }

    // MARK: JSON

    static func listJSON(_ entry: Entry) -> JSONValue {
        .object([
            ("id", .string(entry.uuid)), ("type", .string(entry.type)), ("summary", .string(entry.summary)),
            ("received_at", .string(ReportDocument.timestamp(entry.receivedAt))), ("attachments", .int(entry.attachmentCount)),
            ("attachment_names", .array(entry.attachments.map(JSONValue.string))), ("labels", .array(entry.labels.map(JSONValue.string))),
            ("arrivals", .int(entry.arrivals)), ("changed", .bool(entry.changed)),
        ])
    }

    static func requestJSON(_ request: Request) -> JSONValue {
        var fields: [(String, JSONValue)] = [
            ("at", .string(ReportDocument.timestamp(request.at))), ("method", .string(request.method)),
            ("path", .string(maskedPath(request.path))), ("status", .int(request.status)), ("chaos", .bool(request.chaos)),
        ]
        if let answer = request.answer { fields.append(("answer", .string(answer))) }
        if let report = request.report { fields.append(("report", .string(report))) }
        return .object(fields)
    }

    /// A request target with its token (and every other query value) masked, as the host
    /// masks URLs in its logs.
    static func maskedPath(_ target: String) -> String {
        let origin = "http://127.0.0.1"
        let masked = SubmissionURL.redact(origin + (target.hasPrefix("/") ? target : "/" + target))
        return masked.hasPrefix(origin) ? String(masked.dropFirst(origin.count)) : "<unreadable request target>"
    }

    /// The list's entry for a report in Backtrace's submission format, whichever client sent
    /// it: its text cut to `Kept`.
    static func entry(_ report: JSONValue, uuid: String, attachments: [String], at date: Date) -> Entry {
        var attributes: [String: String] = [:]
        var attributeText = 0
        for (key, value) in report["attributes"]?.objectValue ?? [] {
            let text: String
            switch value {
            case .string(let string): text = string
            case .null, .array, .object: continue
            default: text = value.serialized()
            }
            let kept = ReportContent.bounded(text, limit: Kept.attributeValue).text
            attributeText += key.utf8.count + kept.utf8.count
            guard attributes.count < Kept.attributes, attributeText <= Kept.attributeText else { break }
            attributes[key] = kept
        }
        let type = report["attributes"]?["error.type"]?.stringValue.map { ReportContent.bounded($0, limit: Kept.attributeValue).text }
            ?? (report["threads"] == nil ? "Report" : "Crash")
        let description = report["annotations"]?["Description"]?.stringValue ?? ""
        let summary = report["attributes"]?["error.message"]?.stringValue ?? ""
        let labels = report["classifiers"]?.arrayValue?.compactMap(\.stringValue) ?? []
        let files = attachments.filter { $0 != BacktraceReport.breadcrumbsAttachment }
        var entry = Entry(
            uuid: uuid, type: type, summary: ReportContent.bounded(summary, limit: Kept.summary).text, receivedAt: date,
            attachments: leading(files, bytes: Kept.names), attachmentCount: files.count, attributes: attributes,
            labels: leading(labels, bytes: Kept.labels), description: ReportContent.bounded(description, limit: Kept.description).text)
        entry.hasBreadcrumbs = files.count != attachments.count
        entry.changed = report["annotations"]?["reporthost.changes"]?.arrayValue?.isEmpty == false
        return entry
    }

    /// The first of `items` whose bytes together stay within `bytes`.
    static func leading(_ items: [String], bytes: Int) -> [String] {
        var total = 0
        return Array(items.prefix { item in
            total += item.utf8.count
            return total <= bytes
        })
    }

    /// The reports stored in `folder` before this run: `<uuid>.json` files, oldest first.
    static func load(_ folder: URL, system: SystemCalls) -> [Entry] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        var found: [Entry] = []
        for name in names where name.hasSuffix(".json") {
            let uuid = String(name.dropLast(".json".count))
            let path = folder.appendingPathComponent(name).path
            guard UUID(uuidString: uuid) != nil, case .success(let data) = BoundedFile.read(path, limit: reportMaxBytes, system: system),
                let report = try? JSONValue.parse(data)
            else { continue }
            let attachments = (try? FileManager.default.contentsOfDirectory(atPath: folder.appendingPathComponent(uuid).path)) ?? []
            let written = system.stat(path).map {
                Date(timeIntervalSince1970: TimeInterval($0.st_mtim.tv_sec) + TimeInterval($0.st_mtim.tv_nsec) / 1e9)
            } ?? system.now()
            found.append(entry(report, uuid: uuid, attachments: attachments.filter { !$0.hasPrefix(".") }.sorted(), at: written))
        }
        // Files written in the same instant in the order of their uuids: never the clock alone.
        return found.sorted { ($0.receivedAt, $0.uuid) < ($1.receivedAt, $1.uuid) }
    }
}
