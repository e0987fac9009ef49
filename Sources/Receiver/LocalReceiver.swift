import FoundationEssentials
import Glibc
import Host

/// A local submission endpoint speaking the Backtrace submission API (`reporthost receive`):
/// multipart/form-data with an `upload_file` part and `attachment_<name>` parts. Binds to
/// loopback, stores each report's JSON and attachments under its folder, and answers from a
/// script of responses for fault tests: HTTP codes, `reset` (close with a TCP reset) or
/// `stall` (never answer); the last entry repeats.
///
/// Hardened against its clients: a malformed request is answered 400 and its connection
/// closed (the receiver goes on), heads, chunk lines and bodies are bounded, silent
/// connections time out, at most `limits.maxConnections` are served at once, and a
/// submission that could not be stored is answered 500, never 200. At the limit, a new
/// client takes the place of the connection that has waited longest for a request head (an
/// idle keep-alive connection, or a client sending its head slowly), which is closed; when
/// every connection is busy with a body or an answer, the new client is answered 503 with
/// `Retry-After`, never left unanswered.
///
/// # Thread safety
/// One thread accepts; one thread serves each connection; shared state is behind `Locked`.
package final class LocalReceiver: Sendable {
    package enum Response: Sendable, Equatable {
        case status(Int)
        case reset
        case stall
    }

    /// One stored submission.
    package struct Received: Sendable {
        package var uuid: String
        package var report: JSONValue
        package var attachments: [String: Data]
        package var query: String
        package var answer: Response
    }

    /// One metric event taken at `/api/<kind>/submit`.
    package struct MetricEvent: Sendable {
        package var kind: String
        package var body: JSONValue
    }

    package let port: UInt16
    package let folder: URL
    private let listener: Int32
    let state: Locked<State>

    struct State {
        var script: [Response]
        var chaos: Chaos?
        var received: [Received] = []
        var metricEvents: [MetricEvent] = []
        var stopped = false
        /// Connections served now, by descriptor (removed before the descriptor is closed).
        var connections: [Int32: Connection] = [:]
        /// Connections accepted so far, and the most served at once.
        var accepted = 0
        var mostAtOnce = 0
    }

    struct Connection {
        /// Since when it waits for a request head; nil while it reads a body or answers.
        var waitingForHead: HostInstant?
        /// Closed to make room for a new client: no longer counted.
        var shed = false
    }
    /// Limits that keep one client from stopping or exhausting the receiver.
    package let limits: Limits

    /// What one client may use: each request is read within these bounds, or answered with
    /// an error and its connection closed.
    package struct Limits: Sendable {
        /// Connections served at once; past it, the one waiting longest for a request head
        /// (for at least `shedIdleAfterMs`) is closed for the new client, or the new client is
        /// answered 503 with Retry-After.
        package var maxConnections = 32
        /// How long a connection must have waited for a request head (idle between requests,
        /// or trickling its head) before a new client may take its place: a connection whose
        /// request is already on its way is never shed for a burst.
        package var shedIdleAfterMs = 1_000
        /// How long a refused (503) connection is read and discarded after its answer, so
        /// that closing it never resets the client before it read the answer.
        package var refusalDrainMs = 2_000
        /// A request head (request line and headers).
        package var maxHeadBytes = 64 * 1024
        /// A request body, with or without chunked encoding.
        package var maxBodyBytes = 64 << 20
        /// How long a connection may stay silent (between bytes) before it is closed.
        package var idleTimeoutMs = 30_000
        /// How long one request may take to arrive whole: a client sending a byte just
        /// inside the idle timeout cannot hold a connection for ever.
        package var requestDeadlineMs = 120_000

        package init() {}
    }
    let onReceive: @Sendable (Received) -> Void
    let keepInMemory: Bool
    /// The inbox's reports and requests (`receive --inbox`); nil: submissions only.
    let inbox: Inbox?

    /// A `--respond` word that is not an HTTP status, `reset` or `stall`.
    package struct ScriptError: Error, CustomStringConvertible {
        package let description: String
    }

    /// Parses `--respond` text: `503,429,reset,stall,200`.
    package static func parseScript(_ text: String) throws(ScriptError) -> [Response] {
        try text.split(separator: ",").map { (item) throws(ScriptError) -> Response in
            let word = item.trimmed.lowercased()
            if word == "reset" { return .reset }
            if word == "stall" { return .stall }
            guard let code = Int(word), (100...599).contains(code) else {
                throw ScriptError(description: "--respond '\(text)': '\(word)' is not an HTTP status, reset or stall")
            }
            return .status(code)
        }
    }

    /// Listens on 127.0.0.1:`port` (0 picks a free port) and stores into `folder`.
    /// - Parameters:
    ///   - keepInMemory: keep every submission in `received` (tests); the command line keeps
    ///     only the files, so a long run does not grow.
    ///   - inbox: serve the inbox's pages and API beside the submission endpoints (SPEC T-2).
    ///   - chaos: faults to answer submissions with at random.
    package init(
        port: UInt16 = 0, folder: URL, script: [Response] = [.status(200)], keepInMemory: Bool = true, limits: Limits = Limits(),
        inbox: Bool = false, chaos: Chaos? = nil, onReceive: @escaping @Sendable (Received) -> Void = { _ in }
    ) throws(HostError) {
        // Owner-only (0700), as everything the host creates: submissions carry personal data.
        _ = Paths.makeFolder(folder.path)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw .runtime("receive: cannot create a socket (\(String(cString: strerror(errno))))") }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        // A burst of clients waits in the kernel's queue, not refused by it (SOMAXCONN).
        guard bound == 0, listen(fd, 4_096) == 0 else {
            close(fd)
            throw .runtime("receive: cannot listen on 127.0.0.1:\(port) (\(String(cString: strerror(errno))))")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        self.port = UInt16(bigEndian: actual.sin_port)
        self.folder = folder
        self.listener = fd
        self.state = Locked(State(script: script.isEmpty ? [.status(200)] : script, chaos: chaos))
        self.inbox = inbox ? Inbox(folder: folder) : nil
        self.limits = limits
        self.onReceive = onReceive
        self.keepInMemory = keepInMemory
        guard startThread({ [self] in acceptLoop() }) else {
            close(fd)
            throw .runtime("receive: the system refused a thread to accept connections")
        }
    }

    package var url: String { "http://127.0.0.1:\(port)/post?format=json&token=local-token" }
    /// The inbox's page (with `inbox`).
    package var inboxURL: String { "http://127.0.0.1:\(port)/" }
    package var received: [Received] { state.withLock { $0.received } }
    /// The metric events taken, in order.
    package var metricEvents: [MetricEvent] { state.withLock { $0.metricEvents } }

    /// Stops accepting (open connections finish their current request). The accept thread
    /// closes the listening socket itself when it wakes, so its descriptor number cannot be
    /// reused by another socket while that thread may still call `accept` on it.
    package func stop() {
        state.withLock { $0.stopped = true }
        inbox?.stop()
        shutdown(listener, Int32(SHUT_RDWR))
    }

    private func acceptLoop() {
        defer { close(listener) }
        while true {
            let client = accept(listener, nil, nil)
            let failure = errno
            if state.withLock({ $0.stopped }) {
                if client >= 0 { close(client) }
                return
            }
            if client < 0 {
                // Out of descriptors or memory is transient: wait and go on accepting.
                if failure == EMFILE || failure == ENFILE || failure == ENOBUFS || failure == ENOMEM { usleep(100_000) }
                if failure == EBADF || failure == EINVAL { return }  // the listener is gone
                continue
            }
            guard admit(client) else {
                refuse(client, "too many connections")
                continue
            }
            let started = startThread { [self] in
                serve(client)
                // Forgotten before it is closed: `admit` never shuts down a reused descriptor.
                state.withLock { $0.connections[client] = nil }
                close(client)
            }
            if !started {
                state.withLock { $0.connections[client] = nil }
                refuse(client, "no thread to serve the connection")
            }
        }
    }

    /// Answers `client` 503 with Retry-After, then reads and discards what it sends for up to
    /// `refusalDrainMs` before closing (on a thread of its own): closed with its request
    /// unread, the kernel would reset the connection, and the client might never read the
    /// answer. Nothing of it is stored.
    private func refuse(_ client: Int32, _ why: String) {
        let limits = limits
        let answer: @Sendable () -> Void = { SocketReader(fd: client, limits: limits).answer(503, why, extra: "Retry-After: 1\r\nConnection: close\r\n") }
        let started = startThread {
            answer()
            shutdown(client, Int32(SHUT_WR))
            var buffer = [UInt8](repeating: 0, count: 16 * 1024)
            let deadline = SystemClock().now().advanced(byMilliseconds: limits.refusalDrainMs)
            while true {
                let left = deadline.milliseconds(since: SystemClock().now())
                var ready = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
                guard left > 0, poll(&ready, 1, Int32(clamping: left)) > 0 else { break }
                guard buffer.withUnsafeMutableBytes({ recv(client, $0.baseAddress, $0.count, 0) }) > 0 else { break }
            }
            close(client)
        }
        if !started {
            answer()
            close(client)
        }
    }

    /// Counts `client` in, making room when the limit is reached by shedding the connection
    /// that has waited longest for a request head; false when every connection is busy.
    private func admit(_ client: Int32) -> Bool {
        let now = SystemClock().now()
        return state.withLock { state in
            let live = state.connections.filter { !$0.value.shed }
            if live.count >= limits.maxConnections {
                let waiting = live.compactMap { entry in
                    entry.value.waitingForHead.flatMap { now.milliseconds(since: $0) >= limits.shedIdleAfterMs ? (fd: entry.key, since: $0) : nil }
                }
                guard let oldest = waiting.min(by: { $0.since < $1.since }) else { return false }
                state.connections[oldest.fd]?.shed = true
                // Wakes its thread's read, which ends the connection.
                shutdown(oldest.fd, Int32(SHUT_RDWR))
            }
            state.connections[client] = Connection(waitingForHead: now)
            state.accepted += 1
            state.mostAtOnce = max(state.mostAtOnce, state.connections.values.filter { !$0.shed }.count)
            return true
        }
    }

    /// Notes whether `client` waits for a request head (it may then be shed). A new connection
    /// waits from the moment it was accepted, not from when its thread first runs: threads
    /// start in any order, and the one idle longest must be the one shed. Returns false when
    /// it was shed meanwhile: a head read just as it was shed is not served (nothing stored
    /// that could not be answered; the client sends it again).
    @discardableResult
    private func setWaitingForHead(_ client: Int32, _ waiting: Bool) -> Bool {
        let now = SystemClock().now()
        return state.withLock { state in
            guard let connection = state.connections[client], !connection.shed else { return false }
            state.connections[client]?.waitingForHead = waiting ? (connection.waitingForHead ?? now) : nil
            return true
        }
    }

    /// Marks a connection that only waits (an event stream) as idle since now: at the limit,
    /// it may be closed for a new client. False when it was shed already.
    func markIdle(_ client: Int32) -> Bool { setWaitingForHead(client, true) }

    /// Connections accepted so far, and the most served at once (a client's reuse of its
    /// connections, and how many requests it has in flight).
    package var connectionCounts: (accepted: Int, mostAtOnce: Int) { state.withLock { ($0.accepted, $0.mostAtOnce) } }

    /// Connections being served now.
    package var openConnections: Int { state.withLock { $0.connections.values.filter { !$0.shed }.count } }

    private func nextResponse() -> Response {
        state.withLock { state in
            state.script.count > 1 ? state.script.removeFirst() : state.script[0]
        }
    }

    // MARK: HTTP

    private func serve(_ client: Int32) {
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
            guard case .success(let data) = body else {
                if case .failure(let error) = body, error != .closed { reader.answer(error.status, error.message) }
                return
            }
            let request = HTTPRequest(method: String(requestLine[0]), target: String(requestLine[1]), headers: headers)
            let keepOpen: Bool
            if isInboxRequest(request) {
                keepOpen = serveInbox(request, reader: &reader)
            } else if let kind = Self.metricKind(request) {
                keepOpen = takeMetricEvent(kind, body: data, request: request, reader: &reader)
            } else {
                keepOpen = submit(request, body: data, client: client, reader: &reader)
            }
            if !keepOpen || headers["connection"]?.lowercased() == "close" { return }
        }
    }

    /// `unique-events` or `summed-events` for a POST to Backtrace's events endpoints
    /// (`/api/<kind>/submit`), else nil.
    static func metricKind(_ request: HTTPRequest) -> String? {
        guard request.method == "POST" else { return nil }
        let path = request.target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? ""
        return ["unique-events", "summed-events"].first { path == "/api/\($0)/submit" }
    }

    /// Keeps a metric event (crash-free metrics, SPEC B-2): 200 for a JSON object, 400 else.
    private func takeMetricEvent(_ kind: String, body: Data, request: HTTPRequest, reader: inout SocketReader) -> Bool {
        var log = Inbox.Request(at: Date(), method: request.method, path: request.target, status: 400, chaos: false, report: nil)
        defer { inbox?.record(log) }
        guard let event = try? JSONValue.parse(body), event.objectValue != nil else {
            reader.answer(400, "not a JSON object")
            return true
        }
        state.withLock { $0.metricEvents.append(MetricEvent(kind: kind, body: event)) }
        log.status = 200
        reader.answer(200, "ok")
        return true
    }

    /// Answers a submission: a chaos fault drawn for it, else the next scripted answer (a
    /// status stores the report first). Returns whether the connection stays open.
    private func submit(_ request: HTTPRequest, body: Data, client: Int32, reader: inout SocketReader) -> Bool {
        let fault = state.withLock { $0.chaos?.draw() }
        let submission = Self.parseSubmission(body, contentType: request.headers["content-type"] ?? "")
        var log = Inbox.Request(
            at: Date(), method: request.method, path: request.target, status: 0, chaos: fault != nil,
            report: try? submission.get().uuid)
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
    private func answer(
        storing submission: Result<Submission, StoreFailure>, code: Int, target: String
    ) -> (status: Int, message: String, uuid: String) {
        switch submission.flatMap({ store($0, target: target, answer: .status(code)) }) {
        case .success(let stored): (code, "ok", stored.uuid)
        case .failure(.badSubmission): (code < 300 ? 400 : code, "bad submission", "")
        // Never 200 for what was not kept: the client must send it again.
        case .failure(.storage(let reason)): (500, "cannot store the submission: \(reason)", "")
        }
    }
}
