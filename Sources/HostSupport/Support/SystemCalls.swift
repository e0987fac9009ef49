import FoundationEssentials
import Glibc

/// An errno from a failed system call, with the call's name.
package struct SystemError: Error, Equatable, Sendable, CustomStringConvertible {
    package var call: SystemCall
    package var errno: Int32

    package init(_ call: SystemCall, _ errno: Int32) {
        self.call = call
        self.errno = errno
    }

    package var description: String { "\(call.rawValue) failed (\(String(cString: strerror(errno))))" }
}

/// The calls that go through the seam (and that a test can make fail).
package enum SystemCall: String, Sendable, CaseIterable {
    /// `open` creates when its flags have O_CREAT: only that can fail for space.
    case open, create, read, write, fsync, rename, unlink, truncate
    /// `mkdir` and `rmdir`.
    case folder
    /// `stat`, `lstat`, `fstat`, `access`, `realpath`, `statvfs`: what a file is.
    case inspect
    /// `close`.
    case close
    /// `flock`.
    case lock
    /// `chmod`, `lseek`, `fcntl`, `pipe`, `getrlimit`, `setrlimit`: a descriptor's or a
    /// file's settings.
    case control
    /// `dlopen` and `dlsym`.
    case load
    /// `mmap` and `munmap`: a file mapped into memory.
    case map
    /// `kill`, `waitpid`: other processes.
    case process
    /// Starting a helper program (`Subprocess`); never injected.
    case spawn
    /// A statement that writes the database: a plan fails it as SQLite does on a full disk
    /// (`REPORTHOST_FAULT=disk-full`). Never part of a sweep (SQLite's own calls are).
    case databaseWrite
    /// A libffi closure allocation: a plan refuses it as a system that forbids writable and
    /// executable memory does (`REPORTHOST_DENY_CLOSURES=1`). Never part of a sweep.
    case closure

    /// Whether a real call of this kind can fail with `errno` (a sweep fails only those):
    /// ENOSPC where the disk is written, EINTR where a signal can interrupt it, EIO where a
    /// disk is read or written.
    package func canFail(with errno: Int32) -> Bool {
        switch errno {
        case ENOSPC: [.create, .write, .fsync, .rename, .truncate, .folder].contains(self)
        case EINTR: [.open, .create, .read, .write, .fsync].contains(self)
        default: [.open, .create, .read, .write, .fsync, .rename, .unlink, .truncate].contains(self)
        }
    }
}

/// The faults a test injects, the engine's one fault mechanism: the `n`th call (1-based,
/// counted per call) of a kind fails with an errno, or every call from the `n`th on (system
/// calls through the seam, SQLite's own, database writes, closure allocations); and the point
/// where the process kills itself (`crashAt`). Handed in as a value, never read from the
/// environment in the middle of the engine.
///
/// # Thread safety
/// Counters behind a `Locked`.
package final class FaultPlan: Sendable {
    package struct Fault: Sendable {
        package var call: SystemCall
        /// The first call (1-based) that fails.
        package var from: Int
        /// How many calls fail from there (nil: all later ones).
        package var count: Int?
        package var errno: Int32

        package init(_ call: SystemCall, from: Int = 1, count: Int? = nil, errno: Int32) {
            self.call = call
            self.from = from
            self.count = count
            self.errno = errno
        }
    }

    private let faults: [Fault]
    /// Where the process kills itself with SIGKILL (SPEC I-6), if anywhere.
    package let crashAt: FaultPoint?
    /// For a sweep: the `k`th call, of any kind that can fail with its errno, fails.
    private let sweep: (k: Int, errno: Int32)?
    private let counts = Locked<(byCall: [SystemCall: Int], swept: Int)>(([:], 0))

    package init(_ faults: [Fault], crashAt: FaultPoint? = nil) {
        self.faults = faults
        self.crashAt = crashAt
        sweep = nil
    }

    /// A plan for a failure sweep (SQLite's way): the `k`th call through the seam (1-based),
    /// counted over the kinds that can fail with `errno`, fails with it; every other call
    /// goes through. `k` 0 fails nothing and only counts.
    package init(sweepingCall k: Int, errno: Int32, crashAt: FaultPoint? = nil) {
        faults = []
        self.crashAt = crashAt
        sweep = (k, errno)
    }

    /// Counts one call of `call`; the errno it must fail with, if any.
    package func failure(of call: SystemCall) -> Int32? {
        // Faults named by kind take an open that creates for an open, as they always did.
        let call = sweep == nil && call == .create ? .open : call
        let (number, swept) = counts.withLock { counts -> (Int, Int) in
            counts.byCall[call, default: 0] += 1
            if let sweep, call.canFail(with: sweep.errno) { counts.swept += 1 }
            return (counts.byCall[call, default: 0], counts.swept)
        }
        if let sweep { return call.canFail(with: sweep.errno) && swept == sweep.k ? sweep.errno : nil }
        return faults.first { fault in
            fault.call == call && number >= fault.from && fault.count.map { number < fault.from + $0 } ?? true
        }?.errno
    }

    /// How many calls of `call` went through the seam.
    package func calls(of call: SystemCall) -> Int { counts.withLock { $0.byCall[call, default: 0] } }

    /// For a sweep: how many calls that can fail with its errno went through the seam.
    package var sweptCalls: Int { counts.withLock { $0.swept } }
}

