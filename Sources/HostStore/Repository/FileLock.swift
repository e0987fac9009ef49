import Glibc
import HostModel
import HostSupport

/// An `flock` on a file, held until `release()` or the end of this object: a process that
/// dies never leaves a stale lock. The repository lock (SPEC I-2) and each session's
/// liveness lock are these.
///
/// # Thread safety
/// The descriptor is behind a `Locked`: released once, from any thread.
package final class FileLock: Sendable {
    package let path: String
    private let descriptor: Locked<Int32?>
    private let system: SystemCalls

    private init(path: String, descriptor: Int32, system: SystemCalls) {
        self.path = path
        self.descriptor = Locked(descriptor)
        self.system = system
    }

    /// Takes the lock on `path` (created if missing), waiting up to `waitMilliseconds` or until
    /// `giveUp` says so; nil when another process still holds it then.
    package static func take(
        _ path: String, waitMilliseconds: Int, system: SystemCalls, giveUp: () -> Bool = { false }
    ) throws(StorageError) -> FileLock? {
        let fd = system.openRaw(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw StorageError(path: path, message: "cannot open the lock file (\(String(cString: strerror(errno))))")
        }
        let clock = SystemClock()
        let deadline = clock.now().advanced(byMilliseconds: max(0, waitMilliseconds))
        while system.flock(fd, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR, clock.now() < deadline, !giveUp() else {
                system.close(fd)
                return nil
            }
            usleep(20_000)  // flock has no timed wait; poll briefly
        }
        // The holder names itself, so a process that finds the lock held can say who has it.
        let pid = Array("\(getpid())\n".utf8)
        if system.ftruncate(fd, 0) == 0 { _ = pid.withUnsafeBytes { system.pwrite(fd, $0.baseAddress, $0.count, 0) } }
        return FileLock(path: path, descriptor: fd, system: system)
    }

    /// The pid the holder of the lock on `path` wrote, while the lock is held.
    package static func holder(of path: String, system: SystemCalls) -> Int32? {
        guard isHeld(path, system: system) else { return nil }
        let fd = system.openRaw(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { system.close(fd) }
        var bytes = [UInt8](repeating: 0, count: 32)
        let count = bytes.withUnsafeMutableBytes { system.readRaw(fd, $0.baseAddress, $0.count) }
        return Int32(String(decoding: bytes.prefix(max(0, count)), as: UTF8.self).trimmed)
    }

    /// Whether some open file holds the lock on `path` now (false when the file is missing).
    package static func isHeld(_ path: String, system: SystemCalls) -> Bool {
        let fd = system.openRaw(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { system.close(fd) }
        guard system.flock(fd, LOCK_EX | LOCK_NB) == 0 else { return errno == EWOULDBLOCK }
        system.flock(fd, LOCK_UN)
        return false
    }

    /// Gives the lock up (closing its descriptor); later calls do nothing.
    package func release() {
        if let fd = descriptor.withLock({ $0.take() }) { system.close(fd) }
    }

    deinit { release() }
}
