import FoundationEssentials
import Glibc
import Host

/// Standard output, reserved for documents (SPEC I-4).
///
/// At start the CLI keeps its own copy of fd 1 for documents and points fd 1 at stderr,
/// so nothing a plugin prints (printf, Swift print) can reach stdout.
struct DocumentOutput: Sendable {
    let fileDescriptor: Int32
    /// Set once a document could not be written whole (a closed pipe, a full disk): the
    /// command then exits 1 (SPEC I-4), never 0 with a truncated document.
    private let failure = Locked<SystemError?>(nil)

    static func claimStandardOutput() -> DocumentOutput {
        // Close-on-exec: a process a plugin spawns must not hold the document pipe open.
        let copy = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3)
        dup2(STDERR_FILENO, STDOUT_FILENO)
        return DocumentOutput(fileDescriptor: copy >= 0 ? copy : STDERR_FILENO)
    }

    func write(_ text: String) {
        if case .failure(let error) = SystemCalls.live.writeAll(fileDescriptor, text) {
            failure.withLock { $0 = $0 ?? error }
        }
    }

    /// Why a document was lost, if one was.
    var lostDocument: SystemError? { failure.withLock { $0 } }
}

/// Writes to standard error; a closed or full stderr drops the text (never a trap).
func writeStandardError(_ text: String) {
    _ = SystemCalls.live.writeAll(STDERR_FILENO, text)
}

/// Writes the one-line error of SPEC I-4.
func printError(_ message: String) {
    writeStandardError("reporthost: error: \(message)\n")
}
