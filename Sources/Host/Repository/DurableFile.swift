import Foundation

/// Writes that survive a power cut: data and then the folder entry fsync'd, through the
/// system-call seam (a full disk is an error, never a trap).
public enum DurableFile {
    public static func write(_ data: Data, to url: URL, system: SystemCalls = .live) throws(StorageError) {
        let fd: Int32
        switch system.open(url.path, O_WRONLY | O_CREAT | O_TRUNC) {
        case .success(let opened): fd = opened
        case .failure(let error): throw StorageError(path: url.path, message: "cannot create (\(error))")
        }
        defer { close(fd) }
        if case .failure(let error) = system.writeAll(fd, data) { throw StorageError(path: url.path, message: "cannot write (\(error))") }
        if case .failure(let error) = system.fsync(fd) { throw StorageError(path: url.path, message: "cannot sync (\(error))") }
    }

    public static func syncDirectory(_ url: URL, system: SystemCalls = .live) {
        system.syncDirectory(url.path)
    }
}
