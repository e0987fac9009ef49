import Foundation

/// Writes that survive a power cut: data and then the folder entry fsync'd, through the
/// system-call seam (a full disk is an error, never a trap).
package enum DurableFile {
    /// Creates (or truncates) `url` with `data`. A write or sync that fails removes the file:
    /// a full disk keeps no partial copy.
    package static func write(_ data: Data, to url: URL, system: SystemCalls = .live) throws(StorageError) {
        let fd: Int32
        switch system.open(url.path, O_WRONLY | O_CREAT | O_TRUNC) {
        case .success(let opened): fd = opened
        case .failure(let error): throw StorageError(path: url.path, message: "cannot create (\(error))")
        }
        defer { close(fd) }
        var failure: StorageError?
        if case .failure(let error) = system.writeAll(fd, data) {
            failure = StorageError(path: url.path, message: "cannot write (\(error))")
        } else if case .failure(let error) = system.fsync(fd) {
            failure = StorageError(path: url.path, message: "cannot sync (\(error))")
        }
        if let failure {
            unlink(url.path)
            throw failure
        }
    }

    package static func syncDirectory(_ url: URL, system: SystemCalls = .live) {
        system.syncDirectory(url.path)
    }
}
