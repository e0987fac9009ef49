import FoundationEssentials
import Glibc
import HostModel
import HostSupport
import HostStore

// The multipart/form-data of a Backtrace submission, both ways, in one place: the deliverer
// writes it (`MultipartBody`), the local receiver reads it (`Multipart.parts`).

/// A multipart/form-data body written to a file, part by part, so attachments stream from
/// their copies instead of being held in memory.
package struct MultipartBody: Sendable {
    package let boundary = "reporthost-" + randomUUID()
    package var contentType: String { "multipart/form-data; boundary=\(boundary)" }

    package init() {}

    /// Writes `upload_file` (the JSON report) and one `attachment_<name>` part per file, each
    /// streamed from its copy (at most 3 MB, a regular file). Any failed write (a full disk)
    /// or unreadable copy is an error: no request is built, the record stays as it is.
    /// A part made from bytes in memory (Backtrace's `bt-breadcrumbs-0`), not a copy's file.
    package struct InlinePart: Sendable, Equatable {
        package var name: String
        package var filename: String
        package var type: String
        package var bytes: [UInt8]

        package init(name: String, filename: String, type: String, bytes: [UInt8]) {
            self.name = name
            self.filename = filename
            self.type = type
            self.bytes = bytes
        }
    }

    package func write(
        json: JSONValue, inline: [InlinePart] = [], attachments: [(name: String, filename: String, file: URL)], to url: URL,
        system: SystemCalls
    ) throws(StorageError) {
        let fd = try Self.createBodyFile(url, system: system)
        defer { system.close(fd) }
        func put(_ text: String) throws(StorageError) {
            if case .failure(let error) = system.writeAll(fd, text) {
                throw StorageError(path: url.path, message: "cannot write the request body (\(error))")
            }
        }
        try put(reportPart(json))
        for part in inline {
            let text = inlinePart(part)
            if case .failure(let error) = system.writeAll(fd, Data(text)) {
                throw StorageError(path: url.path, message: "cannot write the request body (\(error))")
            }
        }
        for attachment in attachments {
            try put(part("attachment_\(Self.sanitize(attachment.name))", filename: Self.sanitize(attachment.filename), type: "application/octet-stream"))
            if case .failure(let failure) = system.stream(attachment.file.path, to: fd, limit: ReportContent.attachmentMaxBytes) {
                throw StorageError(path: attachment.file.path, message: "cannot stream the attachment copy (\(failure))")
            }
            try put("\r\n")
        }
        try put("--\(boundary)--\r\n")
    }

    /// A request body's file, opened for writing: a fresh file, whatever was left under its
    /// name, never written through a link (the Sentry envelope's too).
    package static func createBodyFile(_ url: URL, system: SystemCalls) throws(StorageError) -> Int32 {
        system.unlink(url.path)
        switch system.open(url.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC) {
        case .success(let opened): return opened
        case .failure(let error): throw StorageError(path: url.path, message: "cannot create the request body (\(error))")
        }
    }

    /// The body of a report without attachments, in memory: the same bytes `write` writes
    /// with no attachment.
    package func bytes(json: JSONValue, inline: [InlinePart] = []) -> [UInt8] {
        Array(reportPart(json).utf8) + inline.flatMap(inlinePart) + Array("--\(boundary)--\r\n".utf8)
    }

    /// An inline part with the line break that ends it.
    private func inlinePart(_ inline: InlinePart) -> [UInt8] {
        Array(part(Self.sanitize(inline.name), filename: Self.sanitize(inline.filename), type: inline.type).utf8) + inline.bytes
            + Array("\r\n".utf8)
    }

    /// The `upload_file` part: the JSON report, with the line break that ends it.
    private func reportPart(_ json: JSONValue) -> String {
        part("upload_file", filename: "upload_file.json", type: "application/json") + json.serialized() + "\r\n"
    }

    private func part(_ name: String, filename: String, type: String) -> String {
        "--\(boundary)\r\nContent-Disposition: form-data; name=\"\(name)\"; filename=\"\(filename)\"\r\nContent-Type: \(type)\r\n\r\n"
    }

    /// Quotes and line breaks cannot appear inside a header value.
    static func sanitize(_ text: String) -> String {
        String(text.map { $0 == "\"" || $0 == "\r" || $0 == "\n" ? "_" : $0 })
    }
}

/// Reads a multipart/form-data body: its named parts.
package enum Multipart {
    package struct Part: Sendable {
        package var name: String
        package var data: Data
    }

    /// The parts of `body` between `boundary` delimiters, each with its `name`.
    package static func parts(of body: Data, boundary: String) -> [Part] {
        let delimiter = Data("--\(boundary)".utf8)
        var parts: [Part] = []
        var searchStart = body.startIndex
        guard var current = body.firstRange(ofBytes: delimiter, from: searchStart) else { return [] }
        while true {
            searchStart = current.upperBound
            guard let next = body.firstRange(ofBytes: delimiter, from: searchStart) else { break }
            var section = body[current.upperBound..<next.lowerBound]
            if section.starts(with: Data("\r\n".utf8)) { section = section.dropFirst(2) }
            if section.count >= 2, section.suffix(2) == Data("\r\n".utf8) { section = section.dropLast(2) }
            if let split = section.firstRange(ofBytes: Data("\r\n\r\n".utf8)) {
                let head = String(decoding: section[section.startIndex..<split.lowerBound], as: UTF8.self)
                if let nameRange = head.firstRange(of: "name=\"") {
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
