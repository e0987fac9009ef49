import FoundationEssentials
import Glibc
import HostModel
import HostSupport
import HostCapture
import HostPlugins
import HostStore
import HostRecovery
import HostDelivery

/// One launch of a host over its repository (SPEC I-2): takes the lock, recovers what
/// earlier launches left (crash files, interrupted saves and chains, abnormal exits), marks
/// this session, and then stores every report it raises. Ends with `end()` (a clean stop
/// clears the session mark and releases the lock); a process that dies instead leaves the
/// mark, and the next launch reports an abnormal exit (SPEC D-16).
///
/// A launch is `open` (lock, mark, crash capture, the crash files that name a plugin, the
/// configured plugins) then `recover` (the other crash files, abnormal exits, the chains
/// of recovered reports); `launch` does both. An embedding program runs `recover` in the
/// background.
package final class HostSession: Sendable {
    package let host: ReportHost
    package let repository: Repository
    package let sessionID: String
    /// Whether this process holds the repository lock, so it recovers and delivers. A
    /// secondary session (an embedding program's second copy) only marks itself and stores
    /// what it raises; the holder recovers and delivers for it.
    package let isPrimary: Bool
    private let lock: FileLock?
    /// The repository lock file (its holder wrote its pid there).
    var lockPath: String { repository.folder.appendingPathComponent(Repository.lockName).path }
    private let alive: FileLock
    private let recoveredDocuments = Locked<[ReportDocument]>([])
    private let recoveredOnce = Locked(false)
    /// How the program `reporthost run` watched ended: `recover` records what it left.
    private let watched: ProgramExit?
    /// This session's breadcrumb ring (SPEC B-1); nil with `breadcrumbs.max` 0, or when the
    /// file could not be made (logged: the session runs without breadcrumbs).
    package let breadcrumbs: BreadcrumbRing?
    /// Reads `breadcrumbs` for each report, keeping what the last one carried.
    private let breadcrumbReader: BreadcrumbReader?
    /// SPEC B-3: crashed or abnormally ended sessions in a row before this one.
    package let consecutiveCrashes: Int

    /// How long a launch waits for another process's lock (SPEC I-2).
    package static let defaultLockWaitMs = 10_000

    /// Documents of the reports recovered by `recover`, oldest first.
    package var recovered: [ReportDocument] { recoveredDocuments.withLock { $0 } }

    private init(
        host: ReportHost, repository: Repository, lock: FileLock?, alive: FileLock, sessionID: String, watched: ProgramExit?,
        breadcrumbs: BreadcrumbRing?, consecutiveCrashes: Int
    ) {
        self.host = host
        self.breadcrumbs = breadcrumbs
        breadcrumbReader = breadcrumbs.map(BreadcrumbReader.init)
        self.consecutiveCrashes = consecutiveCrashes
        self.watched = watched
        self.repository = repository
        self.lock = lock
        self.alive = alive
        self.sessionID = sessionID
        isPrimary = lock != nil
    }

    /// Opens the repository its configuration names for `host`: lock, session mark, crash
    /// capture, the crash files written inside a plugin call (so a plugin that crashed the
    /// host is quarantined before it is opened), then the configured plugins (quarantined ones
    /// left out). Runs no plugin callback, and reads no other crash file: `recover` saves the
    /// backlog, however large, so a start never waits for it.
    /// - Parameter secondaryAllowed: when the lock stays held by another process for
    ///   `lockWaitMs`, open a secondary session instead of failing.
    package static func open(
        host: ReportHost, installCrashCapture: Bool = true, lockWaitMs: Int = defaultLockWaitMs, secondaryAllowed: Bool = false,
        giveUpWaiting: () -> Bool = { false }, watched: ProgramExit? = nil,
        breadcrumbWriters: RuntimeOptions.BreadcrumbWriters = .host
    ) throws(HostError) -> HostSession {
        let folder = URL(fileURLWithPath: Paths.absolute(host.configuration.repository))
        if case .failure(let failure) = Paths.makeFolder(folder.path, system: host.system) {
            throw .io(path: folder.path, reason: "cannot create the repository folder (\(failure))")
        }
        let lockPath = folder.appendingPathComponent(Repository.lockName).path
        let lock = try storing { () throws(StorageError) in try FileLock.take(lockPath, waitMilliseconds: lockWaitMs, system: host.system, giveUp: giveUpWaiting) }
        guard lock != nil || secondaryAllowed else {
            throw .lockHeld(path: lockPath, holder: FileLock.holder(of: lockPath, system: host.system))
        }
        let repository = try storing { () throws(StorageError) in
            try Repository.open(
                folder: folder, limits: host.configuration.storage, faults: host.faults, system: host.system, logger: host.logger)
        }
        host.logger.debug("repository \(folder.path) opened\(lock == nil ? " as a secondary session (another process holds the lock)" : "")")
        let sessionID = randomUUID()
        let alive = try storing { () throws(StorageError) in try repository.holdAlive(sessionID) }
        // I-2: mark the session and arm crash capture before recovering, so a plugin that
        // crashes or hangs on a recovered report is itself recorded.
        // `run`'s own host is not one of the program's sessions: the watched program's is.
        let history = watched == nil
            ? Repository.SessionStart(release: host.release, limits: host.configuration.sessions, cgroup: MemoryCgroup.of(pid: getpid(), system: host.system))
            : nil
        let crashesBefore = try storing { () throws(StorageError) -> Int in
            try repository.markSession(sessionID, phase: lock == nil ? .running : .recovering, history: history)
            return history == nil ? 0 : try repository.consecutiveCrashes(before: sessionID)
        }
        if crashesBefore >= 2 { host.logger.warn("\(crashesBefore) consecutive crashed sessions before this one") }
        if history != nil && host.configuration.metrics.enabled { try queueMetrics(repository: repository, session: sessionID, host: host) }
        let ring = makeBreadcrumbRing(repository: repository, session: sessionID, host: host, writers: breadcrumbWriters)
        ring?.write(level: LogLevel.info.rawValue, category: Breadcrumb.hostCategory, "session \(sessionID) started\(host.release.map { " (release \($0))" } ?? "")")
        let session = HostSession(
            host: host, repository: repository, lock: lock, alive: alive, sessionID: sessionID, watched: watched,
            breadcrumbs: ring, consecutiveCrashes: crashesBefore)
        do throws(HostError) {
            try session.prepare(installCrashCapture: installCrashCapture)
            return session
        } catch {
            // A clean failure (a plugin that refuses to load, a storage error) is not an
            // abnormal exit: the next launch must not report one.
            session.end()
            throw error
        }
    }

    /// `metrics.enabled`: this session's start in Backtrace's unique and summed events form,
    /// queued for the next delivery pass, and the installation's `guid` and the session on
    /// every report (the server matches crashes to sessions by them).
    private static func queueMetrics(repository: Repository, session: String, host: ReportHost) throws(HostError) {
        let guid = repository.installationGUID()
        host.attributes.set("guid", guid)
        host.attributes.set("application.session", session)
        let application = host.attributes.snapshot["application"] ?? ProcessInfo.processInfo.processName
        try storing { () throws(StorageError) in
            try repository.queueMetricEvents(SessionMetrics.events(
                application: application, release: host.release, session: session, guid: guid, at: repository.system.now()))
        }
    }

    /// The session's ring file in `breadcrumbs/`, or nil (logged) when none can be made. Lanes
    /// for an embedding program's threads where the processor's counter can order them; one
    /// lane for the host's own breadcrumbs.
    private static func makeBreadcrumbRing(
        repository: Repository, session: String, host: ReportHost, writers: RuntimeOptions.BreadcrumbWriters
    ) -> BreadcrumbRing? {
        guard host.configuration.breadcrumbsMax > 0 else { return nil }
        let path = repository.breadcrumbsPath(session)
        if case .failure(let failure) = Paths.makeFolder(Paths.folder(of: path), system: repository.system) {
            host.logger.warn("breadcrumbs are off for this session: cannot create \(Paths.folder(of: path)) (\(failure))")
            return nil
        }
        let made = BreadcrumbRing.create(
            at: path, slots: host.configuration.breadcrumbsMax, threads: writers == .threads, system: repository.system)
        switch made {
        case .success(let ring): return ring
        case .failure(let failure):
            host.logger.warn("breadcrumbs are off for this session: cannot make \(path) (\(failure))")
            return nil
        }
    }

    /// The breadcrumbs a report of this session carries now, oldest first.
    package var currentBreadcrumbs: [Breadcrumb] {
        breadcrumbReader?.current(last: host.configuration.breadcrumbsMax) ?? []
    }

    /// The rest of `open`, once the session is marked.
    private func prepare(installCrashCapture: Bool) throws(HostError) {
        if installCrashCapture {
            let capture = host.crashCapture
            capture.install(crashes: repository.crashesFolder, session: sessionID, attributes: host.attributes.snapshot) { key in
                host.logger.info(CrashCapture.omission(of: key))
            }
            // Running-app callbacks run on the main thread: it needs its own alternate stack.
            _ = host.mainExecutor.sync { capture.prepareThread() }
        }
        if isPrimary {
            // An older repository, or one created under a wide umask by an older host.
            repository.tightenModes()
            // A host killed between a commit and the file deletions after it left those files.
            let swept = try storing { () throws(StorageError) in try repository.sweepLeftovers() }
            if swept > 0 { host.logger.info("removed \(swept) leftover file(s) of an interrupted run") }
            try Recovery(host: host, repository: repository).collectPluginCrashes()
        } else if let watched {
            // A secondary recovers nothing (I-2): the program's crash files wait for the
            // primary or the next launch; a death that left none is this run's own report.
            try storing { () throws(StorageError) in try Recovery(host: host, repository: repository).recordAsSecondary(watched) }
        }
        try Self.loadConfiguredPlugins(host: host, repository: repository)
    }

    /// Saves what earlier launches left (crash files in batches, how a watched program ended,
    /// abnormal exits), then runs the chains of what it saved and of chains an earlier launch
    /// did not finish, with the plugins loaded now; then settles interrupted submissions
    /// (D-9). A secondary session recovers nothing, and a session recovers once. Returns the
    /// documents recovered by this call.
    @discardableResult
    /// - Parameter crashFilesPerBatch: how many crash files one transaction saves (tests make
    ///   it small to see several batches).
    package func recover(crashFilesPerBatch: Int? = nil) throws(HostError) -> [ReportDocument] {
        // Once per session: `launch --watch` recovers, then starts the worker, which would again.
        guard isPrimary, recoveredOnce.withLock({ done in defer { done = true }; return !done }) else { return [] }
        // Once per repository (the log is kept): here, off an embedding program's start. Only
        // a speed-up: a failure leaves the log to grow as it would have.
        do {
            try repository.preallocateLog()
        } catch {
            host.logger.debug("write-ahead log not preallocated: \(error)")
        }
        let recovery = Recovery(host: host, repository: repository)
        let recovered = try recovery.collect(currentSession: sessionID, watched: watched, batch: crashFilesPerBatch ?? Recovery.crashFilesPerBatch)
            + recovery.finish(currentSession: sessionID)
        recoveredDocuments.withLock { $0 += recovered }
        try storing { () throws(StorageError) in try repository.setSessionPhase(sessionID, .running) }
        // D-9: a record left `submitting` counts that attempt as a retryable failure, due now.
        try storing { () throws(StorageError) in try repository.settleInterruptedSubmissions(retry: host.configuration.retry) }
        return recovered
    }

    /// Reruns the chains of reports held for a required slot that can run now (a few per
    /// call, each within its back-off: `Recovery.rerunHeldChains`). For `launch` and
    /// long-lived hosts, after `recover`: `report`, `crash` and `run` never wait for one.
    @discardableResult
    package func rerunHeld() throws(HostError) -> [ReportDocument] {
        guard isPrimary else { return [] }
        let released = try Recovery(host: host, repository: repository).rerunHeldChains(currentSession: sessionID)
        recoveredDocuments.withLock { $0 += released }
        let waiting = try storing { () throws(StorageError) in try repository.heldForRequiredCount() }
        if waiting > 0 { host.logger.info("\(waiting) report(s) held for a required slot") }
        return released
    }

    /// Loads the plugins the configuration names, except a file that crashed the host before
    /// (its quarantine entry names its real path and digest): that slot runs empty, with one
    /// warning per launch and a note on every report.
    private static func loadConfiguredPlugins(host: ReportHost, repository: Repository) throws(HostError) {
        var skipped: [QuarantineEntry] = []
        for slot in PluginSlot.allCases {
            guard let path = host.configuration.plugins[slot] else { continue }
            let identity = PluginIdentity(path: path, system: host.system)
            if let entry = try storing({ () throws(StorageError) in try repository.quarantineEntry(for: identity) }) {
                let copy = entry.path == identity.realPath ? "" : " (\(identity.realPath) has the same content)"
                host.logger.warn("\(slot.rawValue) slot left empty: \(entry.reason)\(copy)")
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
    package func raise(_ request: ReportRequest) throws(HostError) -> ReportDocument? {
        let slots = host.currentSlots
        let mode: ChainMode = request.isTerminating ? .terminating : .runningApp
        if request.dialog == nil && !slots.hasCallbacks {
            return try raiseUnchained(makeReport(request), mode: mode, slots: slots, crash: request.crash)
        }
        // The callbacks run on the main thread: it is woken now, while the report is made and
        // journaled, and looks for them instead of sleeping between them.
        let (journal, rowID, flush, chained) = try host.expectingCallbacks { () throws(HostError) in
            let report = makeReport(request)
            let journal = report.snapshot
            // Committed before the first callback, flushed while the callbacks run (one flush
            // per report; see `chainFinished`): stored once the flush is done, as before.
            let (rowID, flush) = try storing { () throws(StorageError) in
                try repository.journalFlushingBehind(journal, session: sessionID, dialogPending: request.dialog != nil, crash: request.crash)
            }
            host.faults.hit(.afterJournal)
            let dialog = request.dialog.map {
                JournalingDialog(presenter: $0, repository: repository, rowID: rowID, journal: journal, log: host.logger)
            }
            host.faults.hit(.duringHandlers)
            return (journal, rowID, flush, try host.chain(report, mode: mode, dialog: dialog, slots: slots))
        }
        guard let run = chained else {
            try storing { () throws(StorageError) in try repository.discard(rowID) }
            return nil
        }
        let document = run.document
        if let unmet = run.unmet(host.configuration.requiredSlots) {
            // The journal (with the user's dialog edits) stays what is stored: what the chain
            // did without its required slot is never sent.
            let held = try hold(rowID, journal: journal, document: document, unmet: unmet)
            try storing { () throws(StorageError) in try repository.waitUntilFlushed(flush) }
            return held
        }
        // The record holds the journal's breadcrumbs unless a dialog's edits were journaled.
        let journaled = request.dialog == nil ? journal : nil
        try storing { () throws(StorageError) in
            try repository.chainFinished(rowID, document: document, flush: false, journaled: journaled)
        }
        try storing { () throws(StorageError) in try repository.waitUntilFlushed(flush) }
        stored(document)
        return document
    }

    /// The report `request` raises, with the session's breadcrumbs; a request that brings its
    /// own (a check's planted ones) keeps them.
    private func makeReport(_ request: ReportRequest) -> LiveReport {
        var request = request
        if request.breadcrumbs.isEmpty { request.breadcrumbs = currentBreadcrumbs }
        return host.makeReport(request)
    }

    /// Says that `document` is stored: in the log, and as a breadcrumb of the host's own.
    private func stored(_ document: ReportDocument) {
        host.logger.info("report \(document.id) (\(document.type.name), \(document.trigger.name)) stored")
        breadcrumbs?.write(level: LogLevel.info.rawValue, category: Breadcrumb.hostCategory, "\(document.type.name) report \(document.id) stored")
    }

    /// A report no callback sees (no handler, no delegate, no dialog): the chain is the host's
    /// own code, so the report is stored once, after it, with one flush (H-13 journals a
    /// report before its first callback; there is none). A required slot that is empty holds
    /// it, as after a journal.
    private func raiseUnchained(_ report: LiveReport, mode: ChainMode, slots: ReportHost.ChainSlots, crash: JSONValue?)
        throws(HostError) -> ReportDocument?
    {
        // What a hold would store: taken only when a slot is required (else nothing is held).
        let journal = host.configuration.requiredSlots.isEmpty ? nil : report.snapshot
        host.faults.hit(.duringHandlers)
        guard let run = try host.chain(report, mode: mode, slots: slots) else { return nil }  // no dialog: never nil
        let document = run.document
        if let journal, let unmet = run.unmet(host.configuration.requiredSlots) {
            let rowID = try storing { () throws(StorageError) in
                try repository.journal(journal, session: sessionID, dialogPending: false, crash: crash)
            }
            return try hold(rowID, journal: journal, document: document, unmet: unmet)
        }
        try storing { () throws(StorageError) in try repository.storeUnchained(document, session: sessionID, crash: crash) }
        host.faults.hit(.afterJournal)
        stored(document)
        return document
    }

    /// Holds the journaled record `rowID` because a required slot did not run fully (`unmet`),
    /// with what the chain noted; returns the chain's `document`.
    private func hold(_ rowID: Int64, journal: ReportDocument, document: ReportDocument, unmet: String) throws(HostError)
        -> ReportDocument
    {
        try storing { () throws(StorageError) in
            try repository.holdForRequired(
                rowID, reason: unmet, notes: Array(document.internalLog.dropFirst(journal.internalLog.count)), chainEnded: true)
        }
        host.logger.warn("report \(document.id) held, not sent: \(unmet)")
        return document
    }

    /// Delivers over `transport` (the network by default) with this host's configuration.
    package func deliverer(transport: (any SubmissionTransport)? = nil) -> Deliverer {
        Deliverer(
            repository: repository, configuration: host.configuration,
            transport: transport ?? CurlTransport(), logger: host.logger, system: host.faults.systemCalls,
            faults: host.faults, ownSession: isPrimary ? nil : sessionID)
    }

    /// A clean stop: clears the session mark and releases the lock.
    package func end() {
        do {
            try repository.endSession(sessionID)
        } catch {
            host.logger.warn("could not clear session mark \(sessionID): \(error)")
        }
        alive.release()
        lock?.release()
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
                try repository.dialogSent(rowID, journal: sent)
            } catch {
                log.warn("could not journal the sent dialog report \(journal.id): \(error)")
            }
        }
        return decision
    }
}
