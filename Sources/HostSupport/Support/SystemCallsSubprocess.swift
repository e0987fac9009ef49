import Glibc

/// A helper program the host's tools run (`nm` for `check`, a check's own child process, the
/// demo's crashing child), started with `posix_spawnp` (never `fork`, which would copy the
/// host's threads' locks). Its standard input is /dev/null; its standard output and error are
/// each a pipe the caller reads, or /dev/null. It inherits no descriptor above 2, every
/// signal is at its default and none is blocked (the CLI ignores SIGPIPE: a child must not).
///
/// The caller reads the pipes it asked for to their end (`SystemCalls.drain`), closes them,
/// and reaps the child with `wait` exactly once.
package struct Subprocess: Sendable {
    package let pid: pid_t
    /// The read end of its standard output, when captured.
    package let output: Int32?
    /// The read end of its standard error, when captured.
    package let errors: Int32?

    /// A child started otherwise (`spawnp` with actions of the caller's), to wait for.
    package init(pid: pid_t, output: Int32? = nil, errors: Int32? = nil) {
        self.pid = pid
        self.output = output
        self.errors = errors
    }

    /// Starts `arguments[0]` (looked up in PATH when it has no slash) with `arguments`, in
    /// `environment` (nil: the host's own).
    package static func spawn(
        _ arguments: [String], environment: [String: String]? = nil, captureOutput: Bool = false, captureErrors: Bool = false
    ) -> Result<Subprocess, SystemError> {
        var output: [Int32] = [-1, -1]
        var errors: [Int32] = [-1, -1]
        func closeAll() { (output + errors).filter { $0 >= 0 }.forEach { close($0) } }
        if captureOutput, pipe(&output) != 0 { return .failure(SystemError(.spawn, errno)) }
        if captureErrors, pipe(&errors) != 0 {
            closeAll()
            return .failure(SystemError(.spawn, errno))
        }
        for end in output + errors where end >= 0 { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0)
        for (ends, target) in [(output, STDOUT_FILENO), (errors, STDERR_FILENO)] {
            if ends[1] >= 0 {
                posix_spawn_file_actions_adddup2(&actions, ends[1], target)
            } else {
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", O_WRONLY, 0)
            }
        }
        // Descriptors the host's libraries opened without close-on-exec stay in the host.
        for fd in Self.openDescriptors() where fd > STDERR_FILENO { posix_spawn_file_actions_addclose(&actions, fd) }
        let spawned = spawnp(arguments, environment: environment, actions: &actions)
        // The child has its own copies of the write ends (or none).
        for end in [output[1], errors[1]] where end >= 0 { close(end) }
        (output[1], errors[1]) = (-1, -1)
        if case .failure = spawned { closeAll() }
        return spawned.map { Subprocess(pid: $0, output: captureOutput ? output[0] : nil, errors: captureErrors ? errors[0] : nil) }
    }

    /// `posix_spawnp` of `arguments` with `actions`, every signal at its default and none
    /// blocked; `environment` nil: the host's own. The child's pid, or why it did not start.
    package static func spawnp(
        _ arguments: [String], environment: [String: String]?, actions: inout posix_spawn_file_actions_t
    ) -> Result<pid_t, SystemError> {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { (argv + (envp ?? [])).forEach { free($0) } }
        var pid = pid_t()
        let status = envp.map { posix_spawnp(&pid, arguments[0], &actions, &attributes, argv, $0) }
            ?? posix_spawnp(&pid, arguments[0], &actions, &attributes, argv, environ)
        return status == 0 ? .success(pid) : .failure(SystemError(.spawn, status))
    }

    /// The descriptors open in this process now (from /proc/self/fd), in the order listed.
    package static func openDescriptors() -> [Int32] {
        guard let folder = opendir("/proc/self/fd") else { return [] }
        defer { closedir(folder) }
        let own = dirfd(folder)
        var found: [Int32] = []
        while let entry = readdir(folder) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if let fd = Int32(name), fd != own { found.append(fd) }
        }
        return found
    }

    /// How a child ended.
    package enum Ending: Equatable, Sendable {
        case exited(Int32)
        case signalled(Int32)
    }

    /// Waits for the child to end and reaps it.
    package func wait() -> Ending {
        var raw: Int32 = 0
        while waitpid(pid, &raw, 0) < 0 {
            guard errno == EINTR else { return .exited(-1) }
        }
        let signal = raw & 0x7f
        return signal == 0 ? .exited((raw >> 8) & 0xff) : .signalled(signal)
    }
}
