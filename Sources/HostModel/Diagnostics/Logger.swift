import Glibc
import HostSupport

/// How much a log line matters. Raw values are the ABI's `RH_LOG_*` constants.
public enum LogLevel: Int32, Comparable, Sendable, CaseIterable {
    case debug = 0, info = 1, warn = 2, error = 3

    public init?(name: String) {
        guard let level = LogLevel.allCases.first(where: { $0.name == name }) else { return nil }
        self = level
    }

    public var name: String {
        switch self {
        case .debug: "debug"
        case .info: "info"
        case .warn: "warn"
        case .error: "error"
        }
    }

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
}

/// Where log lines go.
public protocol LogDestination: Sendable {
    var level: LogLevel { get }
    func write(_ line: String)
}

/// Standard error, one line per entry. A line that cannot be written (a closed pipe, a full
/// disk) is dropped: logging never ends the host.
package struct ConsoleDestination: LogDestination {
    package let level: LogLevel
    private let system: SystemCalls

    package init(level: LogLevel, system: SystemCalls) {
        self.level = level
        self.system = system
    }

    package func write(_ line: String) {
        _ = system.writeAll(STDERR_FILENO, TerminalText.visible(line) + "\n")
    }
}

/// Appends to a regular file, created if missing (never a FIFO or a device, never through a
/// symbolic link). A line that cannot be written is dropped.
///
/// # Thread safety
/// Writes are serialised by the `Locked` descriptor (`O_APPEND` keeps lines whole).
package final class FileDestination: LogDestination {
    package let level: LogLevel
    private let descriptor: Locked<Int32>
    private let system: SystemCalls

    /// Throws when the file cannot be opened for appending or is not a regular file.
    package init(path: String, level: LogLevel, system: SystemCalls) throws(HostError) {
        let fd: Int32
        switch system.open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0o600) {
        case .success(let opened): fd = opened
        case .failure(let error): throw .io(path: path, reason: "cannot open the log file (\(error))")
        }
        guard let info = system.fstat(fd), (info.st_mode & S_IFMT) == S_IFREG else {
            system.close(fd)
            throw .io(path: path, reason: "the log file is not a regular file")
        }
        self.level = level
        self.system = system
        descriptor = Locked(fd)
    }

    package func write(_ line: String) {
        descriptor.withLock { _ = system.writeAll($0, TerminalText.visible(line) + "\n") }
    }

    deinit { descriptor.withLock { _ = system.close($0) } }
}

/// Collects lines in memory; for tests and for callers that show logs themselves.
package final class MemoryDestination: LogDestination {
    package let level: LogLevel
    private let storage = Locked<[String]>([])

    package init(level: LogLevel = .debug) { self.level = level }

    package func write(_ line: String) { storage.withLock { $0.append(line) } }

    package var lines: [String] { storage.withLock { $0 } }
}

/// The host's log: fans each entry out to the destinations whose level admits it.
package struct HostLogger: Sendable {
    package let destinations: [any LogDestination]

    package init(destinations: [any LogDestination]) { self.destinations = destinations }

    package static let silent = HostLogger(destinations: [])

    package func log(_ level: LogLevel, _ message: @autoclosure () -> String, handler: String = "host") {
        let wanted = destinations.filter { level >= $0.level }
        guard !wanted.isEmpty else { return }
        let line = "reporthost: \(level.name): [\(handler)] \(message())"
        for destination in wanted { destination.write(line) }
    }

    package func debug(_ message: @autoclosure () -> String) { log(.debug, message()) }
    package func info(_ message: @autoclosure () -> String) { log(.info, message()) }
    package func warn(_ message: @autoclosure () -> String) { log(.warn, message()) }
    package func error(_ message: @autoclosure () -> String) { log(.error, message()) }
}
