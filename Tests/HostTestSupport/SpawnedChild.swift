import Foundation
import Glibc
import Host
import HostSupport

/// A child process a test talks to while it runs: its standard input and output are sockets
/// (read a line, close the input), its standard error goes to a file; it may start with
/// signals blocked. Spawned with `posix_spawn` (never `fork`), with `ChildProcess.environment`.
///
/// # Thread safety
/// One test thread uses it.
package final class SpawnedChild {
    package let pid: pid_t
    private let output: Int32
    private var input: Int32
    private let logFile: URL
    private var status: Int32?

    /// - Parameter blocking: signals blocked in the child from its start (the mask a parent
    ///   spawning from a libdispatch worker thread hands down).
    package init(_ words: [String], log: URL, blocking signals: [Int32] = []) throws {
        guard let program = words.first else { throw POSIXError(.EINVAL) }
        // Close-on-exec from the start: tests run in parallel, and an end another test's child
        // inherited would keep this child's input open (it would never see end of file).
        var outEnds: [Int32] = [-1, -1]
        var inEnds: [Int32] = [-1, -1]
        // Socket pairs, because the Glibc module has no pipe2.
        let kind = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        guard socketpair(AF_UNIX, kind, 0, &outEnds) == 0 else { throw POSIXError(.EMFILE) }
        guard socketpair(AF_UNIX, kind, 0, &inEnds) == 0 else {
            outEnds.forEach { close($0) }
            throw POSIXError(.EMFILE)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, outEnds[1], STDOUT_FILENO)
        posix_spawn_file_actions_adddup2(&actions, inEnds[0], STDIN_FILENO)
        posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var mask = sigset_t()
        sigemptyset(&mask)
        for number in signals { sigaddset(&mask, number) }
        posix_spawnattr_setsigmask(&attributes, &mask)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))
        let argv = words.map { strdup($0) } + [nil]
        let envp = ChildProcess.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, program, &actions, &attributes, argv, envp)
        close(outEnds[1])
        close(inEnds[0])
        guard spawned == 0 else {
            close(outEnds[0])
            close(inEnds[1])
            throw POSIXError(POSIXErrorCode(rawValue: spawned) ?? .EINVAL)
        }
        self.pid = pid
        output = outEnds[0]
        input = inEnds[1]
        logFile = log
    }

    deinit {
        closeInput()
        close(output)
        if status == nil { Glibc.kill(pid, SIGKILL) }
        _ = wait()
    }

    /// One line of its standard output, without the newline (nil at end of file, or when no
    /// line came within `timeoutMs`: a hung child fails the test instead of hanging it).
    package func readLine(timeoutMs: Int = 60_000) -> String? {
        var line = Data()
        var byte: UInt8 = 0
        let clock = SystemClock()
        let deadline = clock.now().advanced(byMilliseconds: timeoutMs)
        while line.count < 4_096 {
            let left = deadline.milliseconds(since: clock.now())
            var ready = pollfd(fd: output, events: Int16(POLLIN), revents: 0)
            guard left > 0 else { return nil }
            let polled = poll(&ready, 1, Int32(clamping: left))
            if polled < 0 && errno == EINTR { continue }
            guard polled > 0 else { return nil }
            let count = read(output, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            guard count == 1 else { return line.isEmpty ? nil : String(decoding: line, as: UTF8.self) }
            if byte == UInt8(ascii: "\n") { break }
            line.append(byte)
        }
        return String(decoding: line, as: UTF8.self)
    }

    /// Closes its standard input (it reads end of file).
    package func closeInput() {
        guard input >= 0 else { return }
        close(input)
        input = -1
    }

    /// Waits for it to end: its exit status, or 128 + the signal that ended it.
    @discardableResult
    package func wait() -> Int32 {
        if let status { return status }
        var raw: Int32 = 0
        while waitpid(pid, &raw, 0) < 0 {
            guard errno == EINTR else { return -1 }
        }
        return ended(raw)
    }

    /// Whether it has not ended yet (reaped here once it has).
    package var isRunning: Bool {
        guard status == nil else { return false }
        var raw: Int32 = 0
        guard waitpid(pid, &raw, WNOHANG) == pid else { return true }
        _ = ended(raw)
        return false
    }

    /// Ends it with SIGKILL and reaps it.
    package func kill() {
        if status == nil { Glibc.kill(pid, SIGKILL) }
        wait()
    }

    private func ended(_ raw: Int32) -> Int32 {
        let ended = raw & 0x7f == 0 ? (raw >> 8) & 0xff : 128 + (raw & 0x7f)
        status = ended
        return ended
    }

    /// What it wrote to standard error so far.
    package var log: String { (try? String(contentsOf: logFile, encoding: .utf8)) ?? "" }
}
