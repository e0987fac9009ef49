import FoundationEssentials
import Glibc
import Host
import HostSupport

/// Reads an HTTP request off a socket, within the receiver's limits.
struct SocketReader {
    let fd: Int32
    let limits: LocalReceiver.Limits
    var buffer = Data()
    /// Where the next search for a separator starts (no byte is scanned twice).
    private var scanned = 0
    /// When the request being read must have arrived (nil: no limit).
    var deadline: HostInstant?

    init(fd: Int32, limits: LocalReceiver.Limits) {
        self.fd = fd
        self.limits = limits
    }

    /// Why a request could not be read.
    enum Failure: Error, Equatable {
        /// The client closed the connection, reset it, stayed silent past the idle timeout,
        /// or was still sending past the request deadline.
        case closed
        case headTooLarge
        case bodyTooLarge
        case malformed(String)

        var status: Int {
            switch self {
            case .closed, .malformed: 400
            case .headTooLarge: 431
            case .bodyTooLarge: 413
            }
        }

        var message: String {
            switch self {
            case .closed: "closed"
            case .headTooLarge: "request head over the limit"
            case .bodyTooLarge: "request body over the limit"
            case .malformed(let what): what
            }
        }
    }

    mutating func fill() -> Bool {
        if let deadline, SystemClock().now() >= deadline { return false }
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let count = recv(fd, &chunk, chunk.count, 0)
        guard count > 0 else { return false }
        buffer.append(contentsOf: chunk[..<count])
        return true
    }

    /// Takes bytes up to `separator` (consumed, not returned), reading at most `limit`.
    private mutating func take(upTo separator: Data, limit: Int, tooLarge: Failure) -> Result<Data, Failure> {
        while true {
            let from = buffer.startIndex + max(0, scanned - (separator.count - 1))
            if let range = buffer.firstRange(ofBytes: separator, from: from) {
                let taken = Data(buffer[buffer.startIndex..<range.lowerBound])
                buffer.removeSubrange(buffer.startIndex..<range.upperBound)
                scanned = 0
                return taken.count <= limit ? .success(taken) : .failure(tooLarge)
            }
            scanned = buffer.count
            guard buffer.count <= limit else { return .failure(tooLarge) }
            guard fill() else { return .failure(.closed) }
        }
    }

    mutating func readHead() -> Result<String, Failure> {
        take(upTo: Data("\r\n\r\n".utf8), limit: limits.maxHeadBytes, tooLarge: .headTooLarge)
            .map { String(decoding: $0, as: UTF8.self) }
    }

    mutating func read(count: Int) -> Result<Data, Failure> {
        while buffer.count < count { guard fill() else { return .failure(.closed) } }
        let data = Data(buffer.prefix(count))
        buffer.removeFirst(count)
        return .success(data)
    }

    mutating func readChunked() -> Result<Data, Failure> {
        var body = Data()
        while true {
            let line: String
            switch take(upTo: Data("\r\n".utf8), limit: 1024, tooLarge: .malformed("chunk size line too long")) {
            case .success(let data): line = String(decoding: data, as: UTF8.self)
            case .failure(let failure): return .failure(failure)
            }
            // Hex digits only: no sign, no overflow past the body limit.
            let digits = line.split(separator: ";").first.map { $0.trimmed } ?? ""
            guard !digits.isEmpty, digits.count <= 16, digits.allSatisfy(\.isHexDigit), let size = UInt(digits, radix: 16) else {
                return .failure(.malformed("bad chunk size '\(line.prefix(32))'"))
            }
            if size == 0 {
                _ = take(upTo: Data("\r\n".utf8), limit: limits.maxHeadBytes, tooLarge: .headTooLarge)
                return .success(body)
            }
            guard size <= UInt(limits.maxBodyBytes - body.count) else { return .failure(.bodyTooLarge) }
            switch read(count: Int(size)) {
            case .success(let chunk): body.append(chunk)
            case .failure(let failure): return .failure(failure)
            }
            if case .failure(let failure) = take(upTo: Data("\r\n".utf8), limit: 0, tooLarge: .malformed("chunk not followed by CRLF")) {
                return .failure(failure)
            }
        }
    }

    /// A complete JSON answer.
    func answer(_ status: Int, _ message: String, rxid: String = "", extra: String = "") {
        let escaped = message.replacing("\\", with: "\\\\").replacing("\"", with: "\\\"")
        let text = "{\"response\":\"\(escaped)\",\"_rxid\":\"\(rxid)\"}"
        write("HTTP/1.1 \(status) \(status < 300 ? "OK" : "Error")\r\nContent-Type: application/json\r\n\(extra)Content-Length: \(text.utf8.count)\r\n\r\n\(text)")
    }

    /// An answer with `body`, its type and further `headers`.
    @discardableResult
    func respond(_ status: Int, type: String, headers: [(String, String)] = [], body: Data) -> Bool {
        let reason = Self.reasons[status] ?? (status < 300 ? "OK" : "Error")
        var head = "HTTP/1.1 \(status) \(reason)\r\n"
        if status != 204 { head += "Content-Type: \(type)\r\nContent-Length: \(body.count)\r\n" }
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        return write(Data(head.utf8) + Data("\r\n".utf8) + (status == 204 ? Data() : body))
    }

    static let reasons = [
        200: "OK", 204: "No Content", 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
        408: "Request Timeout", 413: "Content Too Large", 425: "Too Early", 429: "Too Many Requests", 500: "Internal Server Error",
        502: "Bad Gateway", 503: "Service Unavailable",
    ]

    @discardableResult
    func write(_ text: String) -> Bool { write(Data(text.utf8)) }

    /// Sends all of `data`; false when the client is gone.
    @discardableResult
    func write(_ data: Data) -> Bool {
        data.withUnsafeBytes { buffer -> Bool in
            guard let base = buffer.baseAddress else { return true }
            var offset = 0
            while offset < buffer.count {
                let sent = send(fd, base + offset, buffer.count - offset, Int32(MSG_NOSIGNAL))
                guard sent > 0 else { return false }
                offset += sent
            }
            return true
        }
    }
}
