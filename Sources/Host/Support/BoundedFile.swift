import Foundation

/// Reads of files named from outside (crash files, the attachments they name, plugin
/// files): regular files only, never through a symbolic link at the last component, never
/// blocking on a FIFO or a device, and bounded before a byte is read.
public enum BoundedFile {
    /// Why a file was not read.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// `open` or `read` failed with this errno.
        case system(call: String, errno: Int32)
        /// Not a regular file (a FIFO, a device, a folder, a socket).
        case notRegular
        /// Larger than the limit (its size in bytes).
        case tooLarge(size: Int64, limit: Int)

        public var description: String {
            switch self {
            case .system(let call, let number): "\(call) failed (\(String(cString: strerror(number))))"
            case .notRegular: "not a regular file"
            case .tooLarge(let size, let limit): "\(size) bytes, over the \(limit)-byte limit"
            }
        }
    }

    /// The whole file at `path`, if it is a regular file of at most `limit` bytes.
    public static func read(_ path: String, limit: Int) -> Result<Data, Failure> {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return .failure(.system(call: "open", errno: errno)) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return .failure(.system(call: "fstat", errno: errno)) }
        guard (info.st_mode & S_IFMT) == S_IFREG else { return .failure(.notRegular) }
        guard info.st_size <= Int64(limit) else { return .failure(.tooLarge(size: Int64(info.st_size), limit: limit)) }
        // The file may grow after fstat: read at most limit + 1 bytes to notice.
        var data = Data(count: Int(info.st_size) + 1)
        var total = 0
        while total <= limit {
            if total == data.count { data.count = min(limit + 1, data.count * 2) }
            let count = data.withUnsafeMutableBytes { buffer -> Int in
                guard let base = buffer.baseAddress else { return 0 }
                return Glibc.read(fd, base + total, buffer.count - total)
            }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { return .failure(.system(call: "read", errno: errno)) }
            if count == 0 { break }
            total += count
        }
        guard total <= limit else { return .failure(.tooLarge(size: Int64(total), limit: limit)) }
        data.count = total
        return .success(data)
    }
}
