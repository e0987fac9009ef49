import FoundationEssentials
import HostSupport

/// A crash as a person reads it (`show`, the inbox): the signal line, then each thread's
/// stack, one frame a line.
package enum CrashText {
    /// The signal line, then each thread's stack one frame per line, the crashed thread first:
    /// `#0 zq_fn (file.c:12) in libx.so+0x1139`, as gdb's `bt` reads.
    package static func lines(_ crash: JSONValue) -> [String] {
        let name = crash["signal_name"]?.stringValue ?? "?"
        let code = (crash["code_name"]?.stringValue ?? crash["code"]?.intValue.map { "code \($0)" }).map { " (\($0))" } ?? ""
        let cause: String
        if crash["abort"]?.boolValue == true {
            cause = ": abort() called"
        } else if let sender = crash["sender_pid"]?.intValue {
            cause = " sent by pid \(sender)\(crash["sender_uid"]?.intValue.map { " (uid \($0))" } ?? "")"
        } else {
            cause = crash["address"]?.stringValue.map { " at \($0)" } ?? ""
        }
        // Signal 0: a stack taken from a running thread (an app hang, SPEC B-4), not a crash.
        let hung = crash["signal"]?.intValue == 0
        var lines = [hung ? "stack of the hung thread (taken from outside; it went on running):" : "crash: SIG\(name)\(code)\(cause)"]
        let main = crash["main_thread"]?.stringValue ?? ""
        let threads = crash["threads"]?.objectValue ?? []
        for (id, thread) in threads.filter({ $0.0 == main }) + threads.filter({ $0.0 != main }) {
            lines.append("thread \(id)\(id == main ? (hung ? " (hung)" : " (crashed)") : ""):")
            let frames = thread["frames"]?.arrayValue ?? thread["stack"]?.arrayValue ?? []
            lines += frames.enumerated().map { index, frame in "  #\(index) \(frameText(frame))" }
        }
        return lines
    }

    /// `zq_fn (file.c:12) in libx.so+0x1139`; the address where nothing names the function.
    static func frameText(_ frame: JSONValue) -> String {
        let module = (frame["module"] ?? frame["library"])?.stringValue.map { path in
            "in \(URL(fileURLWithPath: path).lastPathComponent)+\(frame["offset"]?.stringValue ?? "?")"
        } ?? "in ?"
        guard let function = frame["function"]?.stringValue else { return "\(frame["address"]?.stringValue ?? "?") \(module)" }
        let source = frame["file"]?.stringValue.map { file in
            " (\(URL(fileURLWithPath: file).lastPathComponent)\(frame["line"]?.intValue.map { ":\($0)" } ?? ""))"
        } ?? ""
        let inlined = frame["inlined"]?.boolValue == true ? " [inlined]" : ""
        return "\(function)\(source)\(inlined) \(module)"
    }

    /// A crash payload in the stored document's shape, made from a report in Backtrace's
    /// submission format (`threads`, `mainThread`, `sourceCode`, `annotations["Crash"]`), so that
    /// what a server received reads as `show` reads it; nil when the report has no threads.
    package static func payload(fromSubmission report: JSONValue) -> JSONValue? {
        guard let threads = report["threads"]?.objectValue, !threads.isEmpty else { return nil }
        let sources = report["sourceCode"]
        var fields = (report["annotations"]?["Crash"]?.objectValue ?? []).filter { $0.0 != "threads" && $0.0 != "main_thread" }
        fields.append(("main_thread", report["mainThread"] ?? .null))
        fields.append(("threads", .object(threads.map { id, thread in
            let frames: [JSONValue] = (thread["stack"]?.arrayValue ?? []).map { frame in
                var shaped: [(String, JSONValue)] = [("address", frame["address"] ?? .null)]
                if let library = frame["library"] { shaped.append(("module", library)) }
                if let offset = frame["offset"] { shaped.append(("offset", offset)) }
                if let id = frame["debug_identifier"] { shaped.append(("build_id", id)) }
                if let function = frame["funcName"] { shaped.append(("function", function)) }
                if let key = frame["sourceCode"]?.stringValue, let path = sources?[key]?["path"] { shaped.append(("file", path)) }
                let line = frame["line"]?.intValue ?? frame["line"]?.stringValue.flatMap { Int($0) }
                if let line { shaped.append(("line", .int(line))) }
                return .object(shaped)
            }
            return (id, .object([("name", thread["name"] ?? .null), ("frames", .array(frames))]))
        })))
        return .object(fields)
    }
}
