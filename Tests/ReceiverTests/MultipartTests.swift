import Foundation
import Host
import HostDelivery
import HostSupport
import HostTestSupport
import Receiver
import Testing

/// The multipart writer (the deliverer's) and reader (the receiver's) agree: what one writes
/// the other reads back part for part, byte for byte.
struct MultipartTests {
    @Test("D-3: a body the deliverer writes reads back through the receiver's reader, every part intact")
    func roundTrip() throws {
        let folder = makeTemporaryDirectory("multipart")
        defer { try? FileManager.default.removeItem(at: folder) }
        // Bytes that look like the syntax around them: CRLFs, a dash run, a false boundary.
        var binary = Data((0..<256).map { UInt8($0) })
        binary.append(Data("\r\n--reporthost-not-the-boundary\r\n\r\n".utf8))
        let files = [("log.txt", "log.txt", Data("line one\r\nline two\n".utf8)), ("core", "core.bin", binary),
                     ("quote\"name", "a\"b.txt", Data("x".utf8))]
        var attachments: [(name: String, filename: String, file: URL)] = []
        for (index, file) in files.enumerated() {
            let url = folder.appendingPathComponent("copy-\(index)")
            try file.2.write(to: url)
            attachments.append((file.0, file.1, url))
        }
        let json = JSONValue.object([("report_id", .string("r-1")), ("summary", .string("multipart round trip 🚀"))])
        let body = MultipartBody()
        let output = folder.appendingPathComponent("body")
        try body.write(json: json, attachments: attachments, to: output, system: .live)

        let parts = Multipart.parts(of: try Data(contentsOf: output), boundary: body.boundary)
        #expect(parts.map(\.name) == ["upload_file", "attachment_log.txt", "attachment_core", "attachment_quote_name"])
        #expect(try JSONValue.parse(try #require(parts.first).data) == json)
        for (part, file) in zip(parts.dropFirst(), files) { #expect(part.data == file.2, "\(part.name)") }
    }

    @Test("D-3: the reader finds no parts in a body without its boundary, and never reads past the last delimiter")
    func foreignBody() {
        #expect(Multipart.parts(of: Data("no multipart here".utf8), boundary: "b").isEmpty)
        let truncated = Data("--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nvalue\r\n--b\r\nContent-Disposition: form-data; name=\"cut".utf8)
        #expect(Multipart.parts(of: truncated, boundary: "b").map(\.name) == ["a"])
    }

    @Test("The reader's byte search (memchr, memcmp) finds what the generic firstRange(of:) finds: 20,000 random texts, needles and starts, slices included")
    func byteSearch() {
        var random = SplitMix64(seed: 20261205)
        for _ in 0..<20_000 {
            // Few distinct bytes, so needles occur, overlap and repeat.
            let bytes = Data((0..<Int(random.next() % 64)).map { _ in UInt8(ascii: "a") + UInt8(random.next() % 3) })
            let dropped = bytes.isEmpty ? 0 : Int(random.next() % UInt64(bytes.count + 1))
            let text = bytes.dropFirst(dropped)  // a slice: its indices do not start at 0
            let needle = Data((0..<(1 + Int(random.next() % 4))).map { _ in UInt8(ascii: "a") + UInt8(random.next() % 3) })
            let from = text.startIndex + Int(random.next() % UInt64(text.count + 1))
            #expect(text.firstRange(ofBytes: needle, from: from) == text[from...].firstRange(of: needle), "\(Array(text)) \(Array(needle)) \(from)")
            #expect(text.firstRange(ofBytes: needle) == text.firstRange(of: needle))
        }
        #expect(Data("abc".utf8).firstRange(ofBytes: Data()) == nil)
    }
}
