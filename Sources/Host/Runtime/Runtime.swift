import Dispatch
import FoundationEssentials
import Glibc
import HostModel
import HostSupport
import HostCapture
import HostPlugins
import HostStore
import HostRecovery
import HostDelivery

/// Everything an entry (a CLI command, `embed.h`, `run`, `demo`) hands the engine: the
/// configuration (file and command line already merged) and how this entry runs. Filled by
/// every entry, validated whole by `Runtime.start` before anything is opened (SPEC I-2).
public struct RuntimeOptions: Sendable {
    public var configuration: Configuration
    /// `--log-level`: overrides every destination's level.
    public var logLevel: LogLevel?
    /// Where running-app callbacks run (SPEC H-8): the CLI's `DispatchQueue.main`, an
    /// embedding program's thread of the host's own, a test's executor.
    public var mainExecutor: any MainExecutor
    package var faults = Faults()
    /// What to do when another process holds the repository lock.
    public var whenLockHeld = WhenLockHeld.runAsSecondary
    public var installCrashCapture = true
    /// Sees every pipeline event (the demo prints the plugins' changes).
    package var observer: PipelineObserver?
    /// How the program `reporthost run` watched ended: `start` records what it left (its
    /// crash files, with its name and output, or an `abnormal_exit` for a signal that left
    /// none; crash files of a fault it survived are discarded) and `recover` runs the chains.
    public var watchedProgram: ProgramExit?
    /// How `Runtime.deliver` delivers for this entry.
    public var delivery = Delivery.none
    /// Whose breadcrumbs the session's ring takes (SPEC B-1): the host's own, one after
    /// another (one lane), or an embedding program's threads, at once (a lane for each of up
    /// to 15 threads, 2 MB by default; breadcrumb_ring.h).
    public var breadcrumbWriters = BreadcrumbWriters.host

    /// Who writes into a session's breadcrumb ring.
    public enum BreadcrumbWriters: Sendable, Equatable {
        /// The host alone: a CLI command, `run` (the watched program's standard error).
        case host
        /// An embedding program's threads, any number at once (`rh_embed_breadcrumb`).
        case threads
    }

    /// How an entry delivers what is stored (`Runtime.deliver`).
    public enum Delivery: Sendable, Equatable {
        /// Nothing is sent (`crash`: the next launch delivers).
        case none
        /// One pass: initial attempts, recovered reports first, and with `retries` (a primary
        /// only) the due retries (`report` and `run` make initial attempts only, SPEC I-3).
        case onePass(retries: Bool)
        /// The one delivery worker, in the background until stop: a pass at once, whenever a
        /// report is raised and when the next retry is due (`launch --watch`, embedding programs).
        case worker
    }

    /// SPEC I-2: every entry runs at once as a secondary when the lock is held, except
    /// `launch --watch`, which waits to become primary.
    public enum WhenLockHeld: Sendable {
        case runAsSecondary
        /// Waits until the lock is free (`launch --watch`), or until `giveUp` says so (a
        /// signal): then `start` throws `HostError.lockHeld`.
        case waitToBePrimary(giveUp: @Sendable () -> Bool)
    }

    public init(configuration: Configuration, mainExecutor: any MainExecutor) {
        self.configuration = configuration
        self.mainExecutor = mainExecutor
    }
}

/// The engine's one front door: a launch of the host over its repository, built from
/// `RuntimeOptions`. It owns the repository session (primary or secondary, SPEC I-2), crash
/// capture, the configured plugins, raising reports, and delivery (one pass at a time for
/// one-shot commands, or the `DeliveryWorker` for `launch --watch` and embedding programs),
/// and ends with `stop(graceMs:)`.
///
/// Lifecycle: `start` (lock, session mark, crash capture, crash files, plugins) → `recover`
/// (chains of recovered reports; a secondary recovers nothing) → `raise` / `deliver` /
/// `drain` (one pass) or `startWorker` → `stop`.
///
/// # Thread safety
/// Safe from any thread except the main executor's (raising waits for work queued there).
public final class Runtime: Sendable {
    let host: ReportHost
    let session: HostSession
    private let worker = Locked<DeliveryWorker?>(nil)
    private let stopped = Locked(false)

