import Glibc

/// Fds 0, 1 and 2 of a process that closed them. The next file, pipe or socket opened takes
/// the lowest free number, so without a placeholder the host's lock file would become an
/// embedding program's standard input. SQLite does the same for its own files.
package enum StandardDescriptors {
    /// Opens /dev/null (close-on-exec: the program's children still find them closed) on each
    /// of fds 0-2 that is closed, for the life of the process. Returns the ones it took.
    @discardableResult
    package static func holdClosed() -> [Int32] {
        var held: [Int32] = []
        for fd in STDIN_FILENO...STDERR_FILENO where fcntl(fd, F_GETFD) == -1 && errno == EBADF {
            let placeholder = open("/dev/null", O_RDWR | O_CLOEXEC)
            if placeholder == fd {
                held.append(fd)
            } else if placeholder >= 0 {
                close(placeholder)
            }
        }
        return held
    }
}
