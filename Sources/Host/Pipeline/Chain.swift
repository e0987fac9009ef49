import Foundation

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
    public var isTerminating = false
    /// Shows a dialog report to its user (trigger `dialog`); nil for other reports.
    public var dialog: (any DialogPresenter)?

    public init(trigger: Trigger) { self.trigger = trigger }
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

    /// The bundled document, or nil when the user cancelled the dialog.
    func run(
        report: LiveReport, handlers: [HandlerSlot: Handler], delegate: Delegate?, mode: ChainMode,
        dialog: (any DialogPresenter)?
    ) throws(HostError) -> ReportDocument? {
        // The shared budget (H-10); time in the dialog does not count, so it moves the deadline.
        var budgetDeadline = clock.now().advanced(byMilliseconds: limits.reportBudgetMs)
        var pending: [CallbackRunner.Pending] = []

        func callbacks(_ step: HandlerStep) throws(HostError) {
            for slot in HandlerSlot.allCases {
                guard let handler = handlers[slot], handler.implements(step) else { continue }
                let label = "\(handler.name).on_\(step.rawValue)_report_created"
                if let reason = skipReason(budgetDeadline) {
                    report.record(.skipped(label, reason), by: handler.name)
                    continue
                }
                logger.debug("report \(report.id): \(slot.rawValue) \(label)")
                if let open = try self.callbacks.run(
                    handler, in: slot, step: step, report: report, mode: mode, budgetDeadline: budgetDeadline)
                {
                    pending.append(open)
                }
            }
        }

        func delegateStep(_ method: String, _ body: (Delegate) throws(HostError) -> Void) throws(HostError) {
            guard let delegate else { return }
            guard delegate.name != nil else {
                logger.debug("report \(report.id): the delegate was released; \(method) not called")
                return
            }
            if let reason = skipReason(budgetDeadline) {
                let name = delegate.name ?? "delegate"
                report.record(.skipped("\(name).\(method)", reason), by: name)
                return
            }
            try body(delegate)
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
        return report.bundle()
    }

    /// Why the next call must be skipped, if it must (H-10 budget, H-15 interruption).
    private func skipReason(_ budgetDeadline: HostInstant) -> String? {
        if active.isStopping { return "the host is stopping" }
        if clock.now() >= budgetDeadline { return "the report's \(limits.reportBudgetMs) ms budget was spent" }
        return nil
    }

    /// Callbacks left open until bundling are over: later completions are late.
    private func release(_ pending: [CallbackRunner.Pending]) {
        for callback in pending { callbacks.release(callback) }
    }
}
