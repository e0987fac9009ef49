import Foundation
import Host
import HostDelivery
import HostTestSupport
import Receiver
import Testing

/// `reporthost receive`'s endpoint writes only inside its folder, whatever is planted there,
/// and takes what Backtrace clients send (a multipart body, or the JSON report itself).
@Suite struct ReceiverTests {
    let folder = makeTemporaryDirectory("receiver")

    /// POSTs `body` to `receiver` with `contentType`; the answer's status.
    func post(_ body: Data, contentType: String, to receiver: LocalReceiver) throws -> Int? {
        let file = folder.appendingPathComponent("body-\(UUID().uuidString)")
        try body.write(to: file)
        guard case .response(let status, _) = CurlTransport().post(
            URL(string: receiver.url)!, body: RequestBody(contentType: contentType, file: file), timeoutMs: 5_000)
        else { return nil }
        return status
    }

    func multipart(report: String, attachments: [(String, String)]) -> Data {
        var text = "--B\r\nContent-Disposition: form-data; name=\"upload_file\"; filename=\"upload_file.json\"\r\n"
            + "Content-Type: application/json\r\n\r\n\(report)\r\n"
        for (name, content) in attachments {
            text += "--B\r\nContent-Disposition: form-data; name=\"attachment_\(name)\"; filename=\"\(name)\"\r\n"
                + "Content-Type: application/octet-stream\r\n\r\n\(content)\r\n"
        }
        return Data((text + "--B--\r\n").utf8)
    }

