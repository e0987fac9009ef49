import FoundationEssentials
import Glibc
import HostModel
import HostSupport

/// Writes that survive a power cut: data and then the folder entry fsync'd, through the
/// system-call seam (a full disk is an error, never a trap).
package enum DurableFile {
    /// Creates `url` with `data`, failing if anything (a file, a symbolic link) is there
    /// already: nothing planted under that name is written through. A write or sync that
    /// fails removes the file: a full disk keeps no partial copy.
    package static func createNew(_ data: Data, at url: URL, system: SystemCalls) throws(StorageError) {
        let fd: Int32
        switch system.open(url.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC) {
        case .success(let opened): fd = opened
        case .failure(let error): throw StorageError(path: url.path, message: "cannot create (\(error))", error)
        }
        defer { system.close(fd) }
        var failure: StorageError?
        if case .failure(let error) = system.writeAll(fd, data) {
            failure = StorageError(path: url.path, message: "cannot write (\(error))", error)
        } else if case .failure(let error) = system.fsync(fd) {
            failure = StorageError(path: url.path, message: "cannot sync (\(error))", error)
        }
        if let failure {
            system.unlink(url.path)
            throw failure
        }
    }

    package static func syncDirectory(_ url: URL, system: SystemCalls) {
        system.syncDirectory(url.path)
    }
}
