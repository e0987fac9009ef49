import FoundationEssentials
import Glibc

/// The rest of the seam: every other system call the engine makes, each with the raw call's
/// own signature and result (-1 or nil with `errno` set), so that a `FaultPlan` can make the
/// `n`th call of its kind fail like the real one would. A test (`SystemCallSeamTests`) fails
/// when a raw call appears outside the files named `SystemCalls*.swift`.
extension SystemCalls {
    /// -1 with `errno` when the plan fails this call of `kind`; nil to make the real call.
    private func refused(_ kind: SystemCall) -> Int32? {
        guard let fault = injected(kind) else { return nil }
        errno = fault.errno
        return -1
    }

    @discardableResult
    package func close(_ fd: Int32) -> Int32 { refused(.close) ?? Glibc.close(fd) }

    @discardableResult
    package func unlink(_ path: String) -> Int32 { refused(.unlink) ?? Glibc.unlink(path) }

    package func mkdir(_ path: String, _ mode: mode_t) -> Int32 { refused(.folder) ?? Glibc.mkdir(path, mode) }

    @discardableResult
    package func rmdir(_ path: String) -> Int32 { refused(.folder) ?? Glibc.rmdir(path) }

    /// The raw `open(2)`, for the few opens that are not files of the repository's (a
    /// placeholder on a closed standard descriptor, `/proc` entries): no close-on-exec added.
    package func openRaw(_ path: String, _ flags: Int32, _ mode: mode_t = 0) -> Int32 {
        refused(flags & O_CREAT != 0 ? .create : .open) ?? Glibc.open(path, flags, mode)
    }

    /// `read(2)` once, as the raw call (short reads and EINTR are the caller's).
    package func readRaw(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
        refused(.read).map(Int.init) ?? Glibc.read(fd, buffer, count)
    }

    package func pwrite(_ fd: Int32, _ buffer: UnsafeRawPointer?, _ count: Int, _ offset: off_t) -> Int {
        refused(.write).map(Int.init) ?? Glibc.pwrite(fd, buffer, count, offset)
    }

    package func pread(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int, _ offset: off_t) -> Int {
        refused(.read).map(Int.init) ?? Glibc.pread(fd, buffer, count, offset)
    }

    @discardableResult
    package func ftruncate(_ fd: Int32, _ length: off_t) -> Int32 { refused(.truncate) ?? Glibc.ftruncate(fd, length) }

    package func lseek(_ fd: Int32, _ offset: off_t, _ whence: Int32) -> off_t {
        refused(.control).map(off_t.init) ?? Glibc.lseek(fd, offset, whence)
    }

    /// `stat(2)`: the file's status, nil with `errno` when it cannot be had.
    package func stat(_ path: String) -> Glibc.stat? {
        if refused(.inspect) != nil { return nil }
        var info = Glibc.stat()
        return rawStat(path, &info) == 0 ? info : nil
    }

    package func lstat(_ path: String) -> Glibc.stat? {
        if refused(.inspect) != nil { return nil }
        var info = Glibc.stat()
        return rawLstat(path, &info) == 0 ? info : nil
    }

    package func fstat(_ fd: Int32) -> Glibc.stat? {
        if refused(.inspect) != nil { return nil }
        var info = Glibc.stat()
        return rawFstat(fd, &info) == 0 ? info : nil
    }

    package func access(_ path: String, _ mode: Int32) -> Int32 { refused(.inspect) ?? Glibc.access(path, mode) }

