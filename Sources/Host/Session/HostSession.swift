import Foundation

/// One launch of a host over its repository (SPEC I-2): takes the lock, recovers what
/// earlier launches left (crash files, interrupted saves and chains, abnormal exits), marks
/// this session, and then stores every report it raises. Ends with `end()` (a clean stop
/// clears the session mark); a process that dies instead leaves the mark, and the next
/// launch reports an abnormal exit (SPEC D-16).
public final class HostSession: Sendable {
    public let host: ReportHost
    public let repository: Repository
    public let sessionID: String
    /// Documents of the reports recovered during this launch, oldest first.
    public let recovered: [ReportDocument]
    private let lock: RepositoryLock

    private init(host: ReportHost, repository: Repository, lock: RepositoryLock, sessionID: String, recovered: [ReportDocument]) {
        self.host = host
        self.repository = repository
        self.lock = lock
        self.sessionID = sessionID
        self.recovered = recovered
    }

    /// Launches `host` over the repository its configuration names: lock, session mark,
    /// crash capture, then what earlier launches left (crash files first, so a plugin that
    /// crashed the host is quarantined before it is opened), then the configured plugins
    /// (quarantined ones left out), then the chains of recovered reports. Plugins set on
    /// the host before this call are kept: recovered reports run through them (SPEC H-2).
    /// - Parameter lockWaitMs: how long to wait for another process's repository lock.
    public static func launch(host: ReportHost, installCrashCapture: Bool = true, lockWaitMs: Int = RepositoryLock.defaultWaitMs)
        throws(HostError) -> HostSession
    {
        let folder = URL(fileURLWithPath: Paths.absolute(host.configuration.repository))
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw .io(path: folder.path, reason: "cannot create the repository folder (\(errnoText(error)))")
        }
        let lock = try storing { () throws(StorageError) in try RepositoryLock(folder: folder, waitMilliseconds: lockWaitMs) }
        let repository = try storing { () throws(StorageError) in
            try Repository.open(folder: folder, limits: host.configuration.storage, faults: host.faults)
        }
        host.logger.debug("repository \(folder.path) opened")
        let sessionID = UUID().uuidString.lowercased()
        // I-2: mark the session and arm crash capture before recovering, so a plugin that
        // crashes or hangs on a recovered report is itself recorded.
        try storing { () throws(StorageError) in try repository.markSession(sessionID, phase: .recovering) }
        do throws(HostError) {
            return try finishLaunch(host: host, repository: repository, lock: lock, sessionID: sessionID, installCrashCapture: installCrashCapture)
        } catch {
            // A clean failure (a plugin that refuses to load, a storage error) is not an
            // abnormal exit: the next launch must not report one.
            try? repository.clearSession(sessionID)
            throw error
        }
    }

    /// The rest of a launch, once the session is marked.
    private static func finishLaunch(
        host: ReportHost, repository: Repository, lock: RepositoryLock, sessionID: String, installCrashCapture: Bool
    ) throws(HostError) -> HostSession {
        if installCrashCapture {
            let capture = host.crashCapture
            capture.install(crashes: repository.crashesFolder, session: sessionID, attributes: host.attributes.snapshot)
            // Running-app callbacks run on the main thread: it needs its own alternate stack.
            _ = host.mainExecutor.sync { capture.prepareThread() }
        }
        // A host killed between a commit and the file deletions after it left those files.
        let swept = try storing { () throws(StorageError) in try repository.sweepLeftovers() }
        if swept > 0 { host.logger.info("removed \(swept) leftover file(s) of an interrupted run") }
        let recovery = Recovery(host: host, repository: repository)
        try recovery.collect(currentSession: sessionID)
        try loadConfiguredPlugins(host: host, repository: repository)
        let recovered = try recovery.finish(currentSession: sessionID)
        try storing { () throws(StorageError) in try repository.setSessionPhase(sessionID, .running) }
        // D-9: a record left `submitting` counts that attempt as a retryable failure, due now.
        try Deliverer(
            repository: repository, configuration: host.configuration, transport: NoTransport(), logger: host.logger,
            faults: host.faults
        ).settleInterrupted()
        _ = try host.launch()
        return HostSession(host: host, repository: repository, lock: lock, sessionID: sessionID, recovered: recovered)
    }

    /// Loads the plugins the configuration names, except a file that crashed the host before
    /// (its quarantine entry names its real path and digest): that slot runs empty, with one
    /// warning per launch and a note on every report.
    private static func loadConfiguredPlugins(host: ReportHost, repository: Repository) throws(HostError) {
        var skipped: [QuarantineEntry] = []
        for slot in PluginSlot.allCases {
            guard let path = host.configuration.plugins[slot] else { continue }
            let identity = PluginIdentity(path: path)
            if let entry = try storing({ () throws(StorageError) in try repository.quarantineEntry(for: identity) }) {
                host.logger.warn("\(slot.rawValue) slot left empty: \(entry.reason)")
                skipped.append(entry)
                continue
            }
            try host.loadPlugin(at: path, into: slot, identity: identity)
        }
        host.setQuarantined(skipped)
    }

    /// Raises a running-app report and stores it: journaled before its first callback
    /// (SPEC H-13), stored with the chain's result after bundling. nil when the user
    /// cancelled the dialog (nothing is stored).
    public func raise(_ request: ReportRequest) throws(HostError) -> ReportDocument? {
        let report = host.makeReport(request)
        let journal = report.snapshot
        let rowID = try storing { () throws(StorageError) in
            try repository.insert(journal, state: .pendingChain, session: sessionID, dialogPending: request.dialog != nil)
        }
        host.faults.hit(.afterJournal)
        let dialog = request.dialog.map {
            JournalingDialog(presenter: $0, repository: repository, rowID: rowID, journal: journal, log: host.logger)
        }
        host.faults.hit(.duringHandlers)
        let mode: ChainMode = request.isTerminating ? .terminating : .runningApp
        guard let document = try host.runChain(report, mode: mode, dialog: dialog) else {
            try storing { () throws(StorageError) in try repository.delete(rowID) }
            return nil
        }
        try storing { () throws(StorageError) in try repository.update(rowID, document: document, state: .awaitingFirstAttempt) }
        host.logger.info("report \(document.id) (\(document.type.name), \(document.trigger.name)) stored")
        return document
    }

    /// Delivers over `transport` (the network by default) with this host's configuration.
    public func deliverer(transport: (any SubmissionTransport)? = nil) -> Deliverer {
        Deliverer(
            repository: repository, configuration: host.configuration,
            transport: transport ?? URLSessionTransport(timeoutMs: host.configuration.submission.timeoutMs), logger: host.logger,
            faults: host.faults)
    }

    /// A clean stop: clears the session mark and releases the lock.
    public func end() {
        do {
            try repository.clearSession(sessionID)
        } catch {
            host.logger.warn("could not clear session mark \(sessionID): \(error)")
        }
        lock.release()
    }
}

/// Lets the journal know the user sent a dialog report: from then on it is a report to
/// deliver, even if the host dies during the after-callbacks (SPEC H-13). The journal keeps the
/// report as raised plus the user's edits: never the callbacks' changes.
struct JournalingDialog: DialogPresenter {
    let presenter: any DialogPresenter
    let repository: Repository
    let rowID: Int64
    let journal: ReportDocument
    let log: HostLogger

    func present(_ fields: DialogFields) -> DialogDecision {
        let decision = presenter.present(fields)
        if case .send(let edited) = decision {
            var sent = journal
            sent.content.summary = edited.summary
            sent.content.description = edited.description
            sent.content.labels = edited.labels
            sent.content.severity = edited.severity
            do {
                try repository.update(rowID, document: sent, state: .pendingChain, dialogPending: false)
            } catch {
                log.warn("could not journal the sent dialog report \(journal.id): \(error)")
            }
        }
        return decision
    }
}

extension LiveReport {
    /// The report as it stands, without bundling it (for the journal).
    var snapshot: ReportDocument {
        ReportDocument(id: id, trigger: trigger, content: content, internalLog: internalLog, createdAt: createdAt)
    }
}
