import EmbedCalls
import FoundationEssentials
import Glibc
import HostSupport

/// The stacks of hung threads, taken from outside by `reporthost-stack` within a deadline
/// (SPEC B-4): every thread of one watchdog pass in one run of the helper, at most
/// `HangStacks.threadsMax` of them.
struct HangStacks {
    /// A watched thread: its id, and its start time (field 22 of its `/proc` stat), which tells
    /// the thread from a later one given the same id.
    struct Thread: Hashable {
        var id: Int32
        var startTime: Int64
    }

    /// The stack lines of each thread that stopped (with the modules' lines), by thread id.
    var stacks: [Int32: String] = [:]
    /// Why a thread has no stack, by thread id.
    var missing: [Int32: String] = [:]

    /// How many threads' stacks one report carries (the helper's `RH_STACK_THREADS_MAX`).
    static let threadsMax = 16
    /// How long the host waits for the helper before it kills it: the helper's own deadline
    /// (`RH_STACK_DEADLINE_MS`, 1 s) and the time to write what it found.
    static let helperDeadlineMs = 1_500

    /// `thread`'s start time in this process, nil when no such thread lives.
    static func startTime(of thread: Int32) -> Int64? {
        guard case .success(let data) = BoundedFile.read("/proc/self/task/\(thread)/stat", limit: 4_096, system: embedSystem),
            let close = data.lastIndex(of: UInt8(ascii: ")"))
        else { return nil }
        // Fields from the state (3) on, after the name's last ')': the start time is field 22.
        let fields = data[(close + 1)...].split(separator: UInt8(ascii: " "))
        return fields.count > 19 ? Int64(String(decoding: fields[19], as: UTF8.self)) : nil
    }

    /// Runs the helper for `threads` of this process. `started` gets the helper's pid as soon
    /// as it runs (a stop kills it); the helper is killed past `helperDeadlineMs`.
    static func capture(_ threads: [Thread], helper: String, started: (pid_t) -> Void) -> HangStacks {
        var result = HangStacks()
        let arguments = [helper, String(getpid())] + threads.map { "\($0.id):\($0.startTime)" }
        let helperProcess: Subprocess
        switch Subprocess.spawn(arguments, captureOutput: true, captureErrors: true) {
        case .failure(let error):
            for thread in threads { result.missing[thread.id] = "\(helper) could not be started (\(error))" }
            return result
        case .success(let spawned): helperProcess = spawned
        }
        started(helperProcess.pid)
        // Yama (where it is on) lets only an allowed process trace this one; allowed for as
        // long as the helper runs, and no longer.
        _ = rh_embed_allow_tracer(helperProcess.pid)
        defer { _ = rh_embed_allow_tracer(0) }
        let (output, errors) = Self.read(helperProcess, deadline: SystemClock().now().advanced(byMilliseconds: helperDeadlineMs))
        let ending = helperProcess.wait()
        guard ending == .exited(0) else {
            let why = ending == .signalled(SIGKILL) ? "gave no stack within \(helperDeadlineMs) ms, or the host stopped" : "failed (\(ending))"
            let detail = errors.trimmed.isEmpty ? "" : ": \(errors.trimmed.prefix(300))"
            for thread in threads { result.missing[thread.id] = "\(helper) \(why)\(detail)" }
            return result
        }
        result.parse(output, threads: threads)
        return result
    }

    /// Reads the helper's output and errors to their end, or kills it at `deadline`.
    private static func read(_ helperProcess: Subprocess, deadline: HostInstant) -> (output: String, errors: String) {
        var kept: [Int32: Data] = [:]
        var open = [helperProcess.output, helperProcess.errors].compactMap { $0 }
        defer { [helperProcess.output, helperProcess.errors].compactMap { $0 }.forEach { close($0) } }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while !open.isEmpty {
            let left = deadline.milliseconds(since: SystemClock().now())
            var ready = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            guard left > 0, poll(&ready, nfds_t(ready.count), Int32(clamping: left)) >= 0 || errno == EINTR else { break }
            for entry in ready where entry.revents != 0 {
                let count = buffer.withUnsafeMutableBytes { Glibc.read(entry.fd, $0.baseAddress, $0.count) }
                if count > 0 {
                    if kept[entry.fd, default: Data()].count < 1 << 20 { kept[entry.fd, default: Data()].append(contentsOf: buffer[0..<count]) }
                } else {
                    open.removeAll { $0 == entry.fd }
                }
            }
        }
        if !open.isEmpty { kill(helperProcess.pid, SIGKILL) }
        let text = { (fd: Int32?) in fd.flatMap { kept[$0] }.map { String(decoding: $0, as: UTF8.self) } ?? "" }
        return (text(helperProcess.output), text(helperProcess.errors))
    }

    /// Splits the helper's lines by thread (see `rh_stack_main`); the modules' lines go with
    /// every stack.
    private mutating func parse(_ output: String, threads: [Thread]) {
        var current: Int32?
        var lines: [Int32: [Substring]] = [:]
        var modules: [Substring] = []
        for line in output.split(separator: "\n") {
            let words = line.split(separator: " ", maxSplits: 2)
            let thread = words.count > 1 ? Int32(words[1]) : nil
            switch (words.first, thread) {
            case ("thread_stack", let thread?): current = thread
            case ("thread_gone", let thread?): missing[thread] = "the thread ended"
            case ("thread_unstopped", let thread?): missing[thread] = words.count > 2 ? String(words[2]) : "it did not stop"
            case ("thread_skipped", let thread?): missing[thread] = "past the first \(Self.threadsMax) threads of the hang"
            case ("modules_at_crash", _):
                current = nil
                modules.append(line)
            default:
                if let current { lines[current, default: []].append(line) } else if !modules.isEmpty { modules.append(line) }
            }
        }
        for (thread, stack) in lines { stacks[thread] = (stack + modules).joined(separator: "\n") + "\n" }
        for thread in threads where stacks[thread.id] == nil && missing[thread.id] == nil { missing[thread.id] = "the helper said nothing of it" }
    }
}
