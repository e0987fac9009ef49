import Foundation

/// Standard output, reserved for documents (SPEC I-4).
///
/// At start the CLI keeps its own copy of fd 1 for documents and points fd 1 at stderr,
/// so nothing a plugin prints (printf, Swift print) can reach stdout.
struct DocumentOutput: Sendable {
    let fileDescriptor: Int32

    static func claimStandardOutput() -> DocumentOutput {
        // Close-on-exec: a process a plugin spawns must not hold the document pipe open.
        let copy = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3)
        dup2(STDERR_FILENO, STDOUT_FILENO)
        return DocumentOutput(fileDescriptor: copy >= 0 ? copy : STDERR_FILENO)
    }

    func write(_ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeMutableBytes { Foundation.write(fileDescriptor, $0.baseAddress! + offset, $0.count - offset) }
            if written <= 0 {
                if written < 0 && errno == EINTR { continue }
                return
            }
            offset += written
        }
        bytes.removeAll()
    }
}

/// Writes the one-line error of SPEC I-4.
func printError(_ message: String) {
    FileHandle.standardError.write(Data("reporthost: error: \(message)\n".utf8))
}
