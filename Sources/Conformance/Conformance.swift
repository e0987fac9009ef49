import Dispatch
import FoundationEssentials
import Glibc
import Host
import HostPlugins
import HostSupport

/// How one conformance check ended (SPEC I-8).
package enum CheckStatus: String, Sendable, CaseIterable {
    case passed, failed, crashed
    case timedOut = "timed_out"
    case skipped, warning

    /// Failed, crashed and timed-out checks make `reporthost check` exit 1; warnings do not.
    package var fails: Bool { self == .failed || self == .crashed || self == .timedOut }
}

/// One check's result, as `--json` prints it.
package struct CheckResult: Sendable, Equatable {
    package var check: String
    package var status: CheckStatus
    package var details: String
    package var durationMs: Int
    /// What a scoring check measured (the scrubbing checks' `ScrubFigures`), for `--json`.
    package var figures: JSONValue?

    package init(check: String, status: CheckStatus, details: String, durationMs: Int, figures: JSONValue? = nil) {
        self.check = check
        self.status = status
        self.details = details
        self.durationMs = durationMs
        self.figures = figures
    }

    package var json: JSONValue {
        var fields: [(String, JSONValue)] = [
            ("check", .string(check)), ("status", .string(status.rawValue)), ("details", .string(details)), ("duration_ms", .int(durationMs)),
        ]
        if let figures { fields.append(("figures", figures)) }
        return .object(fields)
    }

    package init?(json: JSONValue) {
        guard let check = json["check"]?.stringValue, let status = json["status"]?.stringValue.flatMap(CheckStatus.init(rawValue:))
        else { return nil }
        self.init(
            check: check, status: status, details: json["details"]?.stringValue ?? "", durationMs: json["duration_ms"]?.intValue ?? 0,
            figures: json["figures"])
    }
}

/// What a check gets: the plugin, its slot, the seed, and hosts with short limits.
package struct CheckContext: Sendable {
    package let pluginPath: String
    package let slot: PluginSlot
    package let seed: UInt64
    let mainExecutor: any MainExecutor
    /// Where the fresh copies of the plugin go (`reporthost check` hands its children a
    /// folder it removes even when they crash); each host's throwaway repository too.
    let copiesFolder: URL
    /// `check --options`: what the plugin reads through `options_json` (SPEC T-3).
    package let options: JSONValue?
    /// `check --scrub`'s corpus and thresholds (SPEC T-4).
    package let scrub: ScrubSettings
    /// The seam the checks' own calls go through (the hosts they build take it from their faults).
    let system: SystemCalls

    package init(
        pluginPath: String, slot: PluginSlot, seed: UInt64, mainExecutor: any MainExecutor, system: SystemCalls,
        copiesFolder: URL = FileManager.default.temporaryDirectory, options: JSONValue? = nil, scrub: ScrubSettings = ScrubSettings()
    ) {
        self.system = system
        self.pluginPath = pluginPath
        self.slot = slot
        self.seed = seed
        self.mainExecutor = mainExecutor
        self.copiesFolder = copiesFolder
        self.options = options
        self.scrub = scrub
    }

    /// Short limits, so a never-completing plugin costs seconds, not minutes.
    package static let limits: Limits = {
        var limits = Limits()
        limits.callbackTimeoutMs = 2_000
        limits.recoveredReturnMs = 1_000
        limits.reportBudgetMs = 6_000
        limits.attachmentsDecisionMs = 2_000
        return limits
    }()

    /// A host with the plugin loaded into its slot, from a fresh copy of the library (fresh
    /// globals), recording the rule events the host notes.
    func host(limits: Limits = CheckContext.limits) throws(HostError) -> (host: ReportHost, events: RuleEvents, plugin: LoadedPlugin) {
        let (host, events) = try emptyHost(limits: limits)
        return (host, events, try loadCopy(into: host))
    }

    /// A host with no plugin yet (`host`'s first half), recording the rule events it notes.
    func emptyHost(limits: Limits = CheckContext.limits) throws(HostError) -> (host: ReportHost, events: RuleEvents) {
        var configuration = Configuration()
        configuration.limits = limits
        // Its own repository, for the plugin's `data_folder`; removed with the copies.
        configuration.repository = copiesFolder.appendingPathComponent("rh-check-repository-\(UUID().uuidString)").path
        Self.copies.withLock { $0.append(configuration.repository) }
        if let options { configuration.pluginOptions[slot] = options }
        let events = RuleEvents()
        return (try ReportHost(configuration: configuration, logger: .silent, mainExecutor: mainExecutor, observer: events.observe), events)
    }

    /// The plugin loaded into its slot of `host` from a fresh copy of the library (fresh
    /// globals): `host`'s second half.
    func loadCopy(into host: ReportHost) throws(HostError) -> LoadedPlugin {
        let copy = copiesFolder.appendingPathComponent("rh-check-\(UUID().uuidString).so").path
        do {
            try FileManager.default.copyItem(atPath: pluginPath, toPath: copy)
        } catch {
            throw .io(path: copy, reason: "cannot copy the plugin for a fresh image")
        }
        Self.copies.withLock { $0.append(copy) }
        return try host.loadPlugin(at: copy, into: slot)
    }

    /// Set by `reporthost check` for its child processes: where they put their plugin copies.
    package static let copiesFolderVariable = "REPORTHOST_CHECK_COPIES"

    /// The fresh copies made by `host()`, removed by `removeCopies` once the checks ran (the
    /// images stay mapped: they are never unloaded).
    private static let copies = Locked<[String]>([])

    package static func removeCopies() {
        for copy in copies.withLock({ list in defer { list = [] }; return list }) { try? FileManager.default.removeItem(atPath: copy) }
    }
}

