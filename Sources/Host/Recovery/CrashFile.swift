import Foundation

/// A crash file written by the signal-safe writer (`Sources/CrashCapture`), parsed.
/// A torn file (the writer died too) yields what it holds; `complete` says whether the
/// writer reached its end marker.
package struct CrashFile: Sendable {
    package var path: String
    package var session: String?
    package var signal: Int32
    package var code: Int64
    package var address: String
    package var thread: Int64
    package var time: Date
    package var registers: [(String, String)] = []
    package var frames: [UInt64] = []
    package var modules: [(start: UInt64, end: UInt64, path: String)] = []
    package var attributes: [String: String] = [:]
    package var attachmentPaths: [String] = []
    /// The plugin whose call the crashed thread was in, if any (SPEC I: crashed_in_plugin).
    package var plugin: PluginCall?
    package var complete = false

    /// A plugin call named by the writer: the plugin's real path, the sha256 of its file,
    /// its name (absent when it crashed before its entry returned) and the ABI member.
    package struct PluginCall: Sendable, Equatable {
        package var path: String
        package var digest: String
        package var name: String?
        package var callback: String

        package init(path: String, digest: String, name: String?, callback: String) {
            self.path = path
            self.digest = digest
            self.name = name
            self.callback = callback
        }

        /// The name reports use: the plugin's own, or its file name before it had one.
        package var displayName: String { name ?? URL(fileURLWithPath: path).lastPathComponent }
    }

    package static let signalNames: [Int32: String] = [
        SIGSEGV: "SEGV", SIGBUS: "BUS", SIGILL: "ILL", SIGFPE: "FPE", SIGABRT: "ABRT", SIGTRAP: "TRAP",
    ]

    /// The largest crash file read (the writer's own output stays far below).
    package static let maxBytes = 4 << 20
    /// What is read of each list at most: the writer's own limits, with room to spare. A
    /// crafted file cannot make recovery copy thousands of files or search for minutes.
    package static let maxFrames = 512
    package static let maxModules = 4096
    package static let maxAttachments = 16

    /// `attachment` lines past `maxAttachments`, not read.
    package var ignoredAttachments = 0

    /// Parses the file at `path`; nil when it is not a crash file at all.
    package init?(path: String, modifiedAt fallbackTime: Date) {
        guard case .success(let crash) = Self.read(path, modifiedAt: fallbackTime) else { return nil }
        self = crash
    }

    /// Reads and parses the file at `path`, or says why it cannot be read as a crash file.
    package static func read(_ path: String, modifiedAt fallbackTime: Date) -> Result<CrashFile, Rejection> {
        switch BoundedFile.read(path, limit: maxBytes) {
        case .failure(let failure): return .failure(Rejection(reason: failure.description))
        case .success(let data):
            guard let crash = CrashFile(path: path, data: data, modifiedAt: fallbackTime) else {
                return .failure(Rejection(reason: "no `reporthost-crash 1` header"))
            }
            return .success(crash)
        }
    }

    /// Why a file in `crashes/` is not read as a crash file.
    package struct Rejection: Error, Equatable, Sendable {
        package var reason: String
    }

    /// Parses crash-file text; nil when it does not start with the crash-file header. Any
    /// other line may be missing, repeated, garbled or out of range: what cannot be read is
    /// left at its default.
    package init?(path: String, data: Data, modifiedAt fileTime: Date) {
        // The file's own time stands in for a missing `time` line: only when plausible too.
        let fallbackTime = Self.plausible(fileTime) ?? Date()
        let text = String(decoding: data, as: UTF8.self)
        let lines = text.split(omittingEmptySubsequences: true) { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }
        guard lines.first == "reporthost-crash 1" else { return nil }
        self.path = path
        signal = 0
        code = 0
        address = "0x0"
        thread = 0
        time = fallbackTime
        var pluginFields: [String: String] = [:]
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
            case "time": time = Self.plausibleTime(value) ?? fallbackTime
            case "register":
                let pair = value.split(separator: " ").map(String.init)
                if pair.count == 2 { registers.append((pair[0], pair[1])) }
            case "frame": if frames.count < Self.maxFrames, let address = Self.hex(value) { frames.append(address) }
            case "module":
                let fields = value.split(separator: " ", maxSplits: 2).map(String.init)
                if modules.count < Self.maxModules, fields.count == 3, let start = Self.hex(fields[0]), let end = Self.hex(fields[1]) {
                    modules.append((start, end, fields[2]))
                }
            case "attribute":
                if let equals = value.firstIndex(of: "=") {
                    attributes[String(value[..<equals])] = String(value[value.index(after: equals)...])
                }
            case "attachment":
                if attachmentPaths.count < Self.maxAttachments { attachmentPaths.append(value) } else { ignoredAttachments += 1 }
            case "plugin_path", "plugin_digest", "plugin_name", "callback": pluginFields[key] = value
            case "end": complete = true
            default: break
            }
        }
        if let path = pluginFields["plugin_path"], let digest = pluginFields["plugin_digest"],
            let callback = pluginFields["callback"], !path.isEmpty, !callback.isEmpty
        {
            plugin = PluginCall(path: path, digest: digest, name: pluginFields["plugin_name"], callback: callback)
        }
    }

    /// A `time` line as a date, when it is a plausible crash time: after 2000 and no later
    /// than a day from now (a clock set far ahead, or a garbled file, must not make a
    /// record whose dates cannot be stored).
    static func plausibleTime(_ text: String) -> Date? {
        guard let seconds = Int64(text) else { return nil }
        let latest = Int64(Date().timeIntervalSince1970) + 86_400
        guard seconds >= 946_684_800, seconds <= latest else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// `date` when it is a plausible crash time (as for a `time` line).
    package static func plausible(_ date: Date) -> Date? {
        Int64(exactly: date.timeIntervalSince1970.rounded(.down)).flatMap { plausibleTime(String($0)) }
    }

    /// The instruction pointer at the fault, when the file has it.
    package var programCounter: UInt64? {
        registers.first { $0.0 == "rip" || $0.0 == "pc" }.flatMap { Self.hex($0.1) }
    }

    /// The module (from the file's module map) holding `address`.
    package func module(containing address: UInt64) -> String? {
        modules.first { $0.start <= address && address < $0.end }?.path
    }

    /// The module that holds the faulting instruction.
    package var faultModule: String? { programCounter.flatMap(module(containing:)) }

    /// Whether the plugin named by `plugin` is the one at fault, not the host code it called
    /// back into: walking the stack from the faulting instruction outwards, the first frame
    /// inside either the plugin's file or `hostModules` decides (system libraries it passes,
    /// such as libc's `strlen` called with a bad pointer, decide nothing). Without a usable
    /// stack the plugin is blamed: its call was running.
    package func blamesPlugin(hostModules: Set<String>) -> Bool {
        guard let plugin else { return false }
        // Nothing but the plugin's own constructors (and the libraries it pulls in) runs under
        // this mark, and the module map taken before the load does not hold the plugin yet.
        if plugin.callback == "dlopen" { return true }
        var stack = frames
        if let pc = programCounter {
            // Frames before the faulting instruction's own are the signal handler's.
            if let index = stack.firstIndex(of: pc) { stack.removeFirst(index) } else { stack.insert(pc, at: 0) }
        }
        for address in stack {
            guard let module = module(containing: address) else { continue }
            if module == plugin.path { return true }
            if hostModules.contains(module) { return false }
        }
        return true
    }

    static func hex(_ text: String) -> UInt64? {
        UInt64(text.hasPrefix("0x") ? String(text.dropFirst(2)) : text, radix: 16)
    }

    package var signalName: String { Self.signalNames[signal] ?? "signal \(signal)" }

    /// The crash payload kept with the record and sent as Backtrace's `threads`.
    package var payload: JSONValue {
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
            ("fault_module", .optional(faultModule)),
            ("registers", .object(registers.map { ($0.0, .string($0.1)) })),
            ("threads", .object([(String(thread), .object([("name", .string("crashed")), ("stack", .array(stack))]))])),
            ("main_thread", .string(String(thread))),
            ("modules", .array(modules.map { .object([("start", .string("0x" + String($0.start, radix: 16))),
                                                      ("end", .string("0x" + String($0.end, radix: 16))),
                                                      ("path", .string($0.path))]) })),
        ])
    }
}
