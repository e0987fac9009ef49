import HostModel
import HostSupport
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
        var progress = ChainProgress(budgetDeadline: clock.now().advanced(byMilliseconds: limits.reportBudgetMs))
        for slot in HandlerSlot.allCases where handlers[slot] == nil { progress.fellShort(slot.pluginSlot, "the slot is empty") }
        if delegate == nil { progress.fellShort(.delegate, "the slot is empty") }

        try runCallbacks(.before, handlers: handlers, report: report, mode: mode, progress: &progress)
        if dialog != nil && active.isStopping {
            // Interrupted before the user saw the dialog: they never sent it (as in H-13).
            logger.info("report \(report.id): interrupted before the dialog; the report was not sent; nothing is stored")
            release(progress.pending)
            _ = report.bundle()
            return nil
        }
        if let dialog {
            guard try runDialog(dialog, report: report, delegate: delegate, progress: &progress) else { return nil }
        }
        try runCallbacks(.after, handlers: handlers, report: report, mode: mode, progress: &progress)
        if dialog != nil {
            try delegateStep("check_fields_after_report_created", delegate, report: report, progress: &progress) {
                delegates.checkFields($0, report: report, budgetDeadline: $1)
            }
        }
        try delegateStep("attachments_for_report", delegate, report: report, progress: &progress) {
            (delegate, budgetDeadline) throws(HostError) in
            try delegates.attachments(delegate, report: report, mode: mode, budgetDeadline: budgetDeadline)
        }
        release(progress.pending)  // late from here on, before the handles close at bundling
        // Released first: a completion that lost the race with the release was not taken.
        for (slot, label, callback) in progress.pending where !callback.completion.isCompleted {
            progress.fellShort(slot, "\(label) did not complete before bundling; its changes after returning were dropped")
        }
        return ChainRun(document: report.bundle(), shortfalls: progress.shortfalls)
    }

    /// Runs `step` of each handler that implements it, wrapper first; a callback left open
    /// until bundling joins `progress.pending`.
    private func runCallbacks(
        _ step: HandlerStep, handlers: [HandlerSlot: Handler], report: LiveReport, mode: ChainMode,
        progress: inout ChainProgress
    ) throws(HostError) {
        for slot in HandlerSlot.allCases {
            guard let handler = handlers[slot], handler.implements(step) else { continue }
            let label = "\(handler.name).on_\(step.rawValue)_report_created"
            if let reason = skipReason(progress.budgetDeadline) {
                let event = RuleEvent.skipped(label, reason)
                report.record(event, by: handler.name)
                progress.fellShort(slot.pluginSlot, event.message)
                continue
            }
            logger.debug("report \(report.id): \(slot.rawValue) \(label)")
            switch try callbacks.run(handler, in: slot, step: step, report: report, mode: mode, budgetDeadline: progress.budgetDeadline) {
            case .ran: break
            case .open(let callback): progress.pending.append((slot.pluginSlot, label, callback))
            case .fellShort(let why): progress.fellShort(slot.pluginSlot, why)
            }
        }
    }

    /// One delegate step: not called when the delegate was released or the call must be
    /// skipped; `body` gets the delegate and the budget's deadline, and returns why it fell short.
    private func delegateStep(
        _ method: String, _ delegate: Delegate?, report: LiveReport, progress: inout ChainProgress,
        _ body: (Delegate, HostInstant) throws(HostError) -> String?
    ) throws(HostError) {
        guard let delegate else { return }
        guard let name = delegate.name else {
            logger.debug("report \(report.id): the delegate was released; \(method) not called")
            progress.fellShort(.delegate, "the delegate was released before \(method)")
            return
        }
        if let reason = skipReason(progress.budgetDeadline) {
            let event = RuleEvent.skipped("\(name).\(method)", reason)
            report.record(event, by: name)
            progress.fellShort(.delegate, event.message)
            return
        }
        if let why = try body(delegate, progress.budgetDeadline) { progress.fellShort(.delegate, why) }
    }

    /// The dialog steps (H-5 steps 2 and 3): the delegate's fields, then the dialog, whose
    /// time moves the budget's deadline. False when the user cancelled (the report is bundled
    /// and dropped).
    private func runDialog(
        _ dialog: any DialogPresenter, report: LiveReport, delegate: Delegate?, progress: inout ChainProgress
    ) throws(HostError) -> Bool {
        try delegateStep("add_fields_before_report_created", delegate, report: report, progress: &progress) {
            delegates.addFields($0, report: report, budgetDeadline: $1)
        }
        let shownAt = clock.now()
        let seeded = report.edit { DialogFields(summary: $0.summary, description: $0.description, labels: $0.labels, severity: $0.severity) }
        switch dialog.present(seeded) {
        case .cancel:
            logger.info("report \(report.id): the user cancelled the dialog; nothing is stored or sent")
            release(progress.pending)
            _ = report.bundle()
            return false
        case .send(let fields):
            report.edit { content in
                content.summary = fields.summary
                content.description = fields.description
                content.labels = fields.labels
                content.severity = fields.severity
            }
        }
        progress.budgetDeadline = progress.budgetDeadline.advanced(byMilliseconds: clock.now().milliseconds(since: shownAt))
        return true
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

/// What one run of a chain carries from step to step.
private struct ChainProgress {
    /// The shared budget's deadline (H-10), moved by the time spent in the dialog.
    var budgetDeadline: HostInstant
    var pending: [(slot: PluginSlot, label: String, callback: CallbackRunner.Pending)] = []
    /// A slot's first shortfall is the one that explains it.
    var shortfalls: [PluginSlot: String] = [:]

    mutating func fellShort(_ slot: PluginSlot, _ why: String) { if shortfalls[slot] == nil { shortfalls[slot] = why } }
}
