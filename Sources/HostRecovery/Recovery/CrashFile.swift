import FoundationEssentials
import Glibc
import HostModel
import HostSupport
import HostPlugins
import HostStore

/// A crash file written by the signal-safe writer (`Sources/CrashCapture`), parsed.
/// A torn file (the writer died too) yields what it holds; `complete` says whether the
/// writer reached its end marker.
package struct CrashFile: Sendable {
    package var path: String
    package var session: String?
    package var signal: Int32
    /// `si_code`, signed (older files wrote it unsigned: read back as signed).
    package var code: Int64
    /// The address a fault concerns ("0x0" for a sent signal).
    package var address: String
    /// Who sent a sent signal (`kill`, `abort`, …): nil for a fault.
    package var senderPID: Int32?
    package var senderUID: UInt32?
    package var thread: Int64
    package var time: Date
    package var registers: [(String, String)] = []
    package var frames: [UInt64] = []
    /// Every ELF object mapped at the crash (read from /proc/self/maps by the writer), or the
    /// map the host last took when /proc could not be read.
    package var modules: [Module] = []
    package var attributes: [String: String] = [:]
    package var attachmentPaths: [String] = []
    /// The plugin whose call the crashed thread was in, if any (SPEC I: crashed_in_plugin).
    package var plugin: PluginCall?
    package var complete = false

    /// One mapped ELF object: where its header was mapped (`start`) to the end of its last
    /// mapping, and its GNU build id (lowercase hex) read from the mapped notes.
    package struct Module: Sendable, Equatable {
        package var start: UInt64
        package var end: UInt64
        package var path: String
        package var buildID: String?

        package init(start: UInt64, end: UInt64, path: String, buildID: String? = nil) {
            self.start = start
            self.end = end
            self.path = path
            self.buildID = buildID
        }
    }

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
        package var displayName: String { name ?? LocalPaths.fileName(path) }
    }

    package static let signalNames: [Int32: String] = [
        SIGSEGV: "SEGV", SIGBUS: "BUS", SIGILL: "ILL", SIGFPE: "FPE", SIGABRT: "ABRT", SIGTRAP: "TRAP",
    ]

    /// Whether the writer named the file at `path` as written inside a plugin call
    /// (`*.plugin.crash`, or `*.plugin.crash.partial` when it died writing).
    package static func namesPluginCall(_ path: String) -> Bool {
        path.hasSuffix(".plugin.crash") || path.hasSuffix(".plugin.crash.partial")
    }

    /// The process that writes (or wrote) the crash file named `name`: the writer names it
    /// `<session>-<time>-<pid>-<thread>-<n>.crash` (`.plugin.crash`, `.partial` while it
    /// writes). nil for a name of another shape.
    package static func writerPID(ofName name: String) -> pid_t? {
        var stem = Substring(name)
        for suffix in [".partial", ".crash", ".plugin"] where stem.hasSuffix(suffix) { stem = stem.dropLast(suffix.count) }
        let fields = stem.split(separator: "-")
        guard fields.count >= 5, fields.suffix(4).allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
            let pid = pid_t(fields[fields.count - 3]), pid > 0
        else { return nil }
        return pid
    }

    /// When the writer named the file `name` (Unix seconds, its `<time>` field); nil for a
    /// name of another shape.
    package static func writerTime(ofName name: String) -> Int64? {
        var stem = Substring(name)
        for suffix in [".partial", ".crash", ".plugin"] where stem.hasSuffix(suffix) { stem = stem.dropLast(suffix.count) }
        let fields = stem.split(separator: "-")
        guard fields.count >= 5, writerPID(ofName: name) != nil else { return nil }
        return Int64(fields[fields.count - 4])
    }

    /// Whether `name` is a crash file its writer may still be writing: a `.partial` whose
    /// process is alive (a secondary, a forked child, another `run`). Taken only once the
    /// writer is gone: read now, it would be stored cut short, and stored again once renamed.
    package static func isBeingWritten(_ name: String, system: SystemCalls) -> Bool {
        guard name.hasSuffix(".partial"), let pid = writerPID(ofName: name) else { return false }
        return system.kill(pid, 0) == 0 || errno == EPERM
    }

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
    package init?(path: String, modifiedAt fallbackTime: Date, system: SystemCalls) {
        guard case .success(let crash) = Self.read(path, modifiedAt: fallbackTime, system: system) else { return nil }
        self = crash
    }

    /// Reads and parses the file at `path`, or says why it cannot be read as a crash file.
    package static func read(_ path: String, modifiedAt fallbackTime: Date, system: SystemCalls) -> Result<CrashFile, Rejection> {
        switch BoundedFile.read(path, limit: maxBytes, system: system) {
        case .failure(.system(_, ENOENT)): return .failure(Rejection(reason: "gone", vanished: true))
        // A failure of the moment (an I/O error, no descriptor left, a signal): the file is
        // not condemned for it, the next launch reads it again.
        case .failure(.system(let call, let number)) where [EIO, EINTR, EMFILE, ENFILE, ENOMEM, EAGAIN, ENOSPC].contains(number):
            return .failure(Rejection(reason: BoundedFile.Failure.system(call: call, errno: number).description, transient: true))
        case .failure(let failure): return .failure(Rejection(reason: failure.description))
        case .success(let data):
            guard let crash = CrashFile(path: path, data: data, modifiedAt: fallbackTime, now: system.now()) else {
                return .failure(Rejection(reason: "no `reporthost-crash 1` header"))
            }
            return .success(crash)
        }
    }

    /// Why a file in `crashes/` is not read as a crash file.
    package struct Rejection: Error, Equatable, Sendable {
        package var reason: String
        /// The file went between listing and reading (its writer renamed it, another launch
        /// took it): nothing to report, nothing to set aside.
        package var vanished = false
        /// It could not be read this time (see `read`): left where it is for the next launch.
        package var transient = false
    }

    /// Parses crash-file text; nil when its first non-empty line is not the crash-file header.
    /// Any other line may be missing, repeated, garbled or out of range: what cannot be read is
    /// left at its default.
    /// - Parameter now: the wall clock's time, for what is a plausible crash time.
    package init?(path: String, data: Data, modifiedAt fileTime: Date, now: Date) {
        // The file's own time stands in for a missing `time` line: only when plausible too.
        let fallbackTime = Self.plausible(fileTime, now: now) ?? now
        self.path = path
        signal = 0
        code = 0
        address = "0x0"
        thread = 0
        time = fallbackTime
        var pluginFields: [String: String] = [:]
        // Lines end at "\n" or "\r\n" and nowhere else, a lone CR included: the writer encodes
        // every control byte of a value (%XX), so a value can neither end a line nor start a
        // field. Read as bytes, a String made only for a value kept as text: a backlog holds
        // thousands of files of a hundred lines, most of them module and build id lines.
        let isCrashFile = data.withUnsafeBytes { bytes -> Bool in
            var header = false
            var start = 0
            while start < bytes.count {
                let end = bytes.offset(of: UInt8(ascii: "\n"), from: start) ?? bytes.count
                let stop = end > start && bytes[end - 1] == UInt8(ascii: "\r") ? end - 1 : end
                if stop > start {
                    let line = UnsafeRawBufferPointer(rebasing: bytes[start..<stop])
                    if header {
                        read(line, pluginFields: &pluginFields, now: now, fallbackTime: fallbackTime)
                    } else {
                        guard line.holds("reporthost-crash 1") else { return false }
                        header = true
                    }
                }
                start = end + 1
            }
            return header
        }
        guard isCrashFile else { return nil }
        if let path = pluginFields["plugin_path"], let digest = pluginFields["plugin_digest"],
            let callback = pluginFields["callback"], !path.isEmpty, !callback.isEmpty
        {
            plugin = PluginCall(path: path, digest: digest, name: pluginFields["plugin_name"], callback: callback)
        }
    }

    /// A `time` line as a date, when it is a plausible crash time: after 2000 and no later
    /// than a day from now (a clock set far ahead, or a garbled file, must not make a
    /// record whose dates cannot be stored).
    static func plausibleTime(_ text: String, now: Date) -> Date? {
        guard let seconds = Int64(text) else { return nil }
        let latest = Int64(now.timeIntervalSince1970) + 86_400
        guard seconds >= 946_684_800, seconds <= latest else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// `date` when it is a plausible crash time (as for a `time` line).
    package static func plausible(_ date: Date, now: Date) -> Date? {
        Int64(exactly: date.timeIntervalSince1970.rounded(.down)).flatMap { plausibleTime(String($0), now: now) }
    }

    /// The instruction pointer at the fault, when the file has it.
    package var programCounter: UInt64? {
        registers.first { $0.0 == "rip" || $0.0 == "pc" }.flatMap { Self.hex($0.1) }
    }

    /// The module (from the file's module map) holding `address`.
    package func module(containing address: UInt64) -> String? { object(containing: address)?.path }

    package func object(containing address: UInt64) -> Module? {
        modules.first { $0.start <= address && address < $0.end }
    }

    /// The name of `code` (`SEGV_MAPERR`, `SI_USER`, …), when it has one.
    package var codeName: String? { SignalCode.name(code, signal: signal) }

    /// Whether the signal was sent (`kill`, `abort`, …) rather than raised by a fault.
    package var wasSent: Bool { SignalCode.isSent(code) }

    /// `abort()`: SIGABRT the process sent itself.
    package var isAbort: Bool { signal == SIGABRT && wasSent && senderPID.map { $0 == processID } ?? false }

    /// The crashed process, from its `pid` line.
    package var processID: Int32?

    /// The summary a person reads first: what the signal was, and where a fault was or who
    /// sent the signal, never the sender read as an address.
    package var summary: String {
        let code = codeName ?? "code \(self.code)"
        if isAbort { return "\(signalName) (abort() called, signal \(signal))" }
        if wasSent { return "\(signalName) (\(code), signal \(signal)) sent by pid \(senderPID.map(String.init) ?? "?")" }
        let place = faultModule.map { " in \(LocalPaths.fileName($0))" } ?? ""
        return "\(signalName) (\(code), signal \(signal)) at \(address)\(place)"
    }

    /// The crashed thread's stack from the faulting instruction outwards: frames before it
    /// are the signal handler's own (glibc's backtrace() starts there).
    package var crashedStack: [UInt64] {
        guard let pc = programCounter else { return frames }
        if let index = frames.firstIndex(of: pc) { return Array(frames[index...]) }
        return [pc] + frames
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
        for address in crashedStack {
            guard let module = module(containing: address) else { continue }
            if module == plugin.path { return true }
            if hostModules.contains(module) { return false }
        }
        return true
    }

    package var signalName: String { Self.signalNames[signal] ?? "signal \(signal)" }
}

extension CrashFile {
    /// What makes two crashes the same one (SPEC B-3): the signal, and the top frames of the
    /// crashed thread as module build id (its path when it has none) and offset, so the same
    /// fault under another address layout matches. nil when no top frame lies in a known
    /// module: such a crash is never merged.
    package var fingerprint: String? {
        var parts = ["SIG\(signal)"]
        for address in frames.prefix(Self.fingerprintFrames) {
            guard let module = modules.first(where: { $0.start <= address && address < $0.end }) else { continue }
            parts.append("\(module.buildID ?? module.path)+\(String(address - module.start, radix: 16))")
        }
        return parts.count > 1 ? parts.joined(separator: " ") : nil
    }

    /// How many top frames `fingerprint` compares.
    package static let fingerprintFrames = 5
}
