import FoundationEssentials
import HostModel
import HostSupport
import HostStore

/// A report as a Sentry envelope (SPEC S-2): a header line (`event_id`, `sent_at`, `dsn`),
/// then items, each a header line with its `length`, its payload and a line break: one `event`,
/// and one `attachment` per attachment copy, streamed from its file.
package enum SentryEnvelope {
    package static let contentType = "application/x-sentry-envelope"

    static func header(eventID: String, dsn: SentryDSN, sentAt: Date) -> String {
        JSONValue.object([
            ("event_id", .string(eventID)), ("sent_at", .string(Breadcrumb.timestamp(sentAt))), ("dsn", .string(dsn.text)),
            ("sdk", .object([("name", .string("reporthost")), ("version", .string(HostVersion.current))])),
        ]).serialized() + "\n"
    }

    static func eventItem(_ event: JSONValue) -> [UInt8] {
        let payload = Array(event.serialized().utf8)
        let head = JSONValue.object([("type", .string("event")), ("length", .int(Int64(payload.count))),
                                     ("content_type", .string("application/json"))])
        return Array((head.serialized() + "\n").utf8) + payload + Array("\n".utf8)
    }

    /// A session update (SPEC B-2 as Sentry counts crash-free sessions): `init` for a session's
    /// start (`ok`), else its end (`crashed`, `abnormal`); nil without a release (Sentry drops
    /// sessions that have none).
    package static func sessionItem(
        session: String, installation: String?, at time: Date, status: String, initial: Bool, release: String?
    ) -> [UInt8]? {
        guard let release, !release.isEmpty else { return nil }
        var fields: [(String, JSONValue)] = [
            ("sid", .string(session.lowercased())), ("init", .bool(initial)), ("started", .string(Breadcrumb.timestamp(time))),
            ("timestamp", .string(Breadcrumb.timestamp(time))), ("status", .string(status)), ("errors", .int(status == "ok" ? 0 : 1)),
            ("attrs", .object([("release", .string(release))])),
        ]
        if let installation { fields.append(("did", .string(installation))) }
        let payload = Array(JSONValue.object(fields).serialized().utf8)
        let head = JSONValue.object([("type", .string("session")), ("length", .int(Int64(payload.count)))])
        return Array((head.serialized() + "\n").utf8) + payload + Array("\n".utf8)
    }

    static func attachmentHeader(filename: String, length: Int) -> String {
        JSONValue.object([
            ("type", .string("attachment")), ("length", .int(Int64(length))), ("filename", .string(filename)),
            ("attachment_type", .string("event.attachment")), ("content_type", .string("application/octet-stream")),
        ]).serialized() + "\n"
    }

    /// The envelope of a report without attachment copies, in memory: its event, then any other
    /// item given whole (a session update).
    package static func bytes(event: JSONValue, eventID: String, dsn: SentryDSN, sentAt: Date, items: [[UInt8]] = []) -> [UInt8] {
        Array(header(eventID: eventID, dsn: dsn, sentAt: sentAt).utf8) + eventItem(event) + items.joined()
    }

    /// An envelope of items alone (a session update), with no event.
    package static func bytes(items: [[UInt8]], dsn: SentryDSN, sentAt: Date) -> [UInt8] {
        let head = JSONValue.object([("sent_at", .string(Breadcrumb.timestamp(sentAt))), ("dsn", .string(dsn.text))])
        return Array((head.serialized() + "\n").utf8) + items.joined()
    }

    /// Writes the envelope to a fresh file (never through a link), each copy streamed from its
    /// file; its length is the copy's size, read from the descriptor it is streamed from.
    package static func write(
        event: JSONValue, eventID: String, dsn: SentryDSN, sentAt: Date, items: [[UInt8]] = [],
        attachments: [(filename: String, file: URL)], to url: URL, system: SystemCalls
    ) throws(StorageError) {
        let fd = try MultipartBody.createBodyFile(url, system: system)
        defer { system.close(fd) }
        func put(_ data: Data) throws(StorageError) {
            if case .failure(let error) = system.writeAll(fd, data) {
                throw StorageError(path: url.path, message: "cannot write the request body (\(error))")
            }
        }
        try put(Data(bytes(event: event, eventID: eventID, dsn: dsn, sentAt: sentAt, items: items)))
        for attachment in attachments {
            let size: Int64
            switch system.openRegular(attachment.file.path) {
            case .success(let opened):
                size = opened.size
                system.close(opened.fd)
            case .failure(let failure):
                throw StorageError(path: attachment.file.path, message: "cannot read the attachment copy (\(failure))")
            }
            try put(Data(attachmentHeader(filename: attachment.filename, length: Int(size)).utf8))
            switch system.stream(attachment.file.path, to: fd, limit: ReportContent.attachmentMaxBytes) {
            case .success(let written) where written == Int(size): break
            case .success: throw StorageError(path: attachment.file.path, message: "the attachment copy changed while it was sent")
            case .failure(let failure):
                throw StorageError(path: attachment.file.path, message: "cannot stream the attachment copy (\(failure))")
            }
            try put(Data("\n".utf8))
        }
    }
}
