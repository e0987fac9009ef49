import FoundationEssentials
import Glibc
import Host
import HostSupport

// Request routing: reading each request off a connection and answering it (the inbox,
// metric events, or a submission by the script and chaos).
extension LocalReceiver {
    func serve(_ client: Int32) {
        var reader = SocketReader(fd: client, limits: limits)
        var timeout = timeval(tv_sec: limits.idleTimeoutMs / 1000, tv_usec: Int((limits.idleTimeoutMs % 1000) * 1000))
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        while true {
            reader.deadline = SystemClock().now().advanced(byMilliseconds: limits.requestDeadlineMs)
            let head: String
            guard setWaitingForHead(client, true) else { return }
            let read = reader.readHead()
            guard setWaitingForHead(client, false) else { return }
            switch read {
            case .success(let text): head = text
            case .failure(.closed): return
            case .failure(let error):
                reader.answer(error.status, error.message)
                return
            }
            let lines = head.components(separatedBy: "\r\n")
            let requestLine = lines.first?.split(separator: " ") ?? []
            guard requestLine.count == 3, requestLine[2].hasPrefix("HTTP/1.") else {
                reader.answer(400, "malformed request line")
                return
            }
            var headers: [String: String] = [:]
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else {
                    reader.answer(400, "malformed header line")
                    return
                }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmed
            }
            if headers["expect"]?.lowercased() == "100-continue" { reader.write("HTTP/1.1 100 Continue\r\n\r\n") }
            let body: Result<Data, SocketReader.Failure>
            if headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
                body = reader.readChunked()
            } else if let text = headers["content-length"] ?? Optional("0"), let length = UInt(text), length <= UInt(limits.maxBodyBytes) {
                body = reader.read(count: Int(length))
            } else {
                reader.answer(headers["content-length"].flatMap { UInt($0) } == nil ? 400 : 413, "bad Content-Length")
                return
            }
            guard case .success(let sent) = body else {
                if case .failure(let error) = body, error != .closed { reader.answer(error.status, error.message) }
                return
            }
            let request = HTTPRequest(method: String(requestLine[0]), target: String(requestLine[1]), headers: headers)
            if !isInboxRequest(request), let origin = headers["origin"], !Self.isLoopbackOrigin(origin) {
                // SPEC S-4: a page of another site may not store anything here (it can post
                // across origins without reading the answer).
                inbox?.record(Inbox.Request(
                    at: system.now(), method: request.method, path: request.target, status: 403, chaos: false, report: nil))
                reader.answer(403, "refused: a page of another site (Origin \(origin.prefix(200))) may not submit here")
                return
            }
            let keepOpen: Bool
            if isInboxRequest(request) {
                keepOpen = serveInbox(request, reader: &reader)
            } else {
                // Sentry SDKs compress what they send (SPEC S-4): inflated only for what is kept.
                let data: Data
                switch SentryIntake.inflate(sent, encoding: headers["content-encoding"], limit: limits.maxBodyBytes) {
                case .success(let inflated): data = inflated
                case .failure(let refusal):
                    reader.answer(refusal.status, refusal.message)
                    return
                }
                if let kind = Self.metricKind(request) {
                    keepOpen = takeMetricEvent(kind, body: data, request: request, reader: &reader)
                } else {
                    keepOpen = submit(request, body: data, client: client, reader: &reader)
                }
            }
            if !keepOpen || headers["connection"]?.lowercased() == "close" { return }
        }
    }

    /// Whether an `Origin` header names a page served from loopback: http or https, any port,
    /// of `localhost`, a 127.0.0.0/8 address or `[::1]`. `null` (a file, a sandboxed frame)
    /// names no such page.
    static func isLoopbackOrigin(_ origin: String) -> Bool {
        guard let url = URL(string: origin), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host
        else { return false }
        return SubmissionURL.isLoopback(host)
    }

    /// `unique-events` or `summed-events` for a POST to Backtrace's events endpoints
    /// (`/api/<kind>/submit`), else nil.
    static func metricKind(_ request: HTTPRequest) -> String? {
        guard request.method == "POST" else { return nil }
        let path = request.target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? ""
        return ["unique-events", "summed-events"].first { path == "/api/\($0)/submit" }
    }

    /// Keeps a metric event (crash-free metrics, SPEC B-2): 200 for a JSON object, 400 else.
    /// Tests keep them in memory; the command line appends each to `metric-events.jsonl` in
    /// its folder and keeps none, so a long run does not grow.
    func takeMetricEvent(_ kind: String, body: Data, request: HTTPRequest, reader: inout SocketReader) -> Bool {
        var log = Inbox.Request(at: system.now(), method: request.method, path: request.target, status: 400, chaos: false, report: nil)
        defer { inbox?.record(log) }
        guard let event = try? JSONValue.parse(body), event.objectValue != nil else {
            reader.answer(400, "not a JSON object")
            return true
        }
        if keepInMemory {
            state.withLock { $0.metricEvents.append(MetricEvent(kind: kind, body: event)) }
        } else if case .failure(let error) = appendMetricEvent(kind, event) {
            // Never 200 for what was not kept: the client sends it again.
            log.status = 500
            reader.answer(500, "cannot store the event: \(error.message)")
            return true
        }
        log.status = 200
        reader.answer(200, "ok")
        return true
    }

    /// Answers a submission: a chaos fault drawn for it, else the next scripted answer (a
    /// status stores the report first). Returns whether the connection stays open.
    func submit(_ request: HTTPRequest, body: Data, client: Int32, reader: inout SocketReader) -> Bool {
        let fault = state.withLock { $0.chaos?.draw() }
        let submission: Result<Submission?, StoreFailure> = SentryIntake.isSentry(request.path)
            ? SentryIntake.submission(body, path: request.path)
            : Self.parseSubmission(body, contentType: request.headers["content-type"] ?? "").map { $0 }
        var log = Inbox.Request(
            at: system.now(), method: request.method, path: request.target, status: 0, chaos: fault != nil,
            report: try? submission.get()?.uuid)
        defer { inbox?.record(log) }
        if fault == .slow {
            var wait = timespec(tv_sec: Chaos.slowMs / 1_000, tv_nsec: (Chaos.slowMs % 1_000) * 1_000_000)
            var left = timespec()
            while nanosleep(&wait, &left) != 0 && errno == EINTR { wait = left }
        }
        let response: Response =
            switch fault {
            case .status(let code): .status(code)
            case .reset: .reset
            case .slow, nil: nextResponse()
            }
        switch response {
        case .reset:
            log.answer = "reset"
            var linger = linger(l_onoff: 1, l_linger: 0)
            setsockopt(client, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
            return false
        case .stall:
            log.answer = "stall"
            // Hold the connection without answering until the client gives up (or the
            // idle timeout closes it).
            while case .success = reader.readHead() {}
            return false
        case .status(let code):
            let answer: (status: Int, message: String, uuid: String)
            if case .status = fault {
                answer = (code, "chaos: nothing was stored", "")
            } else {
                answer = self.answer(storing: submission, code: code, target: request.target)
            }
            log.status = answer.status
            let extra = answer.status == 429 || answer.status == 503 ? "Retry-After: 1\r\n" : ""
            reader.answer(answer.status, answer.message, rxid: answer.uuid, extra: extra)
            return true
        }
    }

    /// The answer to a submission the script answers `code`, once it is stored (or not).
    func answer(
        storing submission: Result<Submission?, StoreFailure>, code: Int, target: String
    ) -> (status: Int, message: String, uuid: String) {
        let stored: Result<Received, StoreFailure>
        switch submission {
        // An envelope of sessions only holds no report: nothing is stored.
        case .success(nil): return (code, "ok: no report in it", "")
        case .success(let found?): stored = store(found, target: target, answer: .status(code))
        case .failure(let failure): stored = .failure(failure)
        }
        return switch stored {
        case .success(let stored): (code, "ok", stored.uuid)
        case .failure(.badSubmission): (code < 300 ? 400 : code, "bad submission", "")
        // Never 200 for what was not kept: the client must send it again.
        case .failure(.storage(let reason)): (500, "cannot store the submission: \(reason)", "")
        }
    }

    func nextResponse() -> Response {
        state.withLock { state in
            state.script.count > 1 ? state.script.removeFirst() : state.script[0]
        }
    }
}
