import Dispatch
import FoundationEssentials
import Glibc
import Host
import HostCapture
import HostRecovery
import HostSupport
import RemoteCapture

/// `reporthost run [options] -- PROGRAM ARGS…`: runs an unmodified program as a child with the
/// crash writer preloaded (`libreporthost-capture.so`, writing into the repository's crashes/
/// under a session of the run). When it ends, what it left is recovered at once: its crash
/// files (chain, store, deliver), or an `abnormal_exit` report when a signal ended it without
/// one (SIGKILL, the OOM killer). Standard input and output are the child's; signals sent to
/// `run` are passed on; `run` exits with the child's status (128 + the signal that ended it).
enum RunCommand {
    static let options: [String: Bool] = Arguments.common.merging(["attach-output": true, "stderr-breadcrumbs": true, "capture": true]) {
        a, _ in a
    }

    /// How `run` captures the program's crashes (SPEC B-6).
    enum Capture: String {
        /// The crash writer preloaded into the program (`LD_PRELOAD`).
        case preload
        /// From outside: `run` traces the program and unwinds a crashed thread with
        /// libunwind-ptrace.
        case ptrace
    }

    /// `--capture=preload|ptrace`; by default the preload, or ptrace for a program the preload
    /// cannot reach (a static one: no dynamic loader reads LD_PRELOAD). A setuid program is
    /// never traced (the kernel would run it without its privileges).
    static func capture(_ arguments: Arguments, program: String) throws -> Capture {
        let system = Switches.system
        if let text = arguments.value("capture") {
            guard let capture = Capture(rawValue: text) else { throw UsageError("--capture '\(text)' is not preload or ptrace") }
            if capture == .ptrace, let path = Watchability.resolve(program, system: system), Watchability.isSetID(path, system: system) {
                throw UsageError(
                    "run: \(path) is setuid or setgid: it is never traced (traced, the kernel would run it without its privileges); "
                        + "run it without --capture=ptrace")
            }
            return capture
        }
        guard let path = Watchability.resolve(program, system: system), Watchability.isStaticELF(path, system: system),
            !Watchability.isSetID(path, system: system)
        else { return .preload }
        return .ptrace
    }

    /// The preloaded library, beside the `reporthost` executable or installed (`Shipped`).
    static let captureLibrary = "libreporthost-capture.so"

    static func run(_ arguments: Arguments, output: DocumentOutput) throws -> Int32 {
        guard let program = arguments.trailing.first, !program.isEmpty else {
            throw UsageError("run: missing program (usage: reporthost run [options] -- PROGRAM ARGS...)")
        }
        let keepBytes = try outputLimit(arguments)
        let options = try arguments.runtimeOptions()
        let configuration = options.configuration
        let logger = try configuration.makeLogger(overrideLevel: options.logLevel, system: Switches.system)
        let repository = URL(fileURLWithPath: Paths.absolute(configuration.repository))
        let crashes = CrashFolder.of(repository: repository)
        if case .failure(let failure) = Paths.makeFolder(crashes.path, system: Switches.system) {
            throw HostError.io(path: crashes.path, reason: "cannot create the crashes folder (\(failure))")
        }
        let library = try requireCaptureLibrary()
        let capture = try capture(arguments, program: program)
        if capture == .preload, let problem = Watchability.problem(with: program, system: Switches.system) { logger.warn("run: \(problem)") }
        if capture == .ptrace { logger.debug("run: \(program) is traced: its crashes are captured from outside") }
        let session = UUID().uuidString.lowercased()
        let environment = capture == .ptrace ? ProcessInfo.processInfo.environment : PreloadEnvironment.make(
            from: ProcessInfo.processInfo.environment, library: library, crashes: crashes, session: session,
            configuration: configuration)

        // Handlers before the child: a signal sent to `run` is never fatal to it (which would
        // orphan the child), and one sent while the child starts still reaches it.
        // Its standard error goes through a pipe (copied to ours) when its last lines become
        // breadcrumbs (SPEC B-1) or its tail an attachment; else the program has ours.
        let crumbLines = try stderrBreadcrumbs(arguments, default: configuration.breadcrumbsMax)
        // SPEC B-5: the program's memory cgroup (run's: it inherits it) and its OOM kills so
        // far; a SIGKILL with more afterwards was the OOM killer's.
        let cgroup = MemoryCgroup.of(pid: getpid(), system: Switches.system)
        let oomKillsBefore = cgroup?.oomKills
        let startedAt = Switches.system.now()
        // Traced, the program starts as a shell that stops itself before it execs the
        // program: seized while stopped, none of the program runs untraced.
        let words = capture == .ptrace ? ChildProgram.stoppedTrampoline + arguments.trailing : arguments.trailing
        let child = try SignalForwarding.start {
            try ChildProgram.spawn(
                words, environment: environment, standardOutput: output.fileDescriptor,
                captureStandardError: keepBytes != nil || crumbLines > 0, system: Switches.system)
        }
        let tail = keepBytes != nil || crumbLines > 0 ? child.teeStandardError(keeping: keepBytes ?? 0, lines: crumbLines) : nil
        let ended: (status: Int32, signal: Int32?)
        if capture == .ptrace {
            ended = try trace(child, crashes: crashes, session: session)
        } else {
            child.awaitExit()
            ended = child.wait()
        }
        let endedAt = Switches.system.now()
        SignalForwarding.stop()
        let kept = tail?.finish(waitingAtMostMs: 3_000)
        var exit = ProgramExit(
            program: URL(fileURLWithPath: program).lastPathComponent, session: session, signal: ended.signal, status: ended.status,
            output: keepBytes == nil ? nil : kept?.bytes, pid: child.pid)
        exit.breadcrumbs = kept?.lines ?? []
        exit.startedAt = startedAt
        exit.endedAt = endedAt
        if ended.signal == SIGKILL {
            exit.exitCause = cgroup?.exitCause(oomKillsBefore: oomKillsBefore) ?? "unknown"
            exit.memoryPeakBytes = cgroup?.peakBytes
            exit.memoryLimitBytes = cgroup?.limitBytes
        }
        if let name = exit.signalName {
            let cause = exit.exitCause == "oom_kill" ? ": the kernel's OOM killer (memory cgroup \(cgroup?.folder ?? "?"))" : ""
            logger.info("run: \(exit.program) ended by \(name) (exit status \(exit.status))\(cause)")
        }

        // From here on `run` exits with the program's status whatever the host meets.
        recordWhatItLeft(exit, options: options, logger: logger)
        return exit.status
    }

