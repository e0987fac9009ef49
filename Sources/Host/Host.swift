import Foundation
import PluginAPI

/// The ReportHost engine: holds the handler slots, hands plugins their host table, and
/// runs every report through the handler chain before it is bundled.
///
/// Lifecycle: create with a configuration → set or load handlers → raise reports → stop.
///
/// # Thread safety
/// Safe from any thread except the main executor's: `loadPlugin` and `raise` wait for
/// work they queue there.
public final class ReportHost: Sendable {
    public let configuration: Configuration
    public let logger: HostLogger
    public let hostID: UInt32
    public let attributes: HostAttributes
    let clock: any HostClock
    let mainExecutor: any MainExecutor
    let observer: PipelineObserver?
    let closures: ClosurePool
    private let table: SendablePointer<rh_host_api>
    private let slots = Locked<[HandlerSlot: Handler]>([:])

    /// Creates a host; fails (exit 1) when libffi closures cannot be allocated.
    public init(
        configuration: Configuration, logger: HostLogger, clock: any HostClock = SystemClock(),
        mainExecutor: any MainExecutor, observer: PipelineObserver? = nil
    ) throws(HostError) {
        self.configuration = configuration
        self.observer = observer
        self.logger = logger
        self.clock = clock
        self.mainExecutor = mainExecutor
        attributes = HostAttributes(configuration.attributes)
        hostID = HostDirectory.shared.register(.init(log: logger, attributes: attributes))
        table = SendablePointer(pointer: UnsafeMutablePointer(mutating: try HostAPITable.make(hostID: hostID)))
        closures = ClosurePool(windowMilliseconds: configuration.limits.effectiveCompletionWindowMs, clock: clock)
        // Fail at start, not in the middle of a report, where closures cannot be made.
        _ = try closures.acquire(for: CallbackCompletion(onFirst: {}, onIgnored: { _ in }))
        logger.debug("host \(hostID) created")
    }

    /// The table this host hands to its plugins (valid for the life of the process).
    public var hostAPI: UnsafePointer<rh_host_api> { UnsafePointer(table.pointer) }

    // MARK: Handlers

    /// Puts `handler` in `slot`, or empties it with nil (SPEC H-1). The previous handler's
    /// `destroy` runs once, on the main executor.
    public func setHandler(_ handler: Handler?, for slot: HandlerSlot) {
        let previous = slots.withLock { slots in
            defer { slots[slot] = handler }
            return slots[slot]
        }
        if let previous {
            logger.debug("\(slot.rawValue) \(previous.name) removed")
            mainExecutor.sync { previous.destroy() }
        }
    }

    public func handler(in slot: HandlerSlot) -> Handler? { slots.withLock { $0[slot] } }

    /// Loads the plugin at `path` (made absolute first) and, for the wrapper and handler
    /// slots, sets it there. The entry point runs on the main executor.
    @discardableResult
    public func loadPlugin(at path: String, into slot: PluginSlot) throws(HostError) -> LoadedPlugin {
        let table = self.table
        let result = mainExecutor.sync { () -> Result<LoadedPlugin, PluginLoadError> in
            do throws(PluginLoadError) {
                return .success(try PluginLoader.load(path: path, slot: slot, table: UnsafePointer(table.pointer)))
            } catch {
                return .failure(error)
            }
        }
        switch result {
        case .failure(let error): throw .plugin(error)
        case .success(let plugin):
            logger.debug("loaded \(plugin.name) \(plugin.version ?? "") from \(plugin.path) into the \(slot.rawValue) slot")
            switch slot {
            case .wrapper: setHandler(.plugin(plugin), for: .wrapper)
            case .handler: setHandler(.plugin(plugin), for: .handler)
            case .delegate: break
            }
            return plugin
        }
    }

    // MARK: Reports

    /// Raises a running-app report (or a terminating one), runs the chain and returns the
    /// bundled document.
    public func raise(_ request: ReportRequest) throws(HostError) -> ReportDocument {
        let report = LiveReport(trigger: request.trigger, hostID: hostID, hostLog: logger)
        prepare(report, from: request)
        let mode: ChainMode = request.isTerminating ? .terminating : (request.trigger.isRecovered ? .recovered : .runningApp)
        return try runChain(report, mode: mode)
    }

    /// Runs the chain over an already prepared report in `mode` (recovery uses `.recovered`).
    public func runChain(_ report: LiveReport, mode: ChainMode) throws(HostError) -> ReportDocument {
        let handlers = slots.withLock { $0 }
        let runner = CallbackRunner(
            clock: clock, limits: configuration.limits, mainExecutor: mainExecutor, closures: closures,
            observer: observer)
        return try Chain(runner: runner, clock: clock, logger: logger).run(report: report, handlers: handlers, mode: mode)
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
        }
        for attachment in request.attachments {
            _ = report.addAttachment(name: attachment.name, filename: attachment.filename, data: attachment.data, by: .extended)
        }
    }

    /// Removes both handlers, calling each `destroy` once.
    public func stop() {
        for slot in HandlerSlot.allCases { setHandler(nil, for: slot) }
        logger.debug("host \(hostID) stopped")
    }
}
