import FoundationEssentials
import HostModel
import HostSupport

/// What a crash, a hang and an abnormal exit add to their Sentry event (SPEC S-2): the
/// exception (the signal, or the hang, or the exit), its thread's frames, the other threads,
/// and `debug_meta.images`, so a server that symbolicates (Sentry's symbolicator) can name
/// what the host could not.
extension SentryEvent {
    static func crashFields(_ document: ReportDocument, crash: JSONValue?) -> [(String, JSONValue)] {
        let stored = crash?["threads"]?.objectValue ?? []
        let main = crash?["main_thread"]?.stringValue ?? stored.first?.0
        var fields: [(String, JSONValue)] = []
        if let exception = exception(document, crash: crash, frames: stored.first { $0.0 == main }?.1, thread: main) {
            fields.append(("exception", .object([("values", .array([exception]))])))
        }
        if !stored.isEmpty {
            let threads = stored.map { id, thread -> JSONValue in
                var entry: [(String, JSONValue)] = [
                    ("id", Int64(id).map(JSONValue.int) ?? .string(id)), ("crashed", .bool(id == main && document.trigger == .crash)),
                    ("current", .bool(id == main)),
                ]
                if let name = thread["name"]?.stringValue { entry.append(("name", .string(name))) }
                // The faulting thread's frames are the exception's.
                if id != main { entry.append(("stacktrace", stacktrace(thread))) }
                return .object(entry)
            }
            fields.append(("threads", .object([("values", .array(threads))])))
        }
        let images = (crash?["modules"]?.arrayValue ?? []).compactMap(image)
        if !images.isEmpty { fields.append(("debug_meta", .object([("images", .array(images))]))) }
        return fields
    }

    /// The exception: a crash's signal (`mechanism` `signalhandler`, with its number and
    /// code), a hang, or an abnormal exit; nil for the other reports.
    static func exception(_ document: ReportDocument, crash: JSONValue?, frames thread: JSONValue?, thread id: String?) -> JSONValue? {
        var fields: [(String, JSONValue)]
        switch document.trigger {
        case .crash:
            // Sentry names signals as C does: SIGSEGV (the payload keeps SEGV).
            let name = crash?["signal_name"]?.stringValue.map { $0.hasPrefix("SIG") ? $0 : "SIG" + $0 } ?? "crash"
            var signal: [(String, JSONValue)] = [("number", crash?["signal"] ?? .int(0)), ("name", .string(name))]
            if let code = crash?["code"] { signal.append(("code", code)) }
            if let codeName = crash?["code_name"]?.stringValue { signal.append(("code_name", .string(codeName))) }
            fields = [
                ("type", .string(name)), ("value", .string(document.content.summary ?? name)),
                ("mechanism", .object([("type", .string("signalhandler")), ("handled", .bool(false)), ("synthetic", .bool(true)),
                                       ("meta", .object([("signal", .object(signal))]))])),
            ]
        case .appHang:
            fields = [("type", .string("AppHang")), ("value", .string(document.content.summary ?? "a thread stopped answering")),
                      ("mechanism", .object([("type", .string("watchdog")), ("handled", .bool(true))]))]
        case .abnormalExit:
            fields = [("type", .string("AbnormalExit")), ("value", .string(document.content.summary ?? "the program ended abnormally")),
                      ("mechanism", .object([("type", .string("abnormal_exit")), ("handled", .bool(false))]))]
        default:
            return nil
        }
        if let thread { fields.append(("stacktrace", stacktrace(thread))) }
        if let id, let number = Int64(id) { fields.append(("thread_id", .int(number))) }
        return .object(fields)
    }

    /// A stored thread's frames (innermost first) as Sentry's (outermost first).
    static func stacktrace(_ thread: JSONValue) -> JSONValue {
        let frames = (thread["frames"]?.arrayValue ?? []).reversed().map { frame -> JSONValue in
            var fields: [(String, JSONValue)] = [("instruction_addr", frame["address"] ?? .string("0x0"))]
            if let function = frame["function"]?.stringValue { fields.append(("function", .string(function))) }
            if let module = frame["module"]?.stringValue { fields.append(("package", .string(LocalPaths.forServer(module)))) }
            if let file = frame["file"]?.stringValue { fields.append(("filename", .string(LocalPaths.forServer(file)))) }
            if let line = frame["line"]?.intValue { fields.append(("lineno", .int(Int64(line)))) }
            return .object(fields)
        }
        return .object([("frames", .array(frames))])
    }

    /// A module as a `debug_meta` image: `code_id` its GNU build id, `debug_id` derived from it
    /// as Sentry's symbolicator does (the first 16 bytes as a little-endian GUID, age 0).
    static func image(_ module: JSONValue) -> JSONValue? {
        guard let path = module["path"]?.stringValue, let start = module["start"]?.stringValue else { return nil }
        var fields: [(String, JSONValue)] = [("type", .string("elf")), ("code_file", .string(LocalPaths.forServer(path))),
                                             ("image_addr", .string(start))]
        if let end = module["end"]?.stringValue, let low = UInt64(start.dropFirst(2), radix: 16), let high = UInt64(end.dropFirst(2), radix: 16),
           high > low {
            fields.append(("image_size", .int(Int64(high - low))))
        }
        if let buildID = module["build_id"]?.stringValue?.lowercased() {
            fields.append(("code_id", .string(buildID)))
            if let debugID = debugID(buildID) { fields.append(("debug_id", .string(debugID))) }
        }
        return .object(fields)
    }

    /// `debug_id` from a build id: its first 16 bytes (zero-padded) as a GUID whose first three
    /// fields are little-endian.
    package static func debugID(_ buildID: String) -> String? {
        let digits = Array(buildID.utf8)
        guard digits.count >= 2, digits.count % 2 == 0, buildID.allSatisfy(\.isHexDigit) else { return nil }
        var bytes = stride(from: 0, to: min(digits.count, 32), by: 2).map { String(decoding: digits[$0..<$0 + 2], as: UTF8.self) }
        bytes += Array(repeating: "00", count: 16 - bytes.count)
        let guid = bytes[0..<4].reversed() + bytes[4..<6].reversed() + bytes[6..<8].reversed() + bytes[8..<16]
        return dashed(guid.joined())
    }

    /// 32 hex digits written as a UUID is, 8-4-4-4-12 (the receiver writes event ids so too).
    package static func dashed(_ hex: String) -> String {
        let digits = Array(hex)
        return [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { String(digits[$0]) }.joined(separator: "-")
    }
}
