import Foundation

/// A TCP client socket connected to 127.0.0.1:`port`, its reads timing out after
/// `timeoutMs`; nil when it cannot connect. The caller closes it.
package func connectToLoopback(port: UInt16, timeoutMs: Int = 5_000) -> Int32? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    var timeout = timeval(tv_sec: timeoutMs / 1000, tv_usec: Int((timeoutMs % 1000) * 1000))
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else {
        close(fd)
        return nil
    }
    return fd
}

/// One HTTP/1.1 exchange with 127.0.0.1:`port` (`Connection: close`, read to the end): the
/// status, the headers (names lower-cased) and the body.
package struct HTTPAnswer: Sendable {
    package var status: Int
    package var headers: [String: String]
    package var body: Data

    package var text: String { String(decoding: body, as: UTF8.self) }
}

package struct HTTPExchangeFailed: Error, CustomStringConvertible {
    package let description: String
}

package func httpRequest(
    port: UInt16, _ target: String, method: String = "GET", host: String? = nil, headers: [String: String] = [:], body: Data = Data(),
    timeoutMs: Int = 5_000
) throws -> HTTPAnswer {
    guard let fd = connectToLoopback(port: port, timeoutMs: timeoutMs) else { throw HTTPExchangeFailed(description: "cannot connect to port \(port)") }
    defer { close(fd) }
    var head = "\(method) \(target) HTTP/1.1\r\nHost: \(host ?? "127.0.0.1:\(port)")\r\nConnection: close\r\nContent-Length: \(body.count)\r\n"
    for (name, value) in headers { head += "\(name): \(value)\r\n" }
    let request = Data((head + "\r\n").utf8) + body
    let sent = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    guard sent == request.count else { throw HTTPExchangeFailed(description: "sent \(sent) of \(request.count) bytes") }
    var answer = Data()
    var chunk = [UInt8](repeating: 0, count: 65_536)
    while true {
        let count = recv(fd, &chunk, chunk.count, 0)
        if count <= 0 { break }
        answer.append(contentsOf: chunk[..<count])
    }
    guard let split = answer.firstRange(of: Data("\r\n\r\n".utf8)) else {
        throw HTTPExchangeFailed(description: "no answer head in \(answer.count) bytes")
    }
    let lines = String(decoding: answer[..<split.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
    let statusWords = lines.first?.split(separator: " ") ?? []
    guard statusWords.count >= 2, let status = Int(statusWords[1]) else { throw HTTPExchangeFailed(description: "bad status line \(lines.first ?? "")") }
    var fields: [String: String] = [:]
    for line in lines.dropFirst() {
        guard let colon = line.firstIndex(of: ":") else { continue }
        fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    return HTTPAnswer(status: status, headers: fields, body: Data(answer[split.upperBound...]))
}