/// The wall clock: what time it is, for stamps (a record's creation, a session's start). Never
/// used to order records (two reads can fall in the same millisecond, and the wall clock can
/// step back): the repository orders by a sequence.
///
/// # Thread safety
/// Implementations are called from any thread.
package protocol WallClock: Sendable {
    func now() -> Date
}

/// The system's real-time clock.
package struct SystemWallClock: WallClock {
    package init() {}

    package func now() -> Date { Date() }
}

/// The one seam for file and descriptor system calls (swift-system's model): every write
/// loops until done and reports a typed errno (never a trap, unlike `FileHandle.write`),
/// reads are bounded, and a `FaultPlan` makes chosen calls fail.
package struct SystemCalls: Sendable {
    package let faults: FaultPlan?
    /// The wall clock that stamps records, sessions and files (the one wall clock: deadlines
    /// run on the monotonic `HostClock`).
    package let wallClock: any WallClock

    package init(faults: FaultPlan? = nil, wallClock: any WallClock = SystemWallClock()) {
        self.faults = faults
        self.wallClock = wallClock
    }

    /// The real calls, without faults.
    package static let live = SystemCalls()

    func injected(_ call: SystemCall) -> SystemError? {
        faults?.failure(of: call).map { SystemError(call, $0) }
    }

    package func open(_ path: String, _ flags: Int32, _ mode: mode_t = 0o600) -> Result<Int32, SystemError> {
        if let fault = injected(flags & O_CREAT != 0 ? .create : .open) { return .failure(SystemError(.open, fault.errno)) }
        let fd = Glibc.open(path, flags | O_CLOEXEC, mode)
        return fd >= 0 ? .success(fd) : .failure(SystemError(.open, errno))
    }

    /// Writes every byte of `bytes`, retrying short writes and EINTR.
    package func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Result<Void, SystemError> {
        guard let base = bytes.baseAddress else { return .success(()) }
        var offset = 0
        while offset < bytes.count {
            if let fault = injected(.write) { return .failure(fault) }
            let written = Glibc.write(fd, base + offset, bytes.count - offset)
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return .failure(SystemError(.write, written == 0 ? EIO : errno)) }
            offset += written
        }
        return .success(())
    }

    package func writeAll(_ fd: Int32, _ data: Data) -> Result<Void, SystemError> {
        data.withUnsafeBytes { writeAll(fd, $0) }
    }

    package func writeAll(_ fd: Int32, _ text: String) -> Result<Void, SystemError> {
        var text = text
        return text.withUTF8 { writeAll(fd, UnsafeRawBufferPointer($0)) }
    }

    /// Reads at most `capacity` bytes into `buffer`; 0 at the end of the file.
    package func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Result<Int, SystemError> {
        guard let base = buffer.baseAddress else { return .success(0) }
        while true {
            if let fault = injected(.read) { return .failure(fault) }
            let count = Glibc.read(fd, base, buffer.count)
            if count < 0 && errno == EINTR { continue }
            return count >= 0 ? .success(count) : .failure(SystemError(.read, errno))
        }
    }

    package func fsync(_ fd: Int32) -> Result<Void, SystemError> {
        if let fault = injected(.fsync) { return .failure(fault) }
        return Glibc.fsync(fd) == 0 ? .success(()) : .failure(SystemError(.fsync, errno))
    }

    /// `fsync` of a file's data (and of its size, when it changed), what SQLite flushes its log
    /// with; fails as `fsync` does.
    package func fdatasync(_ fd: Int32) -> Result<Void, SystemError> {
        if let fault = injected(.fsync) { return .failure(fault) }
        return Glibc.fdatasync(fd) == 0 ? .success(()) : .failure(SystemError(.fsync, errno))
    }

    package func rename(_ from: String, _ to: String) -> Result<Void, SystemError> {
        if let fault = injected(.rename) { return .failure(fault) }
        return Glibc.rename(from, to) == 0 ? .success(()) : .failure(SystemError(.rename, errno))
    }

    /// The bytes an unprivileged writer may still use on the file system holding `path`; nil
    /// when it cannot be known.
    package func freeBytes(_ path: String) -> Int64? {
        var info = Glibc.statvfs()
        guard rawStatvfs(path, &info) == 0 else { return nil }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }

    /// Makes a folder's entries durable (after a create, rename or unlink in it).
    @discardableResult
    package func syncDirectory(_ path: String) -> Result<Void, SystemError> {
        open(path, O_RDONLY | O_DIRECTORY).flatMap { fd in
            defer { Glibc.close(fd) }
            return fsync(fd)
        }
    }

    /// Opens a regular file named from outside for reading: never blocking on a FIFO or a
    /// device, and never through a symbolic link at the last component unless `followLinks`
    /// (files a user names on the command line). Returns the descriptor and the file's size.
    package func openRegular(_ path: String, followLinks: Bool = false) -> Result<(fd: Int32, size: Int64), BoundedFile.Failure> {
        switch open(path, O_RDONLY | O_NONBLOCK | (followLinks ? 0 : O_NOFOLLOW)) {
        case .failure(let error): return .failure(.system(call: error.call.rawValue, errno: error.errno))
        case .success(let fd):
            var info = Glibc.stat()
            guard Glibc.fstat(fd, &info) == 0 else {
                let number = errno
                Glibc.close(fd)
                return .failure(.system(call: "fstat", errno: number))
            }
            guard (info.st_mode & S_IFMT) == S_IFREG else {
                Glibc.close(fd)
                return .failure(.notRegular)
            }
            return .success((fd, Int64(info.st_size)))
        }
    }

    /// Copies at most `limit` bytes of the regular file at `path` to `output`, in 64 KB
    /// chunks (memory bounded by the buffer, not the file). Fails past the limit.
    package func stream(_ path: String, to output: Int32, limit: Int) -> Result<Int, BoundedFile.Failure> {
        openRegular(path).flatMap { file in
            defer { Glibc.close(file.fd) }
            guard file.size <= Int64(limit) else { return .failure(.tooLarge(size: file.size, limit: limit)) }
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            var total = 0
            while true {
                let count = buffer.withUnsafeMutableBytes { read(file.fd, into: $0) }
                switch count {
                case .failure(let error): return .failure(.system(call: error.call.rawValue, errno: error.errno))
                case .success(0): return .success(total)
                case .success(let count):
                    total += count
                    guard total <= limit else { return .failure(.tooLarge(size: Int64(total), limit: limit)) }
                    let written = buffer.withUnsafeBytes { writeAll(output, UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
                    if case .failure(let error) = written { return .failure(.system(call: error.call.rawValue, errno: error.errno)) }
                }
            }
        }
    }
}

private func rawStatvfs(_ path: String, _ info: inout statvfs) -> Int32 { statvfs(path, &info) }
