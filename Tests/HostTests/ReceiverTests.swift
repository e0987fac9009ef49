import Foundation
import Host
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
            URL(string: receiver.url)!, contentType: contentType, bodyFile: file, timeoutMs: 5_000)
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

    @Test("receive: takes the JSON report itself as the body (application/json), as Backtrace clients may send it")
    func jsonBody() throws {
        let stored = folder.appendingPathComponent("json")
        let receiver = try LocalReceiver(folder: stored)
        defer { receiver.stop() }
        let id = UUID().uuidString.lowercased()
        #expect(try post(Data(#"{"uuid": "\#(id)", "attributes": {"error.message": "plain"}}"#.utf8), contentType: "application/json", to: receiver) == 200)
        #expect(receiver.received.first?.uuid == id)
        #expect(FileManager.default.fileExists(atPath: stored.appendingPathComponent("\(id).json").path))
    }
}
