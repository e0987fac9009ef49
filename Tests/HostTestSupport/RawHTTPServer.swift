import Foundation
import Host
import HostSupport

/// A loopback HTTP server that answers every request with bytes a test chooses: a hostile
/// server (a huge `Retry-After`, a response trickled a byte at a time, an endless body).
///
/// # Thread safety
/// One thread accepts and one serves each connection; `stopped` is behind a `Locked`.
package final class RawHTTPServer: Sendable {
    package enum Behaviour: Sendable {
        /// Sends `text` at once, then closes.
        case respond(String)
        /// Sends `head` at once, then `body` one byte every `intervalMs`, then closes.
        case trickle(head: String, body: String, intervalMs: Int)
        /// Sends `head`, then body bytes as fast as the client takes them, until it goes.
        case endlessBody(head: String)
    }

    package let port: UInt16
    private let listener: Int32
    private let behaviour: Behaviour
    private let state = Locked((stopped: false, requests: 0))

    package init(_ behaviour: Behaviour) throws {
        self.behaviour = behaviour
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard fd >= 0, bound == 0, listen(fd, 16) == 0 else { throw HostError.runtime("raw server: cannot listen") }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        port = UInt16(bigEndian: actual.sin_port)
        listener = fd
        Thread.detachNewThread { [self] in
            defer { close(listener) }
            while true {
                let client = accept(listener, nil, nil)
                if state.withLock({ $0.stopped }) || client < 0 {
                    if client >= 0 { close(client) }
                    return
                }
                Thread.detachNewThread { [self] in serve(client) }
            }
        }
    }

    package var url: String { "http://127.0.0.1:\(port)/post?format=json&token=t" }
    package var requests: Int { state.withLock { $0.requests } }

    package func stop() {
        state.withLock { $0.stopped = true }
        shutdown(listener, Int32(SHUT_RDWR))
    }

    private func serve(_ client: Int32) {
        defer { close(client) }
        guard readRequest(client) else { return }
        state.withLock { $0.requests += 1 }
        switch behaviour {
        case .respond(let text): _ = send(client, Array(text.utf8))
        case .trickle(let head, let body, let intervalMs):
            guard send(client, Array(head.utf8)) else { return }
            for byte in body.utf8 {
                guard send(client, [byte]), !state.withLock({ $0.stopped }) else { return }
                usleep(UInt32(intervalMs * 1000))
            }
        case .endlessBody(let head):
            guard send(client, Array(head.utf8)) else { return }
            let chunk = [UInt8](repeating: 0x41, count: 64 * 1024)
            while send(client, chunk), !state.withLock({ $0.stopped }) {}
        }
    }

    /// Reads one request (head, then a Content-Length or chunked body).
    private func readRequest(_ client: Int32) -> Bool {
        var buffer = Data()
        var chunk = [UInt8](repeating: 0, count: 65_536)
        func fill() -> Bool {
            let count = recv(client, &chunk, chunk.count, 0)
            guard count > 0 else { return false }
            buffer.append(contentsOf: chunk[..<count])
            return true
        }
        var headEnd: Range<Data.Index>?
        while headEnd == nil {
            headEnd = buffer.range(of: Data("\r\n\r\n".utf8))
            if headEnd == nil, !fill() { return false }
        }
        guard let headEnd else { return false }
        let head = String(decoding: buffer[buffer.startIndex..<headEnd.lowerBound], as: UTF8.self).lowercased()
        if head.contains("expect: 100-continue") { _ = send(client, Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)) }
        let length = head.components(separatedBy: "\r\n").first { $0.hasPrefix("content-length:") }
            .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) }
        if let length {
            while buffer.count - headEnd.upperBound < length { guard fill() else { return false } }
        } else if head.contains("chunked") {
            while buffer.range(of: Data("\r\n0\r\n\r\n".utf8)) == nil { guard fill() else { return false } }
        }
        return true
    }

    private func send(_ client: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { Glibc.send(client, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }
}
