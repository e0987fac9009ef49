import CrashCapture
import Foundation

/// A crash file written by the signal-safe writer (`Sources/CrashCapture`), parsed.
/// A torn file (the writer died too) yields what it holds; `complete` says whether the
/// writer reached its end marker.
public struct CrashFile: Sendable {
    public var path: String
    public var session: String?
    public var signal: Int32
    public var code: Int64
    public var address: String
    public var thread: Int64
    public var time: Date
    public var registers: [(String, String)] = []
    public var frames: [UInt64] = []
    public var modules: [(start: UInt64, end: UInt64, path: String)] = []
    public var attributes: [String: String] = [:]
    public var attachmentPaths: [String] = []
    public var complete = false

    public static let signalNames: [Int32: String] = [
        SIGSEGV: "SEGV", SIGBUS: "BUS", SIGILL: "ILL", SIGFPE: "FPE", SIGABRT: "ABRT", SIGTRAP: "TRAP",
    ]

    /// Parses the file at `path`; nil when it is not a crash file at all.
    public init?(path: String, modifiedAt fallbackTime: Date) {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        let text = String(decoding: data, as: UTF8.self)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: true)
        guard lines.first == "reporthost-crash 1" else { return nil }
        self.path = path
        signal = 0
        code = 0
        address = "0x0"
        thread = 0
        time = fallbackTime
        for line in lines.dropFirst() {
            let parts = line.split(separator: " ", maxSplits: 1).map(String.init)
            guard let key = parts.first else { continue }
            let value = parts.count > 1 ? parts[1] : ""
            switch key {
            case "session": session = value
            case "signal": signal = Int32(value) ?? 0
            case "code": code = Int64(value) ?? 0
            case "address": address = value
            case "thread": thread = Int64(value) ?? 0
            case "time": time = Int64(value).map { Date(timeIntervalSince1970: TimeInterval($0)) } ?? fallbackTime
            case "register":
                let pair = value.split(separator: " ").map(String.init)
                if pair.count == 2 { registers.append((pair[0], pair[1])) }
            case "frame": if let address = Self.hex(value) { frames.append(address) }
            case "module":
                let fields = value.split(separator: " ", maxSplits: 2).map(String.init)
                if fields.count == 3, let start = Self.hex(fields[0]), let end = Self.hex(fields[1]) {
                    modules.append((start, end, fields[2]))
                }
            case "attribute":
                if let equals = value.firstIndex(of: "=") {
                    attributes[String(value[..<equals])] = String(value[value.index(after: equals)...])
                }
            case "attachment": attachmentPaths.append(value)
            case "end": complete = true
            default: break
            }
        }
    }

    static func hex(_ text: String) -> UInt64? {
        UInt64(text.hasPrefix("0x") ? String(text.dropFirst(2)) : text, radix: 16)
    }

    public var signalName: String { Self.signalNames[signal] ?? "signal \(signal)" }

    /// The crash payload kept with the record and sent as Backtrace's `threads`.
    public var payload: JSONValue {
        let stack: [JSONValue] = frames.map { address in
            var frame: [(String, JSONValue)] = [("address", .string("0x" + String(address, radix: 16)))]
            if let module = modules.first(where: { $0.start <= address && address < $0.end }) {
                frame.append(("library", .string(module.path)))
                frame.append(("offset", .string("0x" + String(address - module.start, radix: 16))))
            }
            return .object(frame)
        }
        return .object([
            ("signal", .int(signal)), ("signal_name", .string(signalName)), ("code", .int(code)),
            ("address", .string(address)), ("thread", .int(thread)), ("time", .int(Int64(time.timeIntervalSince1970))),
            ("complete", .bool(complete)),
            ("registers", .object(registers.map { ($0.0, .string($0.1)) })),
            ("threads", .object([(String(thread), .object([("name", .string("crashed")), ("stack", .array(stack))]))])),
            ("main_thread", .string(String(thread))),
            ("modules", .array(modules.map { .object([("start", .string("0x" + String($0.start, radix: 16))),
                                                      ("end", .string("0x" + String($0.end, radix: 16))),
                                                      ("path", .string($0.path))]) })),
        ])
    }
}

/// Installs the signal-safe writer for this process (SPEC D-1).
public enum CrashCapture {
    /// Installs the handlers writing into `crashes`, naming `session`; registers the host-wide
    /// attributes. Returns false if the handlers could not be installed.
    @discardableResult
    public static func install(crashes: URL, session: String, attributes: [String: String]) -> Bool {
        for (key, value) in attributes { setAttribute(key, value) }
        return rh_crash_install(crashes.path, session)
    }

    /// Sets (nil: removes) a host-wide attribute recorded in crash files.
    public static func setAttribute(_ key: String, _ value: String?) {
        if let value { _ = rh_crash_set_attribute(key, value) } else { rh_crash_remove_attribute(key) }
    }

    /// Gives the calling thread an alternate signal stack, so a stack overflow there is
    /// still captured.
    @discardableResult
    public static func prepareThread() -> Bool { rh_crash_prepare_thread() }

    /// Registers an attachment path recorded in crash files.
    public static func addAttachment(path: String) { _ = rh_crash_add_attachment(path) }

    /// Crashes on purpose with `signal` (`reporthost crash`).
    public static func crash(_ signal: Int32) -> Never {
        rh_crash_now(signal)
        fatalError("signal \(signal) did not end the process")
    }
}