    /// The capture library's path (`Shipped`); missing, an I/O error.
    private static func requireCaptureLibrary() throws -> String {
        guard let folder = Shipped.folder(holding: [captureLibrary]) else {
            let library = "\(Shipped.executableFolder())/\(captureLibrary)"
            throw HostError.io(path: library, reason: "the capture library is missing beside reporthost (build every product: scripts/build, or install them: scripts/install)")
        }
        return "\(folder)/\(captureLibrary)"
    }

    /// What the program left, recovered now: `start` stores its crash files or an abnormal
    /// exit, and `recover` runs their chains (which give each report its final id; recovery
    /// logs it). A failure to store is said on stderr, never passed off as the program's status.
    private static func recordWhatItLeft(_ exit: ProgramExit, options: RuntimeOptions, logger: HostLogger) {
        do {
            var watching = options
            watching.watchedProgram = exit
            watching.delivery = .onePass(retries: false)
            let runtime = try Runtime.start(watching)
            defer { runtime.stop() }
            try runtime.recover()
            let summary = try runtime.deliver()
            if summary.accepted > 0 { logger.info("run: \(summary.accepted) report(s) delivered") }
        } catch {
            writeStandardError("reporthost: error: run: \(exit.program) ended (status \(exit.status)) but what it left could not be recorded: \(error)\n")
        }
    }

    /// Traces `child` until it ends (`rh_trace_program`); its status as `ChildProgram.wait`
    /// gives it.
    static func trace(_ child: ChildProgram, crashes: URL, session: String) throws -> (status: Int32, signal: Int32?) {
        var error = [CChar](repeating: 0, count: 512)
        let raw = rh_trace_program(child.pid, crashes.path, session, &error, error.count)
        guard raw >= 0 else {
            throw HostError.runtime("run: \(String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))")
        }
        return ChildProgram.decode(raw)
    }

    /// `--stderr-breadcrumbs N`: how many of the program's last standard-error lines become
    /// breadcrumbs (0: none, and its standard error is ours, not a pipe); `breadcrumbs.max`
    /// by default.
    static func stderrBreadcrumbs(_ arguments: Arguments, default lines: Int) throws -> Int {
        guard let text = arguments.value("stderr-breadcrumbs") else { return lines }
        guard let count = Int(text), (0...10_000).contains(count) else {
            throw UsageError("--stderr-breadcrumbs '\(text)' is not a count of lines from 0 to 10000")
        }
        return count
    }

    /// `--attach-output KB`: 1 … 3072 (the 3 MB attachment limit).
    static func outputLimit(_ arguments: Arguments) throws -> Int? {
        guard let text = arguments.value("attach-output") else { return nil }
        guard let kb = Int(text), (1...3_072).contains(kb) else {
            throw UsageError("--attach-output '\(text)' is not a size in KB from 1 to 3072")
        }
        return kb * 1024
    }
}
