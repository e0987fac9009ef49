import Foundation

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

/// Standard error, one line per entry.
public struct ConsoleDestination: LogDestination {
    public let level: LogLevel
    public init(level: LogLevel) { self.level = level }

    public func write(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}

/// Appends to a file, created if missing.
///
/// # Thread safety
/// Writes are serialised by the `Locked` handle.
public final class FileDestination: LogDestination {
    public let level: LogLevel
    private let handle: Locked<FileHandle>

    /// Throws when the file cannot be opened for appending.
    public init(path: String, level: LogLevel) throws {
        if !FileManager.default.fileExists(atPath: path) {
            guard FileManager.default.createFile(atPath: path, contents: nil) else {
                throw HostError.io(path: path, reason: "cannot create log file")
            }
        }
        guard let handle = FileHandle(forWritingAtPath: path) else {
            throw HostError.io(path: path, reason: "cannot open log file for writing")
        }
        handle.seekToEndOfFile()
        self.level = level
        self.handle = Locked(handle)
    }

    public func write(_ line: String) {
        handle.withLock { $0.write(Data((line + "\n").utf8)) }
    }
}

/// Collects lines in memory; for tests and for callers that show logs themselves.
public final class MemoryDestination: LogDestination {
    public let level: LogLevel
    private let storage = Locked<[String]>([])

    public init(level: LogLevel = .debug) { self.level = level }

    public func write(_ line: String) { storage.withLock { $0.append(line) } }

    public var lines: [String] { storage.withLock { $0 } }
}

/// The host's log: fans each entry out to the destinations whose level admits it.
public struct HostLogger: Sendable {
    public let destinations: [any LogDestination]

    public init(destinations: [any LogDestination]) { self.destinations = destinations }

    /// The built-in default (SPEC D-14): the console at `info`.
    public static let standard = HostLogger(destinations: [ConsoleDestination(level: .info)])
    public static let silent = HostLogger(destinations: [])

    public func log(_ level: LogLevel, _ message: @autoclosure () -> String, handler: String = "host") {
        let wanted = destinations.filter { level >= $0.level }
        guard !wanted.isEmpty else { return }
        let line = "reporthost: \(level.name): [\(handler)] \(message())"
        for destination in wanted { destination.write(line) }
    }

    public func debug(_ message: @autoclosure () -> String) { log(.debug, message()) }
    public func info(_ message: @autoclosure () -> String) { log(.info, message()) }
    public func warn(_ message: @autoclosure () -> String) { log(.warn, message()) }
    public func error(_ message: @autoclosure () -> String) { log(.error, message()) }
}
