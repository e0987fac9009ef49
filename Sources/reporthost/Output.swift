import FoundationEssentials
import Glibc
import Host
import HostSupport

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

    /// Text for a person (`show`, `status`, `check`'s report, `demo`): control characters
    /// made visible, the text's own line breaks kept (`TerminalText`).
    func writeText(_ text: String) { write(TerminalText.visible(text, keepingNewlines: true)) }

    /// Exact output (JSON, JUnit, usage).
    func write(_ text: String) {
        if case .failure(let error) = Switches.system.writeAll(fileDescriptor, text) {
            failure.withLock { $0 = $0 ?? error }
        }
    }

    /// Why a document was lost, if one was.
    var lostDocument: SystemError? { failure.withLock { $0 } }
}

/// Writes to standard error; a closed or full stderr drops the text (never a trap).
func writeStandardError(_ text: String) {
    _ = Switches.system.writeAll(STDERR_FILENO, text)
}

/// Writes the one-line error of SPEC I-4.
func printError(_ message: String) {
    writeStandardError("reporthost: error: \(message)\n")
}

/// A file the command line writes on request (`check --junit PATH`): written through the path
/// the user named, never renamed over it. A symbolic link is followed and its target
/// written; a character device (`/dev/null`, a terminal) is written as it is; a FIFO, a socket
/// or a folder is refused at once (a FIFO is never waited on). `/dev/stdout`, `/dev/fd/1` and
/// `/proc/self/fd/1` mean the command's standard output as the caller gave it (the host
/// points its own fd 1 at stderr, SPEC I-4). Checked when the command starts, written when it
/// ends.
struct RequestedFile {
    let path: String
    private let standardOutput: DocumentOutput?

    static let standardOutputNames: Set<String> = ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"]

    /// Refuses (a usage error, exit 2) what cannot be written without waiting or replacing.
    init(_ named: String, standardOutput output: DocumentOutput, option: String) throws {
        path = Paths.absolute(named)
        if Self.standardOutputNames.contains(named) || Self.standardOutputNames.contains(path) {
            standardOutput = output
            return
        }
        standardOutput = nil
        guard let info = Switches.system.stat(path) else {
            guard errno == ENOENT else { throw UsageError("\(option) \(named): \(String(cString: strerror(errno)))") }
            return  // created when written
        }
        let kind = info.st_mode & S_IFMT
        guard kind == S_IFREG || kind == S_IFCHR else {
            let what = kind == S_IFIFO ? "a FIFO" : kind == S_IFDIR ? "a folder" : kind == S_IFSOCK ? "a socket" : "not a regular file"
            throw UsageError("\(option) \(named) is \(what): give a regular file, a character device or /dev/stdout")
        }
    }

    /// Writes `text`: truncating a regular file in place (through a link), or to the device.
    func write(_ text: String) throws {
        if let standardOutput {
            standardOutput.write(text)
            return
        }
        let system = Switches.system
        let fd = system.openRaw(path, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw HostError.io(path: path, reason: "cannot open for writing (\(String(cString: strerror(errno))))") }
        defer { system.close(fd) }
        if case .failure(let error) = system.writeAll(fd, text) { throw HostError.io(path: path, reason: "cannot write (\(error))") }
    }
}
