import FoundationEssentials
import Glibc
import HostModel
import HostSupport
import HostPlugins
import HostStore

/// How a program watched by `reporthost run` ended, and what it left: its crash files carry
/// the run's session id; a death by a signal without one (SIGKILL, the OOM killer) becomes an
/// `abnormal_exit` report of its own.
public struct ProgramExit: Sendable, Equatable {
    /// The program as it was started (its first word).
    public var program: String
    /// The session id its crash files carry.
    public var session: String
    /// The signal that ended it, or nil when it exited.
    public var signal: Int32?
    /// Its exit status (128 + the signal when a signal ended it).
    public var status: Int32
    /// The last bytes of its standard error, when they were kept (`--attach-output`).
    public var output: Data?
    /// The watched process itself (nil: not known). A process it forked writes crash files
    /// under the same session with a pid of its own.
    public var pid: pid_t?
    /// Its last standard-error lines (`run`), the breadcrumbs of its reports (SPEC B-1).
    public var breadcrumbs: [Breadcrumb] = []
    /// When it started and ended (its session in the history, SPEC B-2); nil: not known.
    public var startedAt: Date?
    public var endedAt: Date?
    /// Why SIGKILL ended it (SPEC B-5): `oom_kill`, `killed` or `unknown`; nil for another end.
    public var exitCause: String?
    /// Its memory cgroup's peak use and limit, when known (with `exitCause`).
    public var memoryPeakBytes: Int?
    public var memoryLimitBytes: Int?

    public init(program: String, session: String, signal: Int32?, status: Int32, output: Data?, pid: pid_t? = nil) {
        self.program = program
        self.session = session
        self.signal = signal
        self.status = status
        self.output = output
        self.pid = pid
    }

    /// Whether the crash file named `name` was written by the watched process itself (not by
    /// a child it forked): by the preload under the run's session, or by ReportHost embedded
    /// in the program under its own (the preload hands its host the signal), named by the
    /// process's pid and written after it started.
    func wrote(crashFileNamed name: String) -> Bool {
        if name.hasPrefix(session + "-") { return pid == nil || CrashFile.writerPID(ofName: name) == pid }
        guard let pid, CrashFile.writerPID(ofName: name) == pid else { return false }
        guard let startedAt, let written = CrashFile.writerTime(ofName: name) else { return true }
        return written >= Int64(startedAt.timeIntervalSince1970) - 1
    }

    /// It exited by itself with status 0: a fault it met before was one it survived.
    public var endedNormally: Bool { signal == nil && status == 0 }

    /// "SIGKILL", or "signal N" for one without a name here.
    public var signalName: String? {
        signal.map { number in Self.names[number].map { "SIG" + $0 } ?? "signal \(number)" }
    }

    private static let names: [Int32: String] = CrashFile.signalNames.merging([
        SIGKILL: "KILL", SIGTERM: "TERM", SIGINT: "INT", SIGHUP: "HUP", SIGQUIT: "QUIT", SIGPIPE: "PIPE", SIGALRM: "ALRM",
        SIGUSR1: "USR1", SIGUSR2: "USR2", SIGXCPU: "XCPU", SIGXFSZ: "XFSZ", SIGSYS: "SYS",
    ]) { name, _ in name }
}

extension Recovery {
    /// A watched program a signal ended without leaving a crash file (stored or still in
    /// `crashes/`) becomes an `abnormal_exit` report, waiting for the chain. Its crash files,
    /// when it left some, are saved by `collect` with its name and output.
    func recordKilled(_ exit: ProgramExit, savedNow: [String] = []) throws(StorageError) {
        guard let signalName = exit.signalName else { return }
        // A crash of a child it forked is that child's report, not this death's cause. With no
        // pid known, any crash stored for the session counts.
        guard !leftCrashFiles(exit), !savedNow.contains(where: exit.wrote) else { return }
        if exit.pid == nil, try repository.sessionsWithCrashReports().contains(exit.session) { return }
        let document = FoundReports.killed(exit, signalName: signalName, hostAttributes: host.attributes.snapshot, now: repository.system.now())
        try repository.saveFound(document, session: exit.session)
        // No id here: the chain gives the report the id it is stored and sent under, and
        // recovery logs that one.
        log.info("\(exit.program) ended by \(signalName) without a crash file: recorded as an abnormal exit")
    }

    /// The watched program's session in the history (SPEC B-2): crashed when it left a crash
    /// file of its own, ended abnormally when a signal ended it without one, clean otherwise.
    func recordSession(of exit: ProgramExit, savedNow: [String] = []) throws(StorageError) {
        // ReportHost embedded in the program keeps the session itself (the preload's marker).
        let marker = repository.crashesFolder.appendingPathComponent("\(exit.session).host", isDirectory: false).path
        if repository.system.fileExists(marker) {
            _ = repository.system.unlink(marker)
            return
        }
        let crashed = savedNow.contains(where: exit.wrote) || leftCrashFiles(exit)
        let end: Repository.SessionEnd = crashed ? .crashed : exit.signal != nil ? .abnormalExit : .clean
        let now = repository.system.now()
        try repository.recordWatchedSession(
            exit.session, startedAt: exit.startedAt ?? now, endedAt: exit.endedAt ?? now, end: end,
            history: Repository.SessionStart(release: host.release, limits: host.configuration.sessions))
        if host.configuration.metrics.enabled {
            try repository.queueMetricEvents(SessionMetrics.events(
                application: exit.program, release: host.release, session: exit.session, guid: repository.installationGUID(),
                at: exit.startedAt ?? now))
        }
    }

    /// What a secondary records of a watched program: it recovers nothing (I-2), so crash
    /// files of a fault the program survived are discarded, the others left for the process
    /// holding the repository; a death that left none is recorded here.
    package func recordAsSecondary(_ exit: ProgramExit) throws(StorageError) {
        if exit.endedNormally { try discardCrashFiles(of: exit) }
        if leftCrashFiles(exit) {
            log.info("\(exit.program)'s crash file is left for the process holding the repository, or the next launch")
        }
        try recordKilled(exit)
        try recordSession(of: exit)
    }

    private func leftCrashFiles(_ exit: ProgramExit) -> Bool {
        (repository.system.entries(ofFolder: repository.crashesFolder.path) ?? [])
            .contains(where: exit.wrote)
    }
}
