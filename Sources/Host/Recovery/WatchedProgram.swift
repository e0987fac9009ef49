import Foundation

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

    public init(program: String, session: String, signal: Int32?, status: Int32, output: Data?) {
        self.program = program
        self.session = session
        self.signal = signal
        self.status = status
        self.output = output
    }

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
    /// Records what `exit` left, once `collect` has saved its crash files: each crash record of
    /// its session gets the program's name and output; a program a signal ended without a
    /// crash file gets an `abnormal_exit` record. All wait for the chain (`finish`). Returns
    /// the ids of the records.
    func record(_ exit: ProgramExit) throws(StorageError) -> [String] {
        let output = exit.output.map { Attachment(name: "stderr.txt", filename: "stderr.txt", data: $0, source: .recovered) }
        let crashes = try repository.records(in: [.pendingChain]).filter { $0.session == exit.session && $0.trigger == .crash }
        for record in crashes {
            var document = record.document
            document.content.attributes["reporthost.program"] = exit.program
            document.content.attachments = try repository.attachments(of: record.rowID) + (output.map { [$0] } ?? [])
            try repository.update(record.rowID, document: document, state: .pendingChain)
        }
        if !crashes.isEmpty { return crashes.map(\.reportID) }
        guard let signalName = exit.signalName else { return [] }
        var content = ReportContent()
        content.summary = "\(exit.program) was killed by \(signalName) and left no crash file"
        content.attributes = host.attributes.snapshot.merging([
            "reporthost.program": exit.program, "reporthost.exit_signal": signalName, "reporthost.exit_status": "\(exit.status)",
        ]) { _, exit in exit }
        if let output { content.attachments = [output] }
        let document = ReportDocument(
            id: UUID().uuidString.lowercased(), trigger: .abnormalExit, content: content,
            internalLog: [InternalLogEntry(
                level: .info, handler: "host",
                message: "\(exit.program) (session \(exit.session)) ended by \(signalName) (a signal the crash writer cannot catch, or before it was installed)")],
            createdAt: Date())
        try repository.insert(document, state: .pendingChain, session: exit.session)
        log.info("\(exit.program) ended by \(signalName) without a crash file: recorded as abnormal exit \(document.id)")
        return [document.id]
    }
}
