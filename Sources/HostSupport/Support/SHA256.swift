import Digest
import FoundationEssentials
import Glibc

/// SHA-256 (the `Digest` target: built in, with the x86 SHA extensions where the processor has
/// them): attachments in report documents and plugin files (the quarantine's key).
package enum SHA256 {
    /// The lowercase hex digest of `data`.
    package static func hex(_ data: Data) -> String {
        var hasher = Hasher()
        hasher.update(data)
        return hasher.finish()
    }

    /// The lowercase hex digest of the regular file at `path`, read in bounded chunks; nil
    /// when it cannot be opened or read, is not a regular file, or is larger than `limit`.
    package static func hex(ofFileAt path: String, limit: Int = 1 << 30, system: SystemCalls) -> String? {
        let fd = system.openRaw(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { system.close(fd) }
        guard let info = system.fstat(fd), (info.st_mode & S_IFMT) == S_IFREG, info.st_size <= limit else { return nil }
        var hasher = Hasher()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var total = 0
        while true {
            let count = buffer.withUnsafeMutableBytes { system.readRaw(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { break }
            total += count
            guard total <= limit else { return nil }
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
        }
        return hasher.finish()
    }

    /// One digest in progress.
    struct Hasher {
        private var context = rh_sha256()

        init() { rh_sha256_init(&context) }

        mutating func update(_ data: Data) {
            data.withUnsafeBytes { update($0) }
        }

        mutating func update(_ bytes: UnsafeRawBufferPointer) {
            if bytes.count > 0 { rh_sha256_update(&context, bytes.baseAddress, bytes.count) }
        }

        consuming func finish() -> String {
            var digest = [UInt8](repeating: 0, count: 32)
            rh_sha256_final(&context, &digest)
            return digest.map { String(hex: $0, width: 2) }.joined()
        }
    }
}