    package var logger: HostLogger { host.logger }
    public var configuration: Configuration { host.configuration }
    /// Whether this process holds the repository lock (recovers and delivers retries).
    public var isPrimary: Bool { session.isPrimary }
    public var sessionID: String { session.sessionID }
    public var repositoryFolder: URL { session.repository.folder }
    /// Documents of the reports `recover` ran through the chain, oldest first.
    public var recovered: [ReportDocument] { session.recovered }
    /// Raises the `app_hang` report for `threads`, hung at once (SPEC B-4): the first is the
    /// faulting thread; `reporthost.hang_threads` says how many; `crash.threads` holds each
    /// stack taken (symbolicated), and `reporthost.hang_stack_missing` says why any is
    /// missing.
    package func raiseAppHang(
        threads: [(id: Int32, name: String)], timeoutMs: Int, stacks: [Int32: String], missing: [Int32: String]
    ) throws(HostError) -> ReportDocument? {
        guard let first = threads.first else { return nil }
        var request = ReportRequest(trigger: .appHang)
        let named = threads.prefix(5).map { "\($0.name) (\($0.id))" }.joined(separator: ", ") + (threads.count > 5 ? ", …" : "")
        request.summary = threads.count == 1
            ? "thread \(named) stopped answering: no heartbeat for \(timeoutMs) ms"
            : "\(threads.count) threads stopped answering at once: \(named); no heartbeat for \(timeoutMs) ms"
        // Backtrace's name for the thread a report is about.
        request.attributes["_mod_faulting_tid"] = String(first.id)
        request.attributes["reporthost.hang_timeout_ms"] = String(timeoutMs)
        request.attributes["reporthost.hang_threads"] = String(threads.count)
        let reasons = threads.compactMap { thread in missing[thread.id].map { "\(thread.name) (\(thread.id)): \($0)" } }
        if !reasons.isEmpty {
            request.attributes["reporthost.hang_stack_missing"] = reasons.prefix(5).joined(separator: "; ") + (reasons.count > 5 ? "; …" : "")
        }
        let now = session.repository.system.now()
        request.crash = CapturedStack.payload(
            stacks: threads.compactMap { thread in stacks[thread.id].map { (thread.id, thread.name, $0) } }, session: sessionID, pid: getpid(), at: now)
        let document = try raise(request)
        if let document { logger.warn("app hang: \(named) missed its heartbeat for \(timeoutMs) ms: report \(document.id)") }
        for reason in reasons { logger.warn("app hang: no stack for \(reason)") }
        return document
    }

    /// Sets an attribute on a stored report that has not left the machine (false when it has).
    package func setAttribute(_ key: String, _ value: String, onWaitingReport reportID: String) throws(HostError) -> Bool {
        try storing { () throws(StorageError) in try session.repository.setAttribute(key, value, onWaiting: reportID) }
    }

    /// SPEC B-3: crashed or abnormally ended sessions in a row before this one.
    public var consecutiveCrashes: Int { session.consecutiveCrashes }
    /// This session's breadcrumb ring (SPEC B-1), nil when breadcrumbs are off.
    package var breadcrumbs: BreadcrumbRing? { session.breadcrumbs }
    /// Reports held for a required slot now (recovered straight into `held`, or held before).
    package var heldForRequired: Int { (try? session.repository.heldForRequiredCount()) ?? 0 }

    /// This host's version (the `agentVersion` it sends).
    public static let version = HostAPITable.hostVersion
    /// The plugin ABI version it implements, `major.minor`.
    public static var pluginABI: String { "\(PluginLoader.hostVersion.major).\(PluginLoader.hostVersion.minor)" }

    private init(host: ReportHost, session: HostSession, delivery: RuntimeOptions.Delivery) {
        self.host = host
        self.session = session
        self.delivery = delivery
    }

    private let delivery: RuntimeOptions.Delivery

    /// Validates `options` whole, then opens the repository: lock (or a secondary session),
    /// session mark, crash capture, crash files, the configured plugins. Runs no callback.
    public static func start(_ options: RuntimeOptions) throws(HostError) -> Runtime {
        try options.configuration.validate()
        let submission = options.configuration.submission
        if let url = submission.endpoint {
            do throws(SubmissionURL.Problem) {
                _ = try LibcurlURL.check(url, allowInsecure: submission.allowInsecure)
            } catch {
                throw .configuration("configuration: key '\(submission.endpointKey)': \(error)")
            }
        }
        let system = options.faults.systemCalls
        try DescriptorLimit.ensure(system: system)
        // Nothing the host opens may land on a standard descriptor the program closed.
        StandardDescriptors.holdClosed(system: system)
        let logger = try options.configuration.makeLogger(overrideLevel: options.logLevel, system: system)
        let host = try ReportHost(
            configuration: options.configuration, logger: logger, mainExecutor: options.mainExecutor,
            observer: options.observer, faults: options.faults)
        let session: HostSession
        do {
            switch options.whenLockHeld {
            case .runAsSecondary:
                session = try HostSession.open(
                    host: host, installCrashCapture: options.installCrashCapture, lockWaitMs: 0, secondaryAllowed: true,
                    watched: options.watchedProgram, breadcrumbWriters: options.breadcrumbWriters)
            case .waitToBePrimary(let giveUp):
                session = try HostSession.open(
                    host: host, installCrashCapture: options.installCrashCapture, lockWaitMs: Int.max / 2,
                    secondaryAllowed: false, giveUpWaiting: giveUp, watched: options.watchedProgram,
                    breadcrumbWriters: options.breadcrumbWriters)
            }
        } catch {
            host.stop()
            throw error
        }
        return Runtime(host: host, session: session, delivery: options.delivery)
    }

