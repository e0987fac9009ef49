import Decompress
import FoundationEssentials
import Glibc
import HostDelivery
import HostSupport

/// What Sentry SDKs send, taken in (SPEC S-4): envelopes at `/api/<project>/envelope/` and
/// events at `/api/<project>/store/`, plain or compressed. An event is stored as a Backtrace
/// submission is, so the inbox lists it beside them: its summary is the exception's `type:
/// value`, else its message; its tags are attributes; the whole event is kept in the
/// annotation `Sentry event`; attachment items are attachments.
enum SentryIntake {
    /// Whether a request posts to Sentry's ingestion endpoints.
    static func isSentry(_ path: String) -> Bool {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        // "", "api", "<project>", "envelope" | "store", ""
        return parts.count == 5 && parts[0].isEmpty && parts[1] == "api" && !parts[2].isEmpty
            && parts[2].allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) } && (parts[3] == "envelope" || parts[3] == "store")
            && parts[4].isEmpty
    }

    /// A body under its `Content-Encoding` (gzip, deflate, br, identity), within `limit` bytes
    /// inflated: the bytes, or the status and reason to answer.
    static func inflate(_ body: Data, encoding: String?, limit: Int) -> Result<Data, Refusal> {
        let kinds: [String: Int32] = ["gzip": RH_ENCODING_GZIP, "x-gzip": RH_ENCODING_GZIP, "deflate": RH_ENCODING_DEFLATE,
                                      "br": RH_ENCODING_BR]
        guard let encoding = encoding?.lowercased().trimmed, !encoding.isEmpty, encoding != "identity" else { return .success(body) }
        guard let kind = kinds[encoding] else { return .failure(Refusal(status: 415, message: "Content-Encoding \(encoding.prefix(40)) is not supported")) }
        var output: UnsafeMutableRawPointer?
        var size = 0
        let status = body.withUnsafeBytes { raw in rh_decompress(kind, raw.baseAddress, raw.count, limit, &output, &size) }
        defer { free(output) }
        switch status {
        case RH_DECOMPRESS_OK: return .success(output.map { Data(bytes: $0, count: size) } ?? Data())
        case RH_DECOMPRESS_TOO_LARGE: return .failure(Refusal(status: 413, message: "the body inflates past \(limit) bytes"))
        case RH_DECOMPRESS_NO_MEMORY: return .failure(Refusal(status: 500, message: "out of memory inflating the body"))
        case RH_DECOMPRESS_UNAVAILABLE: return .failure(Refusal(status: 415, message: "\(encoding) cannot be inflated here (zlib or libbrotlidec missing)"))
        default: return .failure(Refusal(status: 400, message: "the body is not valid \(encoding)"))
        }
    }

    struct Refusal: Error {
        var status: Int
        var message: String
    }

    /// The submission a Sentry body holds: an envelope's event item and its attachments, or a
    /// `store` body's event. `.success(nil)`: nothing to store (an envelope of sessions only).
    static func submission(_ body: Data, path: String) -> Result<LocalReceiver.Submission?, LocalReceiver.StoreFailure> {
        if path.hasSuffix("/store/") {
            guard let event = try? JSONValue.parse(body) else { return .failure(.badSubmission) }
            return submission(event: event, attachments: [:]).map { $0 }
        }
        guard let items = envelopeItems(body) else { return .failure(.badSubmission) }
        var event: JSONValue?
        var attachments: [String: Data] = [:]
        for (header, payload) in items {
            switch header["type"]?.stringValue {
            case "event":
                guard let parsed = try? JSONValue.parse(payload) else { return .failure(.badSubmission) }
                event = parsed
            case "attachment":
                let name = header["filename"]?.stringValue ?? "attachment"
                guard LocalReceiver.isPlainFileName(name) else { return .failure(.badSubmission) }
                attachments[name] = payload
            default:
                continue  // sessions, client reports, transactions: not reports
            }
        }
        guard let event else { return .success(nil) }
        return submission(event: event, attachments: attachments).map { $0 }
    }

    /// An envelope's items: each header and its payload (`length` bytes, else up to the line's
    /// end); nil when it is not an envelope.
    static func envelopeItems(_ body: Data) -> [(JSONValue, Data)]? {
        let bytes = [UInt8](body)
        func line(from start: Int) -> (Range<Int>, next: Int) {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
            return (start..<end, min(end + 1, bytes.count))
        }
        var (range, at) = line(from: 0)
        guard (try? JSONValue.parse(Data(bytes[range])))?.objectValue != nil else { return nil }
        var items: [(JSONValue, Data)] = []
        while at < bytes.count {
            (range, at) = line(from: at)
            if range.isEmpty { continue }
            guard let header = try? JSONValue.parse(Data(bytes[range])), header.objectValue != nil else { return nil }
            let payload: Range<Int>
            if let length = header["length"]?.intValue {
                guard length >= 0, at + length <= bytes.count else { return nil }
                payload = at..<at + length
                at = min(at + length + 1, bytes.count)
            } else {
                (payload, at) = line(from: at)
            }
            items.append((header, Data(bytes[payload])))
        }
        return items
    }

    /// An event as the receiver keeps a report.
    static func submission(event: JSONValue, attachments: [String: Data]) -> Result<LocalReceiver.Submission, LocalReceiver.StoreFailure> {
        guard let id = event["event_id"]?.stringValue, let uuid = uuid(id) else { return .failure(.badSubmission) }
        var attributes: [(String, JSONValue)] = [
            ("error.message", .string(summary(event))), ("error.type", .string(type(event))),
        ]
        if let level = event["level"]?.stringValue { attributes.append(("sentry.level", .string(level))) }
        if let release = event["release"]?.stringValue { attributes.append(("release", .string(release))) }
        if let platform = event["platform"]?.stringValue { attributes.append(("sentry.platform", .string(platform))) }
        for (key, value) in tags(event) where !attributes.contains(where: { $0.0 == key }) { attributes.append((key, .string(value))) }
        var fields: [(String, JSONValue)] = [
            ("uuid", .string(uuid)), ("agent", event["sdk"]?["name"] ?? .string("sentry")),
            ("agentVersion", event["sdk"]?["version"] ?? .string("")), ("attributes", .object(attributes)),
            ("annotations", .object([("Sentry event", event)])), ("classifiers", .array([])),
        ]
        if event["exception"]?["values"]?.arrayValue?.contains(where: { $0["mechanism"]?["type"]?.stringValue == "signalhandler" }) == true {
            fields.append(("threads", .object([])))
        }
        return .success(LocalReceiver.Submission(uuid: uuid, report: .object(fields), attachments: attachments))
    }

    /// 32 hex digits (with dashes or not) as a UUID's text.
    static func uuid(_ id: String) -> String? {
        let hex = id.lowercased().filter { $0 != "-" }
        guard hex.count == 32, hex.allSatisfy(\.isHexDigit) else { return nil }
        return SentryEvent.dashed(hex)
    }

    /// The last exception's `type: value` (Sentry lists the outermost last), else the message.
    static func summary(_ event: JSONValue) -> String {
        if let exception = event["exception"]?["values"]?.arrayValue?.last ?? event["exception"]?.arrayValue?.last {
            let type = exception["type"]?.stringValue, value = exception["value"]?.stringValue
            if let type, let value { return "\(type): \(value)" }
            if let text = type ?? value { return text }
        }
        return event["logentry"]?["formatted"]?.stringValue ?? event["logentry"]?["message"]?.stringValue
            ?? event["message"]?["formatted"]?.stringValue ?? event["message"]?.stringValue ?? ""
    }

    static func type(_ event: JSONValue) -> String {
        guard let exception = event["exception"]?["values"]?.arrayValue?.last else { return "Message" }
        return exception["mechanism"]?["type"]?.stringValue == "signalhandler" ? "Crash" : "Exception"
    }

    /// Tags as an object or as `[[key, value]]` pairs, as SDKs send them.
    static func tags(_ event: JSONValue) -> [(String, String)] {
        if let object = event["tags"]?.objectValue { return object.compactMap { key, value in value.stringValue.map { (key, $0) } } }
        return (event["tags"]?.arrayValue ?? []).compactMap { pair in
            guard let items = pair.arrayValue, items.count == 2, let key = items[0].stringValue, let value = items[1].stringValue else {
                return nil
            }
            return (key, value)
        }
    }
}
