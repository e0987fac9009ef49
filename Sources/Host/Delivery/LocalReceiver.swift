import Foundation

/// A local submission endpoint speaking the Backtrace submission API (`reporthost receive`):
/// multipart/form-data with an `upload_file` part and `attachment_<name>` parts. Binds to
/// loopback, stores each report's JSON and attachments under its folder, and answers from a
/// script of responses for fault tests: HTTP codes, `reset` (close with a TCP reset) or
/// `stall` (never answer); the last entry repeats.
///
/// # Thread safety
/// One thread accepts; one thread serves each connection; shared state is behind `Locked`.
public final class LocalReceiver: Sendable {
    public enum Response: Sendable, Equatable {
        case status(Int)
        case reset
        case stall
    }

    /// One stored submission.
    public struct Received: Sendable {
        public var uuid: String
        public var report: JSONValue
        public var attachments: [String: Data]
        public var query: String
        public var answer: Response
    }

    public let port: UInt16
    public let folder: URL
    private let listener: Int32
    private let state: Locked<(script: [Response], received: [Received], stopped: Bool)>
    private let onReceive: @Sendable (Received) -> Void
    private let keepInMemory: Bool

    /// Parses `--respond` text: `503,429,reset,stall,200`.
    public static func parseScript(_ text: String) throws(HostError) -> [Response] {
        try text.split(separator: ",").map { (item) throws(HostError) -> Response in
            let word = item.trimmingCharacters(in: .whitespaces).lowercased()
            if word == "reset" { return .reset }
            if word == "stall" { return .stall }
            guard let code = Int(word), (100...599).contains(code) else {
                throw .usage("--respond '\(text)': '\(word)' is not an HTTP status, reset or stall")
            }
            return .status(code)
        }
    }

    /// Listens on 127.0.0.1:`port` (0 picks a free port) and stores into `folder`.
    /// - Parameter keepInMemory: keep every submission in `received` (tests); the command
    ///   line keeps only the files, so a long run does not grow.
    public init(
        port: UInt16 = 0, folder: URL, script: [Response] = [.status(200)], keepInMemory: Bool = true,
        onReceive: @escaping @Sendable (Received) -> Void = { _ in }
    ) throws(HostError) {
        try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
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
        guard bound == 0, listen(fd, 64) == 0 else {
            close(fd)
            throw .runtime("receive: cannot listen on 127.0.0.1:\(port) (\(String(cString: strerror(errno))))")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        self.port = UInt16(bigEndian: actual.sin_port)
        self.folder = folder
        self.listener = fd
        self.state = Locked((script.isEmpty ? [.status(200)] : script, [], false))
        self.onReceive = onReceive
        self.keepInMemory = keepInMemory
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    public var url: String { "http://127.0.0.1:\(port)/post?format=json&token=local-token" }
    public var received: [Received] { state.withLock { $0.received } }

    /// Stops accepting (open connections finish their current request). The accept thread
    /// closes the listening socket itself when it wakes, so its descriptor number cannot be
    /// reused by another socket while that thread may still call `accept` on it.
    public func stop() {
        state.withLock { $0.stopped = true }
        shutdown(listener, Int32(SHUT_RDWR))
    }

    private func acceptLoop() {
        defer { close(listener) }
        while true {
            let client = accept(listener, nil, nil)
            if state.withLock({ $0.stopped }) {
                if client >= 0 { close(client) }
                return
            }
            if client < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return
            }
            Thread.detachNewThread { [self] in serve(client) }
        }
    }

    private func nextResponse() -> Response {
        state.withLock { state in
            state.script.count > 1 ? state.script.removeFirst() : state.script[0]
        }
    }

    // MARK: HTTP

    private func serve(_ client: Int32) {
        var reader = SocketReader(fd: client)
        defer { close(client) }
        while let head = reader.readHead() {
            let lines = head.components(separatedBy: "\r\n")
            let requestLine = lines.first?.split(separator: " ") ?? []
            var headers: [String: String] = [:]
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            if headers["expect"]?.lowercased() == "100-continue" { reader.write("HTTP/1.1 100 Continue\r\n\r\n") }
            let body: Data
            if headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
                guard let chunked = reader.readChunked() else { return }
                body = chunked
            } else {
                guard let length = Int(headers["content-length"] ?? "0"), length >= 0, length <= 64 << 20,
                    let data = reader.read(count: length)
                else { return }
                body = data
            }
            let target = requestLine.count > 1 ? String(requestLine[1]) : "/"
            let response = nextResponse()
            switch response {
            case .reset:
                var linger = linger(l_onoff: 1, l_linger: 0)
                setsockopt(client, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
                return
            case .stall:
                // Hold the connection without answering until the client gives up.
                while reader.readHead() != nil {}
                return
            case .status(let code):
                let stored = store(body: body, contentType: headers["content-type"] ?? "", target: target, answer: response)
                let message = stored == nil && (200..<300).contains(code) ? "bad submission" : "ok"
                let status = stored == nil && (200..<300).contains(code) ? 400 : code
                let text = "{\"response\":\"\(message)\",\"_rxid\":\"\(stored?.uuid ?? "")\"}"
                var extra = ""
                if status == 429 || status == 503 { extra = "Retry-After: 1\r\n" }
                reader.write("HTTP/1.1 \(status) \(status < 300 ? "OK" : "Error")\r\nContent-Type: application/json\r\n\(extra)Content-Length: \(text.utf8.count)\r\n\r\n\(text)")
                if headers["connection"]?.lowercased() == "close" { return }
            }
        }
    }

    /// Stores a submission: `<folder>/<uuid>.json` and `<folder>/<uuid>/<attachment>`.
    private func store(body: Data, contentType: String, target: String, answer: Response) -> Received? {
        guard let boundary = contentType.components(separatedBy: "boundary=").last, contentType.contains("multipart/form-data") else {
            return nil
        }
        var report: JSONValue?
        var attachments: [String: Data] = [:]
        for part in Multipart.parts(of: body, boundary: boundary) {
            if part.name == "upload_file" {
                report = try? JSONValue.parse(part.data)
            } else if part.name.hasPrefix("attachment_") {
                attachments[String(part.name.dropFirst("attachment_".count))] = part.data
            }
        }
        guard let report, let uuid = report["uuid"]?.stringValue, UUID(uuidString: uuid) != nil else { return nil }
        let query = target.split(separator: "?", maxSplits: 1).dropFirst().first.map(String.init) ?? ""
        let received = Received(uuid: uuid, report: report, attachments: attachments, query: query, answer: answer)
        try? Data(report.serialized(pretty: true).utf8).write(to: folder.appendingPathComponent("\(uuid).json"))
        if !attachments.isEmpty {
            let attachmentFolder = folder.appendingPathComponent(uuid)
            try? FileManager.default.createDirectory(at: attachmentFolder, withIntermediateDirectories: true)
            for (name, data) in attachments {
                try? data.write(to: attachmentFolder.appendingPathComponent(name.replacingOccurrences(of: "/", with: "_")))
            }
        }
        if keepInMemory { state.withLock { $0.received.append(received) } }
        onReceive(received)
        return received
    }
}

/// Reads an HTTP request off a socket.
private struct SocketReader {
    let fd: Int32
    var buffer = Data()

