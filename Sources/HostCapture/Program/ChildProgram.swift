import FoundationEssentials
import Glibc
import HostModel
import HostSupport
import SignalForwarding

/// A program `reporthost run` started: spawned with `posix_spawnp` (never `fork`), with the
/// default disposition for every signal and an empty signal mask (the CLI ignores SIGPIPE:
/// the child must not inherit that), standard input and output inherited, standard error
/// inherited or, with `--attach-output`, a pipe that `run` copies through.
package struct ChildProgram {
    package let pid: pid_t
    /// The read end of the standard-error pipe, when it is captured.
    package let standardError: Int32?
    /// The seam it was spawned and is waited for through.
    let system: SystemCalls

    /// - Parameter standardOutput: the CLI's real standard output (it pointed fd 1 at stderr
    ///   for itself); it becomes the child's fd 1.
    /// `sh -c 'kill -STOP $$; exec "$0" "$@"' PROGRAM ARGS…`: stops, then becomes PROGRAM
    /// (`run --capture=ptrace` seizes it while stopped, so none of the program runs untraced).
    package static let stoppedTrampoline = ["/bin/sh", "-c", #"kill -STOP $$; exec "$0" "$@""#]

    package static func spawn(
        _ words: [String], environment: [String: String], standardOutput: Int32, captureStandardError: Bool, system: SystemCalls
    ) throws -> ChildProgram {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, standardOutput, STDOUT_FILENO)
        var pipeEnds: [Int32] = [-1, -1]
        if captureStandardError {
            guard system.pipe(&pipeEnds) == 0 else {
                throw HostError.runtime("run: cannot make a pipe (\(String(cString: strerror(errno))))")
            }
            // Neither end leaks into the child beyond the dup2 onto its fd 2.
            for end in pipeEnds { _ = system.fcntl(end, F_SETFD, FD_CLOEXEC) }
            posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], STDERR_FILENO)
        }
        // The program gets what `run` inherited, nothing the host opened since (Foundation and
        // libdispatch open descriptors without close-on-exec), and a standard descriptor that
        // was closed when `run` started stays closed.
        for fd in InheritedDescriptors.openNow() where fd > STDERR_FILENO && !InheritedDescriptors.atStart.contains(fd) {
            posix_spawn_file_actions_addclose(&actions, fd)
        }
        for fd in STDIN_FILENO...STDERR_FILENO where !InheritedDescriptors.atStart.contains(fd) {
            posix_spawn_file_actions_addclose(&actions, fd)
        }
        let spawned = Subprocess.spawnp(words, environment: environment, actions: &actions)
        if captureStandardError { system.close(pipeEnds[1]) }
        switch spawned {
        case .success(let pid): return ChildProgram(pid: pid, standardError: captureStandardError ? pipeEnds[0] : nil, system: system)
        case .failure(let error):
            if captureStandardError { system.close(pipeEnds[0]) }
            throw HostError.runtime("run: cannot start '\(words[0])' (\(String(cString: strerror(error.errno))))")
        }
    }

    /// Waits for the child to end, without reaping it: its pid stays its own until `wait`.
    package func awaitExit() {
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0 {
            guard errno == EINTR else { return }
        }
    }

    /// Reaps the child: its exit status, or 128 + the signal that ended it.
    package func wait() -> (status: Int32, signal: Int32?) {
        var raw: Int32 = 0
        while system.waitpid(pid, &raw, 0) < 0 {
            guard errno == EINTR else { return (1, nil) }
        }
        return Self.decode(raw)
    }

    /// A wait status as `run` exits with it: the exit status, or 128 + the signal.
    package static func decode(_ raw: Int32) -> (status: Int32, signal: Int32?) {
        let signal = raw & 0x7f
        if signal == 0 { return ((raw >> 8) & 0xff, nil) }
        return (128 + signal, signal)
    }

    /// Copies the child's standard error to ours as it comes, keeping its last `limit` bytes
    /// and its last `lines` lines (with when each came: the report's breadcrumbs).
    package func teeStandardError(keeping limit: Int, lines: Int) -> OutputTail {
        let tail = OutputTail(limit: limit, lines: lines, system: system)
        if let fd = standardError {
            let started = startThread {
                nameCurrentThread("rh-run-stderr")
                tail.copy(from: fd)
            }
            // Without a thread (the system refused one) its standard error is not copied: the
            // pipe stays open, so the program blocks only after writing a pipe's worth (64 KB).
            if !started { tail.finished() }
        } else {
            tail.finished()
        }
        return tail
    }
}

