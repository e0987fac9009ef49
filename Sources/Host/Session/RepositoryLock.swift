import Foundation

/// The repository lock (SPEC I-2): an `flock` on `reporthost.lock`, so a killed host never
/// leaves a stale lock. Held until `release()` or the end of this object.
///
/// # Thread safety
/// The descriptor is behind a `Locked`: released once, from any thread.
public final class RepositoryLock: Sendable {
    public let path: String
    private let descriptor: Locked<Int32?>

    /// How long a launch waits for another process's lock (SPEC I-2).
    public static let defaultWaitMs = 10_000

    /// Takes the lock, waiting up to `waitMilliseconds`.
    public init(folder: URL, waitMilliseconds: Int = defaultWaitMs) throws(StorageError) {
        path = folder.appendingPathComponent(Repository.lockName).path
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw StorageError(path: path, message: "cannot open the lock file (\(String(cString: strerror(errno))))")
        }
        let wait = max(0, waitMilliseconds)
        let clock = SystemClock()
        let deadline = clock.now().advanced(byMilliseconds: wait)
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR, clock.now() < deadline else {
                close(fd)
                throw StorageError(path: path, message: "another reporthost holds the repository lock (waited \(wait) ms)")
            }
            usleep(20_000)  // flock has no timed wait; poll briefly
        }
        descriptor = Locked(fd)
    }

    /// Gives the lock up (closing its descriptor); later calls do nothing.
    public func release() {
        if let fd = descriptor.withLock({ $0.take() }) { close(fd) }
    }

    deinit { release() }
}
