import Foundation
import Host
import HostSupport

/// Runs a program to completion and captures its output.
package enum ChildProcess {
    package struct Result: Sendable {
        package var status: Int32
        package var stdout: String
        package var stderr: String
        /// Set when the process ended by a signal.
        package var signal: Int32?
    }

    /// The environment children run with: this process's (so settings such as a sanitizer's
    /// options reach them), with `SWIFT_BACKTRACE` unset as a user's would be: the host must
    /// never hand a crash to the Swift runtime's backtracer (its process outlives the crash
    /// and holds the output pipes open, so a test reading them to the end would wait).
    package static var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = nil
        return environment
    }

    /// Runs `executable` with `arguments`; `environment` is added to the current one.
    package static func run(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], directory: URL? = nil,
        input: Data? = nil
    ) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var env = Self.environment
        for (key, value) in environment { env[key] = value }
        process.environment = env
        if let directory { process.currentDirectoryURL = directory }
        let out = Pipe()
        let err = Pipe()
        let inPipe = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = inPipe
        try process.run()
        if let input { inPipe.fileHandleForWriting.write(input) }
        try? inPipe.fileHandleForWriting.close()
        // Read both pipes concurrently so a chatty child cannot fill one and block. A
        // thread of its own: tests block pool threads, so the pool may have none to spare.
        let errData = Locked(Data())
        let errDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let data = err.fileHandleForReading.readDataToEndOfFile()
            errData.withLock { $0 = data }
            errDone.signal()
        }
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        errDone.wait()
        process.waitUntilExit()
        let signalled = process.terminationReason == .uncaughtSignal
        return Result(
            status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
            stderr: String(decoding: errData.withLock { $0 }, as: UTF8.self),
            signal: signalled ? process.terminationStatus : nil)
    }

    /// Runs the built `reporthost` with `arguments`, in `directory` or a fresh temporary one
    /// (so the default repository, `.reporthost`, never lands in the source tree).
    package static func reporthost(
        _ arguments: [String], environment: [String: String] = [:], directory: URL? = nil
    ) throws -> Result {
        try run(Products.reporthost.path, arguments, environment: environment, directory: directory ?? makeTemporaryDirectory("cwd"))
    }
}