/// The last bytes of a stream copied through: bounded, whatever the program writes.
///
/// # Thread safety
/// State is a `WaitableState`; one thread copies, another reads the tail.
package final class OutputTail: Sendable {
    private let state: WaitableState<(bytes: Data, done: Bool, lines: LineTail)>
    package let limit: Int
    /// The seam the copy reads, writes and stamps lines through.
    private let system: SystemCalls

    package init(limit: Int, lines: Int, system: SystemCalls) {
        self.limit = limit
        self.system = system
        state = WaitableState((Data(), false, LineTail(keep: lines)))
    }

    package func copy(from fd: Int32) {
        defer {
            system.close(fd)
            finished()
        }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            // `read` retries EINTR itself; an error or the end of the stream ends the copy.
            guard case .success(let count) = buffer.withUnsafeMutableBytes({ system.read(fd, into: $0) }), count > 0 else { return }
            // Ours may be closed or full: the child's output is still kept for the report.
            _ = buffer.withUnsafeBytes { system.writeAll(STDERR_FILENO, UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            let now = system.now()
            state.update { state in
                state.lines.append(buffer[0..<count], at: now)
                state.bytes.append(contentsOf: buffer[0..<count])
                // Trimmed when twice the limit: each byte is copied a bounded number of
                // times, however much the program writes.
                if state.bytes.count > 2 * limit { state.bytes = Data(state.bytes.suffix(limit)) }
            }
        }
    }

    package func finished() { state.update { $0.done = true } }

    /// The tail once the stream ended, or as it is after `waitingAtMostMs` (a grandchild may
    /// keep the stream open after the child ended).
    package func finish(waitingAtMostMs: Int) -> (bytes: Data, lines: [Breadcrumb]) {
        let clock = SystemClock()
        return state.wait(until: clock.now().advanced(byMilliseconds: waitingAtMostMs), clock: clock, for: { $0.done }) { state, _ in
            (Data(state.bytes.suffix(limit)), state.lines.breadcrumbs)
        }
    }
}

/// The last lines of a stream, each with the time it came, as `stderr` breadcrumbs
/// (SPEC B-1: `run` turns the watched program's standard error into breadcrumbs).
package struct LineTail: Sendable {
    package let keep: Int
    private var lines: [Breadcrumb] = []
    private var partial: [UInt8] = []
    private var partialSince: Date?
    private var count: UInt64 = 0

    package init(keep: Int) { self.keep = keep }

    /// The longest line kept whole; the rest of a longer one is cut (a breadcrumb holds a line).
    package static let lineMaxBytes = 1024

    package mutating func append(_ bytes: ArraySlice<UInt8>, at time: Date) {
        guard keep > 0 else { return }
        for byte in bytes {
            if byte == UInt8(ascii: "\n") {
                close(at: time)
            } else if partial.count < Self.lineMaxBytes {
                if partial.isEmpty { partialSince = time }
                partial.append(byte)
            }
        }
    }

    /// The lines kept, oldest first, with the unfinished last one.
    package var breadcrumbs: [Breadcrumb] {
        var copy = self
        // An unfinished line keeps the time it started (nothing is closed when there is none).
        if let since = partialSince { copy.close(at: since) }
        return copy.lines
    }

    private mutating func close(at time: Date) {
        defer {
            partial = []
            partialSince = nil
        }
        // A carriage return ends a line as written to a terminal.
        while partial.last == UInt8(ascii: "\r") { partial.removeLast() }
        guard !partial.isEmpty else { return }
        count += 1
        let text = String(decoding: ReportContent.completeCharacters(partial), as: UTF8.self)
        lines.append(Breadcrumb(sequence: count, timestamp: partialSince ?? time, level: .info, category: Breadcrumb.standardErrorCategory, message: text))
        if lines.count > keep { lines.removeFirst(lines.count - keep) }
    }
}

/// Passes signals sent to `run` on to the child (the handler is C: `Sources/SignalForwarding`).
/// A signal from the terminal (Ctrl-C) already reached the child, which is in the same
/// process group: only signals sent by a process (`kill`) are passed on. (One a process
/// sends to the whole group reaches the child directly and is passed on too.)
package enum SignalForwarding {
    package static let signals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT]

    /// Starts the child with `spawn` and passes signals on to it until `stop()`.
    ///
    /// The handlers go in first: a signal sent to `run` is never fatal to it (which would
    /// orphan the child), and one that comes before the child's pid is known, on whichever
    /// thread, is sent to the child once it is. The signals are also unblocked in the
    /// calling thread: `run` may inherit a mask that blocks them (a parent spawning from a
    /// libdispatch worker thread hands one down), and a signal blocked in every thread would
    /// stay pending for ever. Call it from the thread that then waits for the child.
    package static func start(_ spawn: () throws -> ChildProgram) rethrows -> ChildProgram {
        signals.withUnsafeBufferPointer { rh_forward_install($0.baseAddress, Int32($0.count)) }
        var set = sigset_t()
        sigemptyset(&set)
        for number in signals { sigaddset(&set, number) }
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        let child = try spawn()
        rh_forward_start(child.pid)
        return child
    }

    /// Stops passing signals on, and gives them back what they did before: call it once the
    /// child has ended and before it is reaped (its pid must not be reused meanwhile).
    /// Afterwards SIGINT or SIGTERM ends `run` itself (what it was recovering is finished by
    /// the next launch).
    package static func stop() { rh_forward_stop() }
}

/// The descriptors this process was started with. `main` records them before anything else
/// opens one, and holds closed standard descriptors with /dev/null (close-on-exec), so no pipe
/// or file the host opens later lands on fd 0, 1 or 2 and reaches a program as its input.
package enum InheritedDescriptors {
    nonisolated(unsafe) private(set) static var atStart: [Int32] = []

    /// Call first thing in `main`, on the main thread, before any other thread exists.
    package static func record(system: SystemCalls) {
        atStart = openNow()
        StandardDescriptors.holdClosed(system: system)
    }

    /// The descriptors open in this process now (from /proc/self/fd).
    package static func openNow() -> [Int32] { Subprocess.openDescriptors() }
}