    /// The process that holds the repository lock, when it is not this one (it wrote its pid
    /// into the lock file).
    public var primaryProcess: Int32? { isPrimary ? nil : FileLock.holder(of: session.lockPath, system: session.repository.system) }

    /// Runs the chains of what `start` recovered, then settles interrupted submissions.
    @discardableResult
    public func recover() throws(HostError) -> [ReportDocument] { try session.recover() }

    /// Reruns the chains of a few reports held for a required slot that can run now, each
    /// within its back-off (after `recover`). `launch` does; the delivery worker does in the
    /// background; a one-shot command raising its own report never waits for one.
    @discardableResult
    public func rerunHeld() throws(HostError) -> [ReportDocument] { try session.rerunHeld() }

    /// Names a file this session's crash files carry (`crash --attach`): registered in the
    /// repository with its device and inode, so recovery reads it only while it is that file.
    package func registerCrashAttachment(_ path: String) throws(HostError) {
        try storing { () throws(StorageError) in try session.repository.registerCrashAttachment(session: sessionID, path: path) }
        host.crashCapture.addAttachment(path: path)
    }

    /// Installs crash capture for a process that checks a plugin without a repository
    /// (`reporthost check`'s child): a crash leaves a crash file in `crashes` naming the
    /// plugin call it happened in. False when capture could not be installed.
    @discardableResult
    package static func captureCrashes(into crashes: URL, session: String) -> Bool {
        CrashCapture.process.install(crashes: crashes, session: session, attributes: [:])
    }

    /// Sets (a nil value removes) a host-wide attribute: every later report and the crash
    /// writer carry it. False when the key or value cannot be kept (SPEC R-4). Without a
    /// `release` key, the `version` attribute is the session's release (SPEC B-2), set now.
    public func setAttribute(_ key: String, _ value: String?) -> Bool {
        guard host.attributes.set(key, value) else { return false }
        if key == "version" && host.configuration.release == nil {
            do {
                try session.repository.setRelease(value, ofSession: session.sessionID)
            } catch {
                logger.warn("the session's release could not be set to \(value ?? "none") (\(error.message))")
            }
        }
        return true
    }

    /// Loads the plugin at `path` into `slot`, replacing what the slot held (the demo moves
    /// through the sample handlers so).
    package func loadPlugin(at path: String, into slot: PluginSlot) throws(HostError) {
        _ = try host.loadPlugin(at: path, into: slot)
    }

    /// Raises a running-app report and stores it (journaled first, SPEC H-13); nil when the
    /// user cancelled the dialog.
    public func raise(_ request: ReportRequest) throws(HostError) -> ReportDocument? {
        let document = try session.raise(request)
        worker.withLock { $0 }?.wake()
        return document
    }

    /// Delivers as the options say (`RuntimeOptions.delivery`): one pass (its summary), or
    /// the worker started (`onPass` sees each of its passes; an empty summary is returned), or
    /// nothing.
    @discardableResult
    package func deliver(onPass: @escaping @Sendable (Deliverer.Summary) -> Void = { _ in }) throws(HostError) -> Deliverer.Summary {
        switch delivery {
        case .none: return Deliverer.Summary()
        case .onePass(let retries): return try drain(retries: retries)
        case .worker:
            startWorker(onPass: onPass)
            return Deliverer.Summary()
        }
    }

    /// One delivery pass now, the worker's own (one-shot commands drain once): initial
    /// attempts and, with `retries` (a primary only), the due retries. A secondary sends
    /// initial attempts only: retries are the primary's (SPEC I-2).
    package func drain(retries: Bool, transport: (any SubmissionTransport)? = nil) throws(HostError) -> Deliverer.Summary {
        try session.deliverer(transport: transport).deliver(retries: retries && isPrimary)
    }

    /// Starts the one delivery worker (`RuntimeOptions.Delivery.worker`): it recovers (once
    /// per session), then delivers at once, whenever a report is raised, and when the next
    /// retry is due; `onPass` sees each pass's summary.
    private func startWorker(onPass: @escaping @Sendable (Deliverer.Summary) -> Void) {
        worker.withLock { worker in
            if worker == nil { worker = DeliveryWorker(session: session, onPass: onPass) }
        }
    }

    /// Ends the session (clears its mark, releases the lock) of a process about to exit
    /// without a full stop (the user interrupted the dialog: nothing was stored).
    public func abandon() { session.end() }

    /// SIGINT or SIGTERM during a chain (SPEC H-15): the remaining calls are skipped.
    public func interrupt() { host.interrupt() }
    public var isInterrupted: Bool { host.isInterrupted }

    /// A clean stop: the worker ends (a delivery in flight gets at most `graceMs`, then is
    /// cancelled and settled), plugins are destroyed, the session mark is cleared and the lock
    /// released. Later calls do nothing.
    public func stop(graceMs: Int = 2_000) {
        guard stopped.withLock({ stopped in defer { stopped = true }; return !stopped }) else { return }
        worker.withLock { $0 }?.stop(graceMs: graceMs)
        host.stop()
        session.end()
    }
}
