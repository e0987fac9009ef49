import FoundationEssentials
import HostModel
import HostSupport
import HostPlugins
import HostStore

/// A running thread's stack taken from outside (an app hang, SPEC B-4) as the `crash` payload
/// of its report: the helper's lines in the crash file's format, read and symbolicated the
/// way a recovered crash is.
package enum CapturedStack {
    /// The payload of thread `thread` of process `pid` from `lines` (registers, frames,
    /// modules); nil when they hold no frame.
    package static func payload(lines: String, session: String, pid: Int32, thread: Int32, at time: Date) -> JSONValue? {
        let text = ["reporthost-crash 1", "session \(session)", "signal 0", "code 0", "thread \(thread)", "pid \(pid)",
                    "time \(Int(time.timeIntervalSince1970))"].joined(separator: "\n") + "\n" + lines + "end\n"
        guard let stack = CrashFile(path: "app-hang", data: Data(text.utf8), modifiedAt: time, now: time), !stack.frames.isEmpty else { return nil }
        return stack.payload(symbols: ElfSymbols(for: stack, cache: SymbolCache()))
    }

    /// One payload for several threads' stacks (`thread`, its name, its lines), the first
    /// the faulting thread: its fields, with every thread under `threads`, each by its name.
    package static func payload(stacks: [(thread: Int32, name: String, lines: String)], session: String, pid: Int32, at time: Date) -> JSONValue? {
        let payloads = stacks.compactMap { stack in
            payload(lines: stack.lines, session: session, pid: pid, thread: stack.thread, at: time).map { (stack, $0) }
        }
        guard case .object(var fields)? = payloads.first?.1 else { return nil }
        let threads = payloads.flatMap { stack, payload in
            (payload["threads"]?.objectValue ?? []).map { id, thread in
                (id, JSONValue.object((thread.objectValue ?? []).map { $0.0 == "name" ? ("name", .string(stack.name)) : $0 }))
            }
        }
        fields = fields.map { $0.0 == "threads" ? ("threads", .object(threads)) : $0 }
        return .object(fields)
    }
}
