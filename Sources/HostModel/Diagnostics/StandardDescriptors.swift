import Glibc
import HostSupport

/// Fds 0, 1 and 2 of a process that closed them. The next file, pipe or socket opened takes
/// the lowest free number, so without a placeholder the host's lock file would become an
/// embedding program's standard input. SQLite does the same for its own files.
package enum StandardDescriptors {
    /// Opens /dev/null (close-on-exec: the program's children still find them closed) on each
    /// of fds 0-2 that is closed, for the life of the process. Returns the ones it took.
    @discardableResult
    package static func holdClosed(system: SystemCalls) -> [Int32] {
        var held: [Int32] = []
        for fd in STDIN_FILENO...STDERR_FILENO where system.fcntl(fd, F_GETFD) == -1 && errno == EBADF {
            let placeholder = system.openRaw("/dev/null", O_RDWR | O_CLOEXEC)
            if placeholder == fd {
                held.append(fd)
            } else if placeholder >= 0 {
                system.close(placeholder)
            }
        }
        return held
    }
}

/// The process's limit on open descriptors (`ulimit -n`). Below a few dozen, libdispatch
/// cannot make the descriptors its queues need and stops the process with SIGILL, no message:
/// so a start raises the soft limit toward the hard one, and refuses with a clear error when
/// even that is too low.
package enum DescriptorLimit {
    /// What the host needs at least: SQLite (database, log, shared memory), the lock, a log
    /// file, plugins, four connections, libdispatch's own, and room for attachments.
    package static let minimum: rlim_t = 64

    /// Raises the soft limit to `minimum` when it is lower and the hard limit allows; an
    /// error (exit 1) saying what to change when it does not.
    package static func ensure(system: SystemCalls) throws(HostError) {
        var limit = rlimit()
        guard system.getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < minimum else { return }
        let raised = rlimit(rlim_cur: min(minimum, limit.rlim_max), rlim_max: limit.rlim_max)
        if raised.rlim_cur > limit.rlim_cur { var raised = raised; _ = system.setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) }
        guard raised.rlim_cur < minimum else { return }
        throw .runtime(
            "only \(limit.rlim_cur) open file descriptors are allowed (ulimit -n, hard limit \(limit.rlim_max)); "
                + "ReportHost needs at least \(minimum): raise the limit (ulimit -n \(minimum))")
    }
}