    /// `realpath(3)`: the path with every link resolved, nil with `errno`.
    package func realpath(_ path: String) -> String? {
        if refused(.inspect) != nil { return nil }
        guard let resolved = Glibc.realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    @discardableResult
    package func chmod(_ path: String, _ mode: mode_t) -> Int32 { refused(.control) ?? Glibc.chmod(path, mode) }

    @discardableResult
    package func flock(_ fd: Int32, _ operation: Int32) -> Int32 {
        refused(.lock) ?? rawFlock(fd, operation)
    }

    /// `fcntl(2)` with an integer argument (F_GETFD, F_SETFD, F_GETFL).
    package func fcntl(_ fd: Int32, _ command: Int32, _ argument: Int32 = 0) -> Int32 {
        refused(.control) ?? Glibc.fcntl(fd, command, argument)
    }

    package func pipe(_ ends: inout [Int32]) -> Int32 {
        if let failed = refused(.control) { return failed }
        return ends.withUnsafeMutableBufferPointer { Glibc.pipe($0.baseAddress!) }
    }

    package func getrlimit(_ resource: Int32, _ limit: inout rlimit) -> Int32 {
        refused(.control) ?? Glibc.getrlimit(__rlimit_resource_t(UInt32(resource)), &limit)
    }

    package func setrlimit(_ resource: Int32, _ limit: inout rlimit) -> Int32 {
        refused(.control) ?? Glibc.setrlimit(__rlimit_resource_t(UInt32(resource)), &limit)
    }

    @discardableResult
    package func kill(_ pid: pid_t, _ signal: Int32) -> Int32 { refused(.process) ?? Glibc.kill(pid, signal) }

    package func waitpid(_ pid: pid_t, _ status: inout Int32, _ options: Int32) -> pid_t {
        refused(.process) ?? Glibc.waitpid(pid, &status, options)
    }

    /// `posix_fallocate(3)` from offset 0: 0, or the errno (it sets none). A full disk fails
    /// here, which is why a file about to be mapped is allocated first.
    package func fallocate(_ fd: Int32, length: off_t) -> Int32 {
        if let fault = injected(.truncate) { return fault.errno }
        return posix_fallocate(fd, 0, length)
    }

    /// `mmap(2)` of `bytes` of the file `fd`, shared: nil with `errno` set.
    package func mapShared(_ fd: Int32, bytes: Int, writable: Bool) -> UnsafeMutableRawPointer? {
        if refused(.map) != nil { return nil }
        let mapped = mmap(nil, bytes, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, fd, 0)
        return mapped == MAP_FAILED ? nil : mapped
    }

    /// `munmap(2)`; never injected (it cannot fail on a mapping this process made).
    package func unmap(_ address: UnsafeMutableRawPointer, bytes: Int) { munmap(address, bytes) }

    /// `dlopen(3)`: nil with `dlerror` saying why (or, when the plan fails it, "refused").
    package func dlopen(_ path: String, _ mode: Int32) -> UnsafeMutableRawPointer? {
        refused(.load) == nil ? Glibc.dlopen(path, mode) : nil
    }

    package func dlsym(_ image: UnsafeMutableRawPointer?, _ symbol: String) -> UnsafeMutableRawPointer? {
        refused(.load) == nil ? Glibc.dlsym(image, symbol) : nil
    }

    /// `clock_gettime(CLOCK_MONOTONIC)`, never failing and never injected: the host's
    /// monotonic clock reads it (tests inject a `HostClock` instead).
    package static func monotonicNow() -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return now
    }
}

// The calls whose names a struct of the same name shadows inside `SystemCalls`.
private func rawStat(_ path: String, _ info: inout stat) -> Int32 { stat(path, &info) }
private func rawLstat(_ path: String, _ info: inout stat) -> Int32 { lstat(path, &info) }
private func rawFstat(_ fd: Int32, _ info: inout stat) -> Int32 { fstat(fd, &info) }
private func rawFlock(_ fd: Int32, _ operation: Int32) -> Int32 { flock(fd, operation) }

/// What the engine asks Foundation that is a system call underneath: folders' entries, files'
/// existence and removal, the working folder, the wall clock and randomness. Through the seam
/// like the rest, so a plan can fail them too.
extension SystemCalls {
    /// The names in the folder at `path`, nil with the error when it cannot be listed.
    package func entries(ofFolder path: String) -> [String]? {
        if refused(.inspect) != nil { return nil }
        return try? FileManager.default.contentsOfDirectory(atPath: path)
    }

    /// The paths under the folder at `path`, relative to it, nil when it cannot be listed.
    package func paths(under path: String) -> [String]? {
        if refused(.inspect) != nil { return nil }
        return try? FileManager.default.subpathsOfDirectory(atPath: path)
    }

    package func fileExists(_ path: String) -> Bool {
        refused(.inspect) == nil && FileManager.default.fileExists(atPath: path)
    }

    /// Whether something is at `path`, and whether it is a folder (links followed).
    package func fileExists(_ path: String, isFolder: inout Bool) -> Bool {
        refused(.inspect) == nil && FileManager.default.fileExists(atPath: path, isDirectory: &isFolder)
    }

    /// Removes the file or the folder (and everything in it) at `path`; false when it could not.
    @discardableResult
    package func removeItem(_ path: String) -> Bool {
        refused(.unlink) == nil && (try? FileManager.default.removeItem(atPath: path)) != nil
    }

    /// The working folder; never injected (nothing of the engine's state lives in it).
    package static var currentFolder: String { FileManager.default.currentDirectoryPath }

    /// The wall clock's now (the seam's `wallClock`).
    package func now() -> Date { wallClock.now() }

    /// 128 random bits from one call of glibc's `arc4random_buf` (`getrandom` underneath; the
    /// standard library's generator makes a call for each 64); never injected.
    package static func random128() -> (UInt64, UInt64) {
        var bits: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &bits) { arc4random_buf($0.baseAddress!, $0.count) }
        return bits
    }
}

/// Gives the calling thread its kernel name (what `ps -L`, gdb and /proc show), cut to the 15
/// bytes Linux keeps (at a character's boundary). Never injected: a thread without its name
/// works the same.
package func nameCurrentThread(_ name: String) {
    let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
    guard fd >= 0 else { return }
    defer { close(fd) }
    let bytes = Array(name.utf8.prefix(15))
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
}
