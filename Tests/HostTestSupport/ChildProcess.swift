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
    ///
    /// Started as a `StartedChild` (`posix_spawn`, reaped with `waitpid` on its own pid), never
    /// with Foundation's `Process`: that one learns of a child's end from a SIGCHLD its signal
    /// source must receive, and once it did not (the child a zombie nobody reaped, the test
    /// waiting for ever, every test compiling a fixture behind it).
    package static func run(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], directory: URL? = nil,
        input: Data? = nil
    ) throws -> Result {
        let out = try closeOnExecPair()
        let err = try closeOnExecPair()
        let inPipe = try closeOnExecPair()
        // Closed once more at the end, whatever happened (a handle closed twice stays closed).
        defer { [out, err, inPipe].forEach { try? $0.ours.close(); try? $0.child.close() } }
        let child = try StartedChild.start(
            executable, arguments, environment: environment, directory: directory, input: inPipe.child.fileDescriptor,
            output: out.child.fileDescriptor, errors: err.child.fileDescriptor)
        // The child's ends are the child's now: at its exit, the reads below see end of file.
        [out.child, err.child, inPipe.child].forEach { try? $0.close() }
        if let input { Self.send(input, to: inPipe.ours.fileDescriptor) }
        try? inPipe.ours.close()
        // Read both concurrently so a chatty child cannot fill one and block. A thread of its
        // own: tests block pool threads, so the pool may have none to spare.
        let errData = Locked(Data())
        let errDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let data = err.ours.readDataToEndOfFile()
            errData.withLock { $0 = data }
            errDone.signal()
        }
        let outData = out.ours.readDataToEndOfFile()
        errDone.wait()
        // An uncaught signal's number stands for the status, as Foundation's `Process` gave it.
        let (status, signal): (Int32, Int32?) =
            switch child.wait() {
            case .exited(let code): (code, nil)
            case .signalled(let number): (number, number)
            }
        return Result(
            status: status, stdout: String(decoding: outData, as: UTF8.self),
            stderr: String(decoding: errData.withLock { $0 }, as: UTF8.self), signal: signal)
    }

    /// Writes `data` to a child's input as far as it reads it: a child that exits first costs
    /// the rest (MSG_NOSIGNAL: no SIGPIPE, and no trap as `FileHandle.write` has on EPIPE).
    private static func send(_ data: Data, to socket: Int32) {
        data.withUnsafeBytes { bytes in
            var sent = 0
            while sent < bytes.count {
                let count = Glibc.send(socket, bytes.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return }
                sent += count
            }
        }
    }

    /// A connected pair for a child's standard stream, close-on-exec from the start, as
    /// SpawnedChild's: Foundation's `Pipe` is not, so a child another test spawned at the same
    /// moment (a Python server, a receiver living a whole test) inherited this child's output
    /// end and kept it open, and the read below waited for that other child to exit (78 s).
    /// The child gets its end by dup2, which clears the flag.
    package static func closeOnExecPair() throws -> (ours: FileHandle, child: FileHandle) {
        var ends: [Int32] = [-1, -1]
        // Socket pairs, because the Glibc module has no pipe2.
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            throw POSIXError(.EMFILE)
        }
        return (FileHandle(fileDescriptor: ends[0], closeOnDealloc: false), FileHandle(fileDescriptor: ends[1], closeOnDealloc: false))
    }

    /// Runs the built `reporthost` with `arguments`, in `directory` or a fresh temporary one
    /// (so the default repository, `.reporthost`, never lands in the source tree).
    package static func reporthost(
        _ arguments: [String], environment: [String: String] = [:], directory: URL? = nil
    ) throws -> Result {
        try run(Products.reporthost.path, arguments, environment: environment, directory: directory ?? makeTemporaryDirectory("cwd"))
    }
}
