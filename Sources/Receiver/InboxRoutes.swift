import FoundationEssentials
import Glibc
import Host
import HostDelivery
import HostSupport

/// The inbox's pages and JSON API, beside the submission endpoints on the receiver's port
/// (SPEC T-2). Only loopback names are answered (a page elsewhere that rebinds its DNS name
/// to 127.0.0.1 reads nothing), and every page forbids inline scripts and event handlers.
extension LocalReceiver {
    /// One request the receiver read.
    struct HTTPRequest {
        var method: String
        /// As sent: path and query.
        var target: String
        var headers: [String: String]

        var path: String { String(target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]) }

        /// The query's values, percent-decoded (`+` a space, as forms send it).
        var query: [String: String] {
            guard let text = target.split(separator: "?", maxSplits: 1).dropFirst().first else { return [:] }
            var values: [String: String] = [:]
            for pair in text.split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let decode = { (part: Substring) in PercentEncoding.decoded(part.replacing("+", with: " ")) }
                values[decode(parts[0])] = parts.count > 1 ? decode(parts[1]) : ""
            }
            return values
        }
    }

    /// Whether `request` is for the inbox (anything but a submission).
    func isInboxRequest(_ request: HTTPRequest) -> Bool {
        inbox != nil && request.method != "POST"
    }

    /// What every inbox answer carries: no inline script, style or handler runs, nothing is
    /// framed, no type is guessed.
    static let pageHeaders: [(String, String)] = [
        ("Content-Security-Policy",
         "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"),
        ("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer"), ("Cache-Control", "no-store"),
    ]

    /// Answers an inbox request; false when the connection is to be closed.
    func serveInbox(_ request: HTTPRequest, reader: inout SocketReader) -> Bool {
        guard let inbox else { return false }
        guard let host = request.headers["host"], Self.isLoopbackHost(host, port: port) else {
            return answerJSON(&reader, 403, .object([("error", .string("the inbox answers only 127.0.0.1, localhost and [::1] on port \(port)"))]))
        }
        let segments = request.path.split(separator: "/", omittingEmptySubsequences: true).map { PercentEncoding.decoded($0) }
        switch (request.method, segments.first) {
        case ("GET", nil), ("GET", "requests"):
            return answerPage(&reader, InboxPages.shell)
        case ("GET", "reports") where segments.count == 2 && Self.isUUID(segments[1]):
            return answerPage(&reader, InboxPages.shell)
        case ("GET", "static") where segments.count == 2:
            guard let asset = InboxPages.assets[segments[1]] else { return notFound(&reader) }
            return reader.respond(200, type: asset.type, headers: Self.pageHeaders, body: Data(asset.text.utf8))
        case (_, "api"):
            return serveAPI(request, Array(segments.dropFirst()), inbox: inbox, reader: &reader)
        case (let method, _) where method != "GET":
            return answerJSON(&reader, 405, .object([("error", .string("\(method) \(request.path): the inbox takes GET (and DELETE /api/reports)"))]))
        default:
            return notFound(&reader)
        }
    }

    private func serveAPI(_ request: HTTPRequest, _ path: [String], inbox: Inbox, reader: inout SocketReader) -> Bool {
        switch (request.method, path.count, path.first) {
        case ("GET", 1, "reports"):
            let query = request.query
            let limit = min(max(Int(query["limit"] ?? "") ?? 50, 1), 1_000)
            let offset = max(Int(query["offset"] ?? "") ?? 0, 0)
            let filter = Inbox.Filter(type: query["type"], attribute: query["attribute"], label: query["label"], text: query["q"])
            return answerJSON(&reader, 200, inbox.list(filter, limit: limit, offset: offset))
        case ("DELETE", 1, "reports"):
            inbox.removeAll()
            return reader.respond(204, type: "", headers: Self.pageHeaders, body: Data())
        case ("GET", 2, "reports"), ("GET", 3, "reports"), ("GET", 4, "reports"):
            return serveReport(path, inbox: inbox, reader: &reader)
        case ("GET", 1, "requests"):
            return answerJSON(&reader, 200, inbox.requestList())
        case ("GET", 1, "events"):
            streamEvents(inbox, reader: reader)
            return false
        case (let method, _, _) where method != "GET":
            return answerJSON(&reader, 405, .object([("error", .string("\(method) \(request.path) is not part of the inbox's API"))]))
        default:
            return notFound(&reader)
        }
    }

    /// `reports/<uuid>` (the JSON as received), `reports/<uuid>/view` (what the page shows
    /// beside it), `reports/<uuid>/attachments/<name>` (the bytes).
    private func serveReport(_ path: [String], inbox: Inbox, reader: inout SocketReader) -> Bool {
        guard Self.isUUID(path[1]), let entry = inbox.entry(path[1]) else { return notFound(&reader) }
        let uuid = entry.uuid
        if path.count == 4 {
            // The entry lists the first names only; past them, any stored file but a partial one.
            let listed = entry.attachments.contains(path[3]) || (entry.attachmentCount > entry.attachments.count && !path[3].hasPrefix("."))
                || (entry.hasBreadcrumbs && path[3] == BacktraceReport.breadcrumbsAttachment)
            guard path[2] == "attachments", Self.isPlainFileName(path[3]), listed else { return notFound(&reader) }
            guard case .success(let data) = readStored(folder.appendingPathComponent(uuid).appendingPathComponent(path[3])) else {
                return notFound(&reader)
            }
            let name = path[3].filter { $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }
            return reader.respond(
                200, type: "application/octet-stream",
                headers: Self.pageHeaders + [("Content-Disposition", "attachment; filename=\"\(name.isEmpty ? "attachment" : name)\"")],
                body: data)
        }
        guard case .success(let data) = readStored(folder.appendingPathComponent("\(uuid).json")) else { return notFound(&reader) }
        if path.count == 2 { return reader.respond(200, type: "application/json", headers: Self.pageHeaders, body: data) }
        guard path[2] == "view", let report = try? JSONValue.parse(data) else { return notFound(&reader) }
        var view: [(String, JSONValue)] = [("entry", Inbox.listJSON(entry)), ("answers", inbox.requestList(report: uuid)["requests"] ?? .array([]))]
        let trail = (report["annotations"]?["reporthost.changes"]?.arrayValue ?? []).compactMap(TrailEntry.init(json:))
        view.append(("changes_text", .array(trail.map { .string($0.text) })))
        if entry.hasBreadcrumbs,
            case .success(let crumbs) = readStored(folder.appendingPathComponent(uuid).appendingPathComponent(BacktraceReport.breadcrumbsAttachment)),
            let list = try? JSONValue.parse(crumbs).arrayValue
        {
            view.append(("breadcrumb_lines", .array(list.map { .string(Self.breadcrumbLine($0)) })))
        }
        if let crash = CrashText.payload(fromSubmission: report) {
            // A crash's signal line and stacks; another report's stacks alone (a Python client
            // sends its threads with every report).
            let lines = CrashText.lines(crash)
            view.append(report["annotations"]?["Crash"] == nil
                ? ("thread_lines", .array(lines.dropFirst().map(JSONValue.string)))
                : ("crash_lines", .array(lines.map(JSONValue.string))))
        }
        return answerJSON(&reader, 200, .object(view))
    }

    /// Server-sent events: `report`, `request` and `cleared`, each with its JSON, until the
    /// client goes or the receiver stops; a comment every 15 s keeps proxies from closing it.
    /// Streams have a quota of their own (`limits.maxStreams`, below the connection limit): a
    /// stream past it closes the oldest stream, so streams that reconnect at once can never hold
    /// a submitter out. A stream also counts as idle: at the connection limit it is the first
    /// closed for a new client (a browser's EventSource reconnects), and a client that left is
    /// noticed within a second, so reloading the page never fills the receiver with streams
    /// nobody reads.
    private func streamEvents(_ inbox: Inbox, reader: SocketReader) {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\r\n"
        guard admitStream(reader.fd), reader.write(head + "retry: 1000\n\n") else { return }
        var seen = inbox.lastEvent
        var lastWrite = SystemClock().now()
        while !Self.peerClosed(reader.fd) {
            guard let (texts, last) = inbox.events(after: seen, until: SystemClock().now().advanced(byMilliseconds: 1_000)) else { return }
            seen = last
            let now = SystemClock().now()
            if texts.isEmpty && now.milliseconds(since: lastWrite) < 15_000 { continue }
            guard reader.write(texts.isEmpty ? ": keep-alive\n\n" : texts.joined()) else { return }
            lastWrite = now
        }
    }

    /// Whether the client closed its end (or the connection was shed).
    static func peerClosed(_ fd: Int32) -> Bool {
        var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&ready, 1, 0) > 0 else { return false }
        if ready.revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0 { return true }
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) <= 0
    }

    private func readStored(_ url: URL) -> Result<Data, BoundedFile.Failure> {
        BoundedFile.read(url.path, limit: Inbox.reportMaxBytes, system: system)
    }

    private func answerPage(_ reader: inout SocketReader, _ html: String) -> Bool {
        reader.respond(200, type: "text/html; charset=utf-8", headers: Self.pageHeaders, body: Data(html.utf8))
    }

    private func answerJSON(_ reader: inout SocketReader, _ status: Int, _ json: JSONValue) -> Bool {
        reader.respond(status, type: "application/json", headers: Self.pageHeaders, body: Data(json.serialized().utf8))
    }

    private func notFound(_ reader: inout SocketReader) -> Bool {
        answerJSON(&reader, 404, .object([("error", .string("not found"))]))
    }

    static func isUUID(_ text: String) -> Bool { text.utf8.count == 36 && UUID(uuidString: text) != nil }

    /// A `Host` header naming loopback on the receiver's port.
    static func isLoopbackHost(_ header: String, port: UInt16) -> Bool {
        let host: Substring
        if header.hasPrefix("[") {
            guard let close = header.firstIndex(of: "]") else { return false }
            host = header[...close]
            guard header[header.index(after: close)...] == ":\(port)" else { return false }
        } else {
            let parts = header.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, parts[1] == "\(port)" else { return false }
            host = parts[0]
        }
        return SubmissionURL.isLoopback(String(host))
    }

    /// One of Backtrace's breadcrumbs as `show` prints one: time, level, [category] message.
    static func breadcrumbLine(_ crumb: JSONValue) -> String {
        let time = crumb["timestamp"]?.intValue.map { Breadcrumb.timestamp(Date(timeIntervalSince1970: Double($0) / 1000)) } ?? "?"
        let level = crumb["level"]?.stringValue.map { $0 == "warning" ? "warn" : $0 } ?? "info"
        let category = crumb["attributes"]?["category"]?.stringValue ?? crumb["type"]?.stringValue ?? ""
        let message = crumb["message"]?.stringValue ?? ""
        return "\(time) \(level.padded(toLength: 5)) [\(category)] \(message)"
    }
}