    @Test("receive: a symbolic link planted as a report's file or its attachment folder is never written through")
    func plantedLinks() throws {
        let stored = folder.appendingPathComponent("stored")
        let outside = folder.appendingPathComponent("outside")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        let receiver = try LocalReceiver(folder: stored)
        defer { receiver.stop() }
        let victim = outside.appendingPathComponent("victim.txt")
        try "untouched".write(to: victim, atomically: true, encoding: .utf8)

        // The report's JSON file name, planted as a link to a file outside.
        let first = UUID().uuidString.lowercased()
        try FileManager.default.createSymbolicLink(atPath: stored.appendingPathComponent("\(first).json").path, withDestinationPath: victim.path)
        #expect(try post(Data(#"{"uuid": "\#(first)"}"#.utf8), contentType: "application/json", to: receiver) == 200)
        #expect(try String(contentsOf: victim, encoding: .utf8) == "untouched")
        var status = stat()
        #expect(lstat(stored.appendingPathComponent("\(first).json").path, &status) == 0 && status.st_mode & S_IFMT == S_IFREG)

        // The attachment folder, planted as a link to a folder outside: refused, nothing written there.
        let second = UUID().uuidString.lowercased()
        try FileManager.default.createSymbolicLink(atPath: stored.appendingPathComponent(second).path, withDestinationPath: outside.path)
        let answer = try post(
            multipart(report: #"{"uuid": "\#(second)"}"#, attachments: [("a.txt", "attached")]), contentType: "multipart/form-data; boundary=B",
            to: receiver)
        #expect(answer == 500)
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside.path) == ["victim.txt"])
    }

    @Test("receive: an attachment named '.', '..' or with a slash or backslash is a 400 before anything is stored")
    func badAttachmentNames() throws {
        let stored = folder.appendingPathComponent("names")
        let receiver = try LocalReceiver(folder: stored)
        defer { receiver.stop() }
        for name in [".", "..", "a/b", "a\\b"] {
            let id = UUID().uuidString.lowercased()
            let answer = try post(
                multipart(report: #"{"uuid": "\#(id)"}"#, attachments: [("ok.txt", "fine"), (name, "bad")]),
                contentType: "multipart/form-data; boundary=B", to: receiver)
            #expect(answer == 400, "\(name)")
            #expect(!FileManager.default.fileExists(atPath: stored.appendingPathComponent(id).path), "\(name)")
            #expect(!FileManager.default.fileExists(atPath: stored.appendingPathComponent("\(id).json").path), "\(name)")
        }
    }

    @Test("receive: takes the JSON report itself as the body (application/json) and the /<universe>/<token>/json URL form, as Backtrace clients send them")
    func jsonBody() throws {
        let stored = folder.appendingPathComponent("json")
        let receiver = try LocalReceiver(folder: stored)
        defer { receiver.stop() }
        let id = UUID().uuidString.lowercased()
        #expect(try post(Data(#"{"uuid": "\#(id)", "attributes": {"error.message": "plain"}}"#.utf8), contentType: "application/json", to: receiver) == 200)
        #expect(receiver.received.first?.uuid == id)
        #expect(FileManager.default.fileExists(atPath: stored.appendingPathComponent("\(id).json").path))
        // Backtrace's other URL form: /<universe>/<token>/json.
        let other = UUID().uuidString.lowercased()
        let file = folder.appendingPathComponent("body-\(other)")
        try Data(#"{"uuid": "\#(other)"}"#.utf8).write(to: file)
        let pathForm = URL(string: "http://127.0.0.1:\(receiver.port)/universe/\(String(repeating: "ab", count: 32))/json")!
        guard case .response(let status, _) = CurlTransport().post(pathForm, body: RequestBody(contentType: "application/json", file: file), timeoutMs: 5_000)
        else { Issue.record("no answer"); return }
        #expect(status == 200 && receiver.received.contains { $0.uuid == other })
    }

    /// A client socket connected to `port`, reads timing out after `timeoutMs`.
    func connectClient(_ port: UInt16, timeoutMs: Int = 5_000) throws -> Int32 {
        try #require(connectToLoopback(port: port, timeoutMs: timeoutMs))
    }

    /// What `fd` reads next: the text, "" when the peer closed, nil when nothing came in time.
    func readSome(_ fd: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(fd, &buffer, buffer.count, 0)
        return count < 0 ? nil : String(decoding: buffer[..<count], as: UTF8.self)
    }

    @Test("receive: at the connection limit a new client takes the place of the connection idle longest; when every connection is busy it is answered 503 with Retry-After")
    func connectionPressure() throws {
        var limits = LocalReceiver.Limits()
        limits.maxConnections = 2
        limits.shedIdleAfterMs = 0  // an idle connection may be shed at once here
        let receiver = try LocalReceiver(folder: folder.appendingPathComponent("pressure"), limits: limits)
        defer { receiver.stop() }
        let body = Data(#"{"uuid": "\#(UUID().uuidString.lowercased())"}"#.utf8)

        // Two clients that connect and send nothing hold both places; the accept thread takes
        // clients in order, so both are counted before the submission below arrives.
        let idle = try (0..<2).map { _ in try connectClient(receiver.port, timeoutMs: 500) }
        defer { idle.forEach { close($0) } }
        #expect(try post(body, contentType: "application/json", to: receiver) == 200)
        #expect(readSome(idle[0]) == "")  // shed: closed without an answer
        #expect(readSome(idle[1]) == nil)  // still open

        // Two clients in the middle of a body (the 100 Continue proves the head was read).
        let busy = try (0..<2).map { _ in try connectClient(receiver.port) }
        defer { busy.forEach { close($0) } }
        for fd in busy {
            let head = "POST /post HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n"
            _ = head.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
            #expect(readSome(fd)?.hasPrefix("HTTP/1.1 100 Continue") == true)
        }
        let late = try connectClient(receiver.port)
        defer { close(late) }
        let answer = readSome(late) ?? ""
        #expect(answer.hasPrefix("HTTP/1.1 503") && answer.contains("Retry-After: 1"), "\(answer)")
    }

    /// Posts a report from each of `n` threads at once (a barrier), each on its own
    /// connection; prints `status<TAB>Retry-After<TAB>uuid`, or `error<TAB>what` per client.
    static let burstClient = """
        import http.client, json, sys, threading, uuid
        port, n = int(sys.argv[1]), int(sys.argv[2])
        barrier = threading.Barrier(n)
        results = [None] * n
        def post(i):
            report = str(uuid.uuid4())
            body = json.dumps({"uuid": report}).encode()
            barrier.wait()
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                connection.request("POST", "/post?format=json&token=t", body, {"Content-Type": "application/json"})
                answer = connection.getresponse()
                answer.read()
                results[i] = (str(answer.status), answer.getheader("Retry-After") or "", report)
            except Exception as error:
                results[i] = ("error", type(error).__name__ + ": " + str(error), report)
        threads = [threading.Thread(target=post, args=(i,)) for i in range(n)]
        for thread in threads: thread.start()
        for thread in threads: thread.join()
        for result in results: print("\t".join(result))
        """

    @Test("receive: a burst of 500 concurrent posts: every client gets an HTTP answer, 200 or 503 with Retry-After, and every stored report was answered 200")
    func burst() throws {
        let receiver = try LocalReceiver(folder: folder.appendingPathComponent("burst"))
        defer { receiver.stop() }
        let script = try Fixtures.file("burst.py", Self.burstClient)
        let run = try ChildProcess.run("/usr/bin/python3", [script.path, String(receiver.port), "500"])
        let lines = run.stdout.split(separator: "\n").map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
        try #require(lines.count == 500, "\(run.stderr)")
        let failures = lines.filter { $0[0] != "200" && !($0[0] == "503" && $0[1] == "1") }
        #expect(failures.isEmpty, "\(failures.count) clients without a 200 or a 503 with Retry-After: \(failures.prefix(5))")
        let accepted = Set(lines.filter { $0[0] == "200" }.map { $0[2] })
        let stored = receiver.received.map(\.uuid)
        #expect(Set(stored) == accepted && stored.count == accepted.count, "stored \(stored.count), answered 200 \(accepted.count)")
        #expect(!accepted.isEmpty)
    }

    @Test("receive: a chunked body with chunk extensions (`5;x=y`, RFC 9112 7.1.1) is taken")
    func chunkExtensions() throws {
        let receiver = try LocalReceiver(folder: folder.appendingPathComponent("chunks"))
        defer { receiver.stop() }
        let id = UUID().uuidString.lowercased()
        let json = #"{"uuid": "\#(id)"}"#
        let (first, second) = (String(json.prefix(5)), String(json.dropFirst(5)))
        let request = "POST /post HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "5;x=y\r\n\(first)\r\n\(String(second.utf8.count, radix: 16)) ; name=\"quoted;value\"\r\n\(second)\r\n0;last\r\n\r\n"
        let fd = try connectClient(receiver.port)
        defer { close(fd) }
        _ = request.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        let answer = readSome(fd) ?? ""
        #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer)")
        #expect(receiver.received.first?.uuid == id)
    }
}