    mutating func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let count = recv(fd, &chunk, chunk.count, 0)
        guard count > 0 else { return false }
        buffer.append(contentsOf: chunk[..<count])
        return true
    }

    mutating func readHead() -> String? {
        let separator = Data("\r\n\r\n".utf8)
        while true {
            if let range = buffer.range(of: separator) {
                let head = String(decoding: buffer[buffer.startIndex..<range.lowerBound], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex..<range.upperBound)
                return head
            }
            guard fill() else { return nil }
        }
    }

    mutating func read(count: Int) -> Data? {
        while buffer.count < count { guard fill() else { return nil } }
        let data = buffer.prefix(count)
        buffer.removeFirst(count)
        return Data(data)
    }

    mutating func readChunked() -> Data? {
        var body = Data()
        while true {
            guard let line = readLine(), let size = Int(line.split(separator: ";").first ?? "", radix: 16) else { return nil }
            if size == 0 {
                _ = readLine()
                return body
            }
            guard let chunk = read(count: size) else { return nil }
            body.append(chunk)
            _ = readLine()
        }
    }

    mutating func readLine() -> String? {
        let separator = Data("\r\n".utf8)
        while true {
            if let range = buffer.range(of: separator) {
                let line = String(decoding: buffer[buffer.startIndex..<range.lowerBound], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex..<range.upperBound)
                return line
            }
            guard fill() else { return nil }
        }
    }

    func write(_ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeMutableBytes { send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { return }
            offset += sent
        }
        bytes.removeAll()
    }
}

/// Splits a multipart/form-data body into its named parts.
enum Multipart {
    struct Part {
        var name: String
        var data: Data
    }

    static func parts(of body: Data, boundary: String) -> [Part] {
        let delimiter = Data("--\(boundary)".utf8)
        var parts: [Part] = []
        var searchStart = body.startIndex
        guard var current = body.range(of: delimiter, in: searchStart..<body.endIndex) else { return [] }
        while true {
            searchStart = current.upperBound
            guard let next = body.range(of: delimiter, in: searchStart..<body.endIndex) else { break }
            var section = body[current.upperBound..<next.lowerBound]
            if section.starts(with: Data("\r\n".utf8)) { section = section.dropFirst(2) }
            if section.count >= 2, section.suffix(2) == Data("\r\n".utf8) { section = section.dropLast(2) }
            if let split = section.range(of: Data("\r\n\r\n".utf8)) {
                let head = String(decoding: section[section.startIndex..<split.lowerBound], as: UTF8.self)
                if let nameRange = head.range(of: "name=\"") {
                    let rest = head[nameRange.upperBound...]
                    let name = String(rest[..<(rest.firstIndex(of: "\"") ?? rest.endIndex)])
                    parts.append(Part(name: name, data: Data(section[split.upperBound...])))
                }
            }
            current = next
        }
        return parts
    }
}
