import FoundationEssentials
import Glibc
import Host
import HostSupport

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
    /// The seam its files are written through.
    let system: SystemCalls
    let listener: Int32
    let state: Locked<State>
    /// One metric event written at a time (lines never interleave).
    let metricEventsLock = Locked(())

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
        /// Since when it is an event stream (nil: a request/answer connection).
        var streamSince: HostInstant?
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
        /// Event streams served at once (a quota of their own, below `maxConnections`): past
        /// it, the oldest stream is closed for the new one, so streams never hold a submitter out.
        package var maxStreams = 8
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
    ///   - system: the seam its files are written through (the receiver is an entry of its
    ///     own: the real calls unless a test hands it a plan).
    package init(
        port: UInt16 = 0, folder: URL, script: [Response] = [.status(200)], keepInMemory: Bool = true, limits: Limits = Limits(),
        inbox: Bool = false, chaos: Chaos? = nil, system: SystemCalls = .live, onReceive: @escaping @Sendable (Received) -> Void = { _ in }
    ) throws(HostError) {
        // Owner-only (0700), as everything the host creates: submissions carry personal data.
        _ = Paths.makeFolder(folder.path, system: system)
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
        self.system = system
        self.listener = fd
        self.state = Locked(State(script: script.isEmpty ? [.status(200)] : script, chaos: chaos))
        self.inbox = inbox ? Inbox(folder: folder, system: system) : nil
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

    /// Connections accepted so far, and the most served at once (a client's reuse of its
    /// connections, and how many requests it has in flight).
    package var connectionCounts: (accepted: Int, mostAtOnce: Int) { state.withLock { ($0.accepted, $0.mostAtOnce) } }

    /// Connections being served now.
    package var openConnections: Int { state.withLock { $0.connections.values.filter { !$0.shed }.count } }
}
