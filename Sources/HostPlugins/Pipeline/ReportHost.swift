import PluginAPI
import HostModel
import HostSupport
import HostCapture

/// The ReportHost engine: holds the handler and delegate slots, hands plugins their host
/// table, and runs every report through the chain before it is bundled.
///
/// Lifecycle: create with a configuration → set or load the wrapper, handler and delegate →
/// `launch` (recovered reports are processed here, with the handlers set so far, SPEC H-2)
/// → raise reports → `stop`.
///
/// # Thread safety
/// Safe from any thread except the main executor's: loading plugins and raising reports
/// wait for work they queue there.
package final class ReportHost: Sendable {
    package let configuration: Configuration
    package let logger: HostLogger
    package let hostID: UInt32
    package let attributes: HostAttributes
    let clock: any HostClock
    package let mainExecutor: any MainExecutor
    /// The crash writer this host marks its plugin calls with and prepares threads for.
    package let crashCapture: CrashCapture
    /// Faults armed for tests (none in production).
    package let faults: Faults
    /// The seam this host and everything it opens is handed (with `faults`' plan and wall clock).
    package var system: SystemCalls { faults.systemCalls }
    let observer: PipelineObserver?
    /// Where reports send their rule events: the observer, as `.broke`.
    package let events: RuleEventSink
    let completions: ClosurePool
    let decisions: ClosurePool
    let active = ActiveCalls()
    /// One host table a slot (ABI 1.1: `options_json` and `data_folder` answer for their slot).
    private let tables: [PluginSlot: SendablePointer<rh_host_api>]
    private let slots: Locked<ChainSlots>
    /// Slots whose plugin's entry is running: its name is not known yet (`data_folder`).
    private let loading: Locked<Set<PluginSlot>>
    /// Set once a `destroy` could not start: later ones do not wait for the main thread again.
    private let mainThreadBlocked = Locked(false)
    /// Configured plugins left out because they crashed the host: every report notes them.
    private let quarantine = Locked<[QuarantineEntry]>([])

    /// What a chain calls besides the host's own code.
    package struct ChainSlots: Sendable {
        fileprivate var handlers: [HandlerSlot: Handler] = [:]
        fileprivate var delegate: Delegate?

        /// Whether a chain run over these slots calls anything (a handler or a delegate).
        package var hasCallbacks: Bool { !handlers.isEmpty || delegate != nil }

        /// The name of the plugin in `slot`.
        func pluginName(in slot: PluginSlot) -> String? {
            switch slot {
            case .wrapper: handlers[.wrapper]?.name
            case .handler: handlers[.handler]?.name
            case .delegate: delegate?.name
            }
        }
    }

    /// The slots as they are now: a chain given them runs exactly these, whatever is set later.
    package var currentSlots: ChainSlots { slots.withLock { $0 } }

    /// Creates a host; fails (exit 1) when libffi closures cannot be allocated.
    package init(
        configuration: Configuration, logger: HostLogger, clock: any HostClock = SystemClock(),
        mainExecutor: any MainExecutor, observer: PipelineObserver? = nil, crashCapture: CrashCapture = .process,
        faults: Faults = Faults()
    ) throws(HostError) {
        self.configuration = configuration
        self.crashCapture = crashCapture
        self.faults = faults
        self.logger = logger
        self.clock = clock
        self.mainExecutor = mainExecutor
        self.observer = observer
        events = { handler, event in observer?(.broke(handler: handler, event)) }
        attributes = HostAttributes(configuration.attributes) { key, value in
            guard !crashCapture.setAttribute(key, value) else { return }
            logger.info(CrashCapture.omission(of: key))
        }
        let slots = Locked(ChainSlots())
        let loading = Locked<Set<PluginSlot>>([])
        self.slots = slots
        self.loading = loading
        let repository = Paths.absolute(configuration.repository)
        hostID = HostDirectory.shared.register(.init(
            log: logger, attributes: attributes, events: events,
            pluginOptions: Dictionary(uniqueKeysWithValues: configuration.pluginOptions.map { ($0.key.rawValue, $0.value.serialized()) }),
            dataFolder: { slotName in
                guard let slot = PluginSlot(rawValue: slotName), !loading.withLock({ $0.contains(slot) }),
                    let name = slots.withLock({ $0.pluginName(in: slot) })
                else { return nil }
                return PluginDataFolder.make(repository: repository, plugin: name, system: faults.systemCalls)
            }))
        tables = try HostAPITable.make(hostID: hostID, faults: faults).mapValues { SendablePointer(pointer: UnsafeMutablePointer(mutating: $0)) }
        let window = configuration.limits.effectiveCompletionWindowMs
        completions = ClosurePool(windowMilliseconds: window, clock: clock, signature: .completion, faults: faults)
        decisions = ClosurePool(windowMilliseconds: window, clock: clock, signature: .decision, faults: faults)
        // Fail at start, not in the middle of a report, where closures cannot be made.
        let probe = try completions.acquire(for: CallbackCompletion(onFirst: {}, onIgnored: { _ in }))
        completions.methodReturned(probe.slot)
        completions.release(probe.slot)
        logger.debug("host \(hostID) created")
    }

    /// The table this host hands to the plugin in `slot` (valid for the life of the process).
    package func hostAPI(for slot: PluginSlot = .handler) -> UnsafePointer<rh_host_api> {
        UnsafePointer(tables[slot]!.pointer)
    }

    // MARK: Slots

    /// Puts `handler` in `slot`, or empties it with nil (SPEC H-1). The previous handler's
    /// `destroy` runs once, on the main executor, after any callback of it queued there.
    package func setHandler(_ handler: Handler?, for slot: HandlerSlot) {
        let previous = slots.withLock { slots in
            defer { slots.handlers[slot] = handler }
            return slots.handlers[slot]
        }
        if let previous {
            logger.debug("\(slot.rawValue) \(previous.name) removed")
            // The main-thread job holds only a box it empties, so the host's reference is gone
            // when this returns, whenever the executor drops the job itself (H-1).
            let box = Locked<Handler?>(previous)
            release(previous.name) { box.withLock { $0.take() }?.destroy() ?? true }
        }
    }

    /// Puts an in-process Swift handler in `slot`.
    package func setHandler(_ handler: SwiftHandler, for slot: HandlerSlot) { setHandler(.swift(handler), for: slot) }

    package func handler(in slot: HandlerSlot) -> Handler? { slots.withLock { $0.handlers[slot] } }

    /// Puts `delegate` in the delegate slot, or empties it with nil. A plugin delegate lives
    /// as long as its slot (its plugin's `destroy` runs when it leaves); a Swift delegate is
    /// held weakly (SPEC A-5).
    package func setDelegate(_ delegate: Delegate?) {
        let previous = slots.withLock { slots in
            defer { slots.delegate = delegate }
            return slots.delegate
        }
        if case .plugin(let plugin)? = previous { release(plugin.name) { plugin.destroy() } }
    }

    /// Runs a plugin's `destroy` on the main thread, waiting at most the callback limit: a main
    /// thread blocked by a hung callback (H-8) must not keep the host from stopping.
    private func release(_ name: String, _ destroy: @escaping @Sendable () -> Bool) {
        let wait = mainThreadBlocked.withLock { $0 } ? 0 : configuration.limits.callbackTimeoutMs
        switch mainExecutor.sync(timeoutMilliseconds: wait, destroy) {
        case true?: break
        case false?: logger.warn("\(name): destroy not called: a call into the plugin is still running")
        case nil:
            mainThreadBlocked.withLock { $0 = true }
            logger.warn("\(name): destroy not called within \(wait) ms: the main thread is blocked")
        }
    }

    package var delegate: Delegate? { slots.withLock { $0.delegate } }

    /// Whether `slot` holds something that can run (`plugins.required`): a handler, or a
    /// delegate still alive.
    package func canRun(_ slot: PluginSlot) -> Bool {
        switch slot {
        case .wrapper: handler(in: .wrapper) != nil
        case .handler: handler(in: .handler) != nil
        case .delegate: delegate?.name != nil
        }
    }

    /// Loads the plugin at `path` (made absolute first) into `slot`. The entry point runs
    /// on the main executor.
    @discardableResult
    package func loadPlugin(at path: String, into slot: PluginSlot) throws(HostError) -> LoadedPlugin {
        try loadPlugin(at: path, into: slot, identity: nil)
    }

    /// `loadPlugin`, with the file's identity when the caller has it already.
    @discardableResult
    package func loadPlugin(at path: String, into slot: PluginSlot, identity: PluginIdentity?) throws(HostError) -> LoadedPlugin {
        let table = tables[slot]!
        let capture = crashCapture
        loading.withLock { _ = $0.insert(slot) }
        defer { loading.withLock { _ = $0.remove(slot) } }
        // Bounded: an entry that never returns must not hang the host (it keeps the main
        // thread, so nothing else can run there either: the load fails with exit 2).
        let limit = configuration.limits.callbackTimeoutMs
        let result = mainExecutor.sync(timeoutMilliseconds: limit) { () -> Result<LoadedPlugin, PluginLoadError> in
            do throws(PluginLoadError) {
                return .success(try PluginLoader.load(
                    path: path, slot: slot, table: UnsafePointer(table.pointer), capture: capture, identity: identity, system: self.system))
            } catch {
                return .failure(error)
            }
        } ?? .failure(PluginLoadError(path: Paths.absolute(path), reason: .entryTimedOut(milliseconds: limit)))
        switch result {
        case .failure(let error): throw .plugin(error)
        case .success(let plugin):
            logger.debug("loaded \(plugin.name) \(plugin.version ?? "") from \(plugin.path) into the \(slot.rawValue) slot")
            switch slot {
            case .wrapper: setHandler(.plugin(plugin), for: .wrapper)
            case .handler: setHandler(.plugin(plugin), for: .handler)
            case .delegate: setDelegate(.plugin(plugin))
            }
            return plugin
        }
    }


    /// Records that the configured plugins of `entries` were not loaded (quarantined): every
    /// report raised from now on says so in its internal log.
    package func setQuarantined(_ entries: [QuarantineEntry]) { quarantine.withLock { $0 = entries } }

    package var quarantined: [QuarantineEntry] { quarantine.withLock { $0 } }

    /// Notes each quarantined plugin on `report`, naming it and why.
    package func noteQuarantine(on report: LiveReport) {
        for entry in quarantined { report.note(.warn, handler: entry.name, entry.reason) }
    }

    // MARK: Reports

    /// Makes a report for `request` with the host-wide attributes merged in (SPEC R-4), ready
    /// for `runChain` (a caller that journals reports first uses this).
    /// The program's release (SPEC B-2): the configuration's `release`, else the `version`
    /// attribute.
    package var release: String? { configuration.release ?? attributes.snapshot["version"] }

    package func makeReport(_ request: ReportRequest) -> LiveReport {
        let report = LiveReport(trigger: request.trigger, createdAt: system.now(), hostID: hostID, hostLog: logger, events: events)
        prepare(report, from: request)
        return report
    }

    /// Raises a running-app report (or a terminating one), runs the chain and returns the
    /// bundled document; nil when the user cancelled the dialog.
    package func raise(_ request: ReportRequest) throws(HostError) -> ReportDocument? {
        let mode: ChainMode = request.isTerminating ? .terminating : (request.trigger.isRecovered ? .recovered : .runningApp)
        return try runChain(makeReport(request), mode: mode, dialog: request.dialog)
    }

    /// Runs the chain over a prepared report in `mode`, with the slots as they are now.
    package func runChain(_ report: LiveReport, mode: ChainMode, dialog: (any DialogPresenter)? = nil) throws(HostError)
        -> ReportDocument?
    {
        try chain(report, mode: mode, dialog: dialog)?.document
    }

    /// `runChain`, telling also which slots did not run fully (for `plugins.required`).
    /// - Parameter slots: what to run (nil: `currentSlots`).
    package func chain(_ report: LiveReport, mode: ChainMode, dialog: (any DialogPresenter)? = nil, slots: ChainSlots? = nil)
        throws(HostError) -> ChainRun?
    {
        let slots = slots ?? currentSlots
        let invoker = Invoker(
            clock: clock, mainExecutor: mainExecutor, observer: observer, active: active, capture: crashCapture, logger: logger)
        let chain = Chain(
            callbacks: CallbackRunner(invoker: invoker, limits: configuration.limits, closures: completions),
            delegates: DelegateRunner(invoker: invoker, limits: configuration.limits, decisions: decisions),
            clock: clock, logger: logger, active: active)
        return try chain.run(report: report, handlers: slots.handlers, delegate: slots.delegate, mode: mode, dialog: dialog)
    }

    /// Runs `body`, which journals a report and runs its chain on the main thread: a main
    /// thread of the host's own (`ThreadExecutor`, an embedding program's) is woken now and
    /// looks for the callbacks until `body` returns, rather than sleep before each.
    package func expectingCallbacks<T>(_ body: () throws(HostError) -> T) throws(HostError) -> T {
        guard let executor = mainExecutor as? ThreadExecutor else { return try body() }
        return try executor.expectingJobs(body)
    }

    /// Fills a report before its first callback: host-wide attributes, then the request's
    /// (SPEC R-4 precedence), fields, and extended attachments.
    func prepare(_ report: LiveReport, from request: ReportRequest) {
        let hostAttributes = attributes.snapshot
        report.edit { content in
            content.attributes = hostAttributes.merging(request.attributes) { _, requested in requested }
            content.summary = request.summary
            content.description = request.description
            content.email = request.email
            content.severity = request.severity ?? 0
            content.labels = request.labels
            content.breadcrumbs = request.breadcrumbs
        }
        for (index, attachment) in request.attachments.enumerated() {
            let added = report.addAttachment(
                name: attachment.name, filename: attachment.filename, data: attachment.data, declaredSize: attachment.declaredSize,
                by: .extended)
            guard case .failure = added else { continue }
            // The internal log notes it too; the person who named the file hears it now.
            let size = attachment.declaredSize ?? UInt(attachment.data.count)
            let why =
                size == 0 ? "it is empty"
                : size > UInt(ReportContent.attachmentMaxBytes) ? "it is \(size) bytes, over the \(ReportContent.attachmentMaxBytes)-byte limit"
                : "a report takes at most \(ReportContent.attachmentsPerSource) attachments this way (this is number \(index + 1))"
            logger.warn("attachment \(attachment.filename) not attached: \(why)")
        }
        noteQuarantine(on: report)
    }

    // MARK: Stopping

    /// SPEC H-15 (SIGINT, SIGTERM): every call in flight or still to come is skipped and
    /// logged; chains running now go straight to bundling.
    package var isInterrupted: Bool { active.isStopping }

    package func interrupt() {
        logger.info("interrupted: skipping the remaining handler calls")
        active.stopAll()
    }

    /// Stops the host: calls still waiting are skipped (SPEC H-8), then the handlers and the
    /// delegate leave their slots, each plugin's `destroy` called once.
    package func stop() {
        active.stopAll()
        for slot in HandlerSlot.allCases { setHandler(nil, for: slot) }
        setDelegate(nil)
        logger.debug("host \(hostID) stopped")
    }
}