/// The rule events one host noted, in order: what the checks read (never log wording).
///
/// # Thread safety
/// Behind one `Locked`; events arrive from any thread.
final class RuleEvents: Sendable {
    private let events = Locked<[(handler: String, event: RuleEvent)]>([])

    var observe: PipelineObserver {
        { [events] event in
            if case .broke(let handler, let rule) = event { events.withLock { $0.append((handler, rule)) } }
        }
    }

    /// The first event of one of `kinds` about `plugin` (any handler when nil), among those
    /// noted after the first `skipping`.
    func first(of kinds: Set<RuleEvent.Kind>, about plugin: String?, skipping: Int = 0) -> RuleEvent? {
        events.withLock { list in
            list.dropFirst(skipping).first { kinds.contains($0.event.kind) && (plugin == nil || $0.handler == plugin) }?.event
        }
    }

    /// How many events were noted so far.
    var count: Int { events.withLock { $0.count } }
}

/// A named conformance check (SPEC I-8): stable kebab-case name, one-line summary, the slots
/// it applies to.
package struct ConformanceCheck: Sendable {
    package let name: String
    package let summary: String
    package let slots: Set<PluginSlot>
    let body: @Sendable (CheckContext) throws -> (CheckStatus, String, JSONValue?)

    init(name: String, summary: String, slots: Set<PluginSlot>, body: @escaping @Sendable (CheckContext) throws -> (CheckStatus, String)) {
        self.init(name: name, summary: summary, slots: slots, scoring: { context in
            let (status, details) = try body(context)
            return (status, details, nil)
        })
    }

    /// A check that also gives figures (`CheckResult.figures`).
    init(name: String, summary: String, slots: Set<PluginSlot>, scoring body: @escaping @Sendable (CheckContext) throws -> (CheckStatus, String, JSONValue?)) {
        self.name = name
        self.summary = summary
        self.slots = slots
        self.body = body
    }

    /// Runs the check, timing it; an error is a failure with its message.
    package func run(_ context: CheckContext) -> CheckResult {
        let clock = SystemClock()
        let start = clock.now()
        let outcome: (CheckStatus, String, JSONValue?)
        do {
            outcome = try body(context)
        } catch {
            outcome = (.failed, "\(error)", nil)
        }
        return CheckResult(
            check: name, status: outcome.0, details: outcome.1, durationMs: clock.now().milliseconds(since: start), figures: outcome.2)
    }
}
