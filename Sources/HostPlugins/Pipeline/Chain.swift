import HostCore
import HostCapture

/// What a caller asks for when raising a report; becomes the report's content before the
/// first callback.
public struct ReportRequest: Sendable {
    /// An attachment given with the request (`--attach`): the same shape a delegate offers.
    public typealias ExtendedAttachment = OfferedAttachment

    public var trigger: Trigger
    public var summary: String?
    public var description: String?
    public var email: String?
    /// 1...5 or nil for none (callers validate the range).
    public var severity: Int32?
    public var labels: [String] = []
    /// `--attribute K=V`: the highest precedence (SPEC R-4).
    public var attributes: [String: String] = [:]
    /// `--attach FILE`: the `extended` source (SPEC R-7).
    public var attachments: [ExtendedAttachment] = []
    /// What the session did before the report (SPEC B-1): its session fills them in.
    public var breadcrumbs: [Breadcrumb] = []
    /// The stack payload stored with the report (`crash` in its document): an app hang's
    /// hung thread (SPEC B-4).
    package var crash: JSONValue?
    public var isTerminating = false
    /// Shows a dialog report to its user (trigger `dialog`); nil for other reports.
    public var dialog: (any DialogPresenter)?

    public init(trigger: Trigger) { self.trigger = trigger }
}

/// A chain that ran to bundling: the document, and why each slot that did not run fully
/// fell short (empty, skipped, timed out, abandoned).
package struct ChainRun: Sendable {
    package var document: ReportDocument
    package var shortfalls: [PluginSlot: String]

    /// Why the report must be held under `plugins.required`: the first required slot that did
    /// not run fully, or nil when every one did.
    package func unmet(_ required: Set<PluginSlot>) -> String? {
        for slot in PluginSlot.allCases where required.contains(slot) {
            if let why = shortfalls[slot] { return "the required \(slot.rawValue) slot did not run fully: \(why)" }
        }
        return nil
    }
}

/// Runs one report's steps in the order of SPEC H-5 (dialog) or H-6 (every other report),
/// with the wrapper first in each step, then bundles.
///
///     dialog:  wrapper.before → handler.before → delegate.addFields → dialog →
///              wrapper.after → handler.after → delegate.checkFields → delegate.attachments
///     others:  wrapper.before → handler.before → wrapper.after → handler.after →
///              delegate.attachments
struct Chain {
    let callbacks: CallbackRunner
    let delegates: DelegateRunner
    let clock: any HostClock
    let logger: HostLogger
    let active: ActiveCalls

    var limits: Limits { callbacks.limits }

    /// The bundled document with each slot's shortfall, or nil when the user cancelled the dialog.
    func run(
        report: LiveReport, handlers: [HandlerSlot: Handler], delegate: Delegate?, mode: ChainMode,
        dialog: (any DialogPresenter)?
    ) throws(HostError) -> ChainRun? {
        // The shared budget (H-10); time in the dialog does not count, so it moves the deadline.
        var budgetDeadline = clock.now().advanced(byMilliseconds: limits.reportBudgetMs)
        var pending: [(slot: PluginSlot, label: String, callback: CallbackRunner.Pending)] = []
        // A slot's first shortfall is the one that explains it.
        var shortfalls: [PluginSlot: String] = [:]
        func fellShort(_ slot: PluginSlot, _ why: String) { if shortfalls[slot] == nil { shortfalls[slot] = why } }
        for slot in HandlerSlot.allCases where handlers[slot] == nil { fellShort(slot.pluginSlot, "the slot is empty") }
        if delegate == nil { fellShort(.delegate, "the slot is empty") }

        func callbacks(_ step: HandlerStep) throws(HostError) {
            for slot in HandlerSlot.allCases {
                guard let handler = handlers[slot], handler.implements(step) else { continue }
                let label = "\(handler.name).on_\(step.rawValue)_report_created"
                if let reason = skipReason(budgetDeadline) {
                    let event = RuleEvent.skipped(label, reason)
                    report.record(event, by: handler.name)
                    fellShort(slot.pluginSlot, event.message)
                    continue
                }
                logger.debug("report \(report.id): \(slot.rawValue) \(label)")
                switch try self.callbacks.run(handler, in: slot, step: step, report: report, mode: mode, budgetDeadline: budgetDeadline) {
                case .ran: break
                case .open(let callback): pending.append((slot.pluginSlot, label, callback))
                case .fellShort(let why): fellShort(slot.pluginSlot, why)
                }
            }
        }

        func delegateStep(_ method: String, _ body: (Delegate) throws(HostError) -> String?) throws(HostError) {
            guard let delegate else { return }
            guard let name = delegate.name else {
                logger.debug("report \(report.id): the delegate was released; \(method) not called")
                fellShort(.delegate, "the delegate was released before \(method)")
                return
            }
            if let reason = skipReason(budgetDeadline) {
                let event = RuleEvent.skipped("\(name).\(method)", reason)
                report.record(event, by: name)
                fellShort(.delegate, event.message)
                return
            }
            if let why = try body(delegate) { fellShort(.delegate, why) }
        }

        try callbacks(.before)
        if dialog != nil && active.isStopping {
            // Interrupted before the user saw the dialog: they never sent it (as in H-13).
            logger.info("report \(report.id): interrupted before the dialog; the report was not sent; nothing is stored")
            release(pending)
            _ = report.bundle()
            return nil
        }
        if let dialog {
            try delegateStep("add_fields_before_report_created") { delegates.addFields($0, report: report, budgetDeadline: budgetDeadline) }
            let shownAt = clock.now()
            let seeded = report.edit { DialogFields(summary: $0.summary, description: $0.description, labels: $0.labels, severity: $0.severity) }
            switch dialog.present(seeded) {
            case .cancel:
                logger.info("report \(report.id): the user cancelled the dialog; nothing is stored or sent")
                release(pending)
                _ = report.bundle()
                return nil
            case .send(let fields):
                report.edit { content in
                    content.summary = fields.summary
                    content.description = fields.description
                    content.labels = fields.labels
                    content.severity = fields.severity
                }
            }
            budgetDeadline = budgetDeadline.advanced(byMilliseconds: clock.now().milliseconds(since: shownAt))
        }
        try callbacks(.after)
        if dialog != nil {
            try delegateStep("check_fields_after_report_created") { delegates.checkFields($0, report: report, budgetDeadline: budgetDeadline) }
        }
        try delegateStep("attachments_for_report") { (delegate) throws(HostError) in
            try delegates.attachments(delegate, report: report, mode: mode, budgetDeadline: budgetDeadline)
        }
        release(pending)  // late from here on, before the handles close at bundling
        // Released first: a completion that lost the race with the release was not taken.
        for (slot, label, callback) in pending where !callback.completion.isCompleted {
            fellShort(slot, "\(label) did not complete before bundling; its changes after returning were dropped")
        }
        return ChainRun(document: report.bundle(), shortfalls: shortfalls)
    }

    /// Why the next call must be skipped, if it must (H-10 budget, H-15 interruption).
    private func skipReason(_ budgetDeadline: HostInstant) -> String? {
        if active.isStopping { return "the host is stopping" }
        if clock.now() >= budgetDeadline { return "the report's \(limits.reportBudgetMs) ms budget was spent" }
        return nil
    }

    /// Callbacks left open until bundling are over: later completions are late.
    private func release(_ pending: [(slot: PluginSlot, label: String, callback: CallbackRunner.Pending)]) {
        for open in pending { callbacks.release(open.callback) }
    }
}
