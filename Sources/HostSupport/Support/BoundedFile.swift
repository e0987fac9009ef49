import FoundationEssentials
import Glibc

/// Reads of files named from outside (crash files, the attachments they name, attachment
/// copies, `--attach`, configuration files): regular files only, never blocking on a FIFO or
/// a device, bounded before a byte is read, and (but for files a user names on the command
/// line) never through a symbolic link at the last component.
package enum BoundedFile {
    /// Why a file was not read.
    /// The largest configuration file or dialog script read.
    package static let maxDocumentBytes = 1 << 20

    package enum Failure: Error, Equatable, CustomStringConvertible {
        /// A system call failed with this errno.
        case system(call: String, errno: Int32)
        /// Not a regular file (a FIFO, a device, a folder, a socket).
        case notRegular
        /// Larger than the limit (its size in bytes).
        case tooLarge(size: Int64, limit: Int)

        package var description: String {
            switch self {
            case .system(let call, let number): "\(call) failed (\(String(cString: strerror(number))))"
            case .notRegular: "not a regular file"
            case .tooLarge(let size, let limit): "\(size) bytes, over the \(limit)-byte limit"
            }
        }
    }

    /// The whole file at `path`, if it is a regular file of at most `limit` bytes.
    package static func read(_ path: String, limit: Int, followLinks: Bool = false, system: SystemCalls) -> Result<Data, Failure> {
        system.openRegular(path, followLinks: followLinks).flatMap { file in
            defer { system.close(file.fd) }
            guard file.size <= Int64(limit) else { return .failure(.tooLarge(size: file.size, limit: limit)) }
            // The file may grow after fstat: read at most limit + 1 bytes to notice.
            var data = Data(count: Int(file.size) + 1)
            var total = 0
            while total <= limit {
                if total == data.count { data.count = min(limit + 1, data.count * 2) }
                let count = data.withUnsafeMutableBytes { buffer in
                    system.read(file.fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[total...]))
                }
                switch count {
                case .failure(let error): return .failure(.system(call: error.call.rawValue, errno: error.errno))
                case .success(0): data.count = total
                    return .success(data)
                case .success(let count): total += count
                }
            }
            return .failure(.tooLarge(size: Int64(total), limit: limit))
        }
    }
}
