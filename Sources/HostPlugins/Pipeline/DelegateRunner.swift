import FoundationEssentials
import PluginAPI
import HostModel
import HostSupport
import HostCapture

/// Runs the delegate's steps (SPEC H-5, H-6, A-1 … A-4). Every delegate call of a report
/// draws on the one `delegate` attachment budget (SPEC R-7). Each step returns why the
/// delegate did not run fully (the internal-log words), or nil (`plugins.required`).
struct DelegateRunner {
    let invoker: Invoker
    let limits: Limits
    let decisions: ClosurePool

    /// H-5 step 2, dialog reports only: clears summary, description and labels (they are
    /// replaced outright), then lets the delegate set them. [main-thread]
    func addFields(_ delegate: Delegate, report: LiveReport, budgetDeadline: HostInstant) -> String? {
        guard delegate.methods.contains(.addFields) else { return nil }
        report.edit { content in
            content.summary = nil
            content.description = nil
            content.labels = []
        }
        return callAndReturn(delegate, "add_fields_before_report_created", step: "add_fields", on: .main, report: report, budgetDeadline: budgetDeadline) {
            delegate.addFields($0)
        }
    }

    /// H-5 step 5, dialog reports only. [main-thread]
    func checkFields(_ delegate: Delegate, report: LiveReport, budgetDeadline: HostInstant) -> String? {
        guard delegate.methods.contains(.checkFields) else { return nil }
        return callAndReturn(delegate, "check_fields_after_report_created", step: "check_fields", on: .main, report: report, budgetDeadline: budgetDeadline) {
            delegate.checkFields($0)
        }
    }

    /// The attachments step, the last moment the report can change. The synchronous form
    /// wins when both exist (A-4); the asynchronous one is not called for recovered or
    /// terminating reports (A-3: the delegate has nothing to run then, so it ran fully).
    func attachments(_ delegate: Delegate, report: LiveReport, mode: ChainMode, budgetDeadline: HostInstant) throws(HostError)
        -> String?
    {
        let methods = delegate.methods
        if methods.contains(.attachments) {
            return callAndReturn(delegate, "attachments_for_report", step: "attachments", on: .own, report: report, budgetDeadline: budgetDeadline) {
                delegate.attachments($0)
            }
        } else if methods.contains(.attachmentsAsync) {
            guard mode == .runningApp else {
                // The delegate did not run: under `plugins.required` the report is held (fail
                // closed), never sent as though it had.
                let why = "\(delegate.name ?? "delegate").attachments_for_report_async not called: the asynchronous form is not used for \(mode == .recovered ? "a recovered" : "a terminating") report"
                report.note(.info, handler: "host", why)
                return why
            }
            return try decide(delegate, report: report, budgetDeadline: budgetDeadline)
        }
        return nil
    }

    /// A delegate call that is done when it returns, bounded by the callback limit (R-8).
    private func callAndReturn(
        _ delegate: Delegate, _ method: String, step: String, on thread: CallThread, report: LiveReport, budgetDeadline: HostInstant,
        _ body: @escaping @Sendable (ReportHandle) -> Void
    ) -> String? {
        guard let name = delegate.name else { return "the delegate was released" }
        let label = "\(name).\(method)"
        let handle = report.openHandle(for: .delegate(name, step: step))
        let result = invoker.perform(
            label, on: thread, limitMs: limits.callbackTimeoutMs, budgetDeadline: budgetDeadline,
            tracker: CallTracker(finish: .returned)
        ) { body(handle) }
        report.close(handle)
        return note(result, label: label, delegate: name, limitMs: limits.callbackTimeoutMs, awaited: .notReturned, report: report)
    }

    /// A-2: the asynchronous form on the main thread; the host waits for the decision up to
    /// its limit, then goes on without the delegate's attachments.
    private func decide(_ delegate: Delegate, report: LiveReport, budgetDeadline: HostInstant) throws(HostError) -> String? {
        guard let name = delegate.name else { return "the delegate was released" }
        let label = "\(name).attachments_for_report_async"
        let handle = report.openHandle(for: .delegate(name, step: "attachments"))
        let tracker = CallTracker(finish: .completedAndReturned)
        let accept: @Sendable ([OfferedAttachment]?) -> Void = { items in
            for item in items ?? [] {
                if let declared = item.declaredSize {
                    _ = report.add(attachment: item.name, filename: item.filename, size: declared, through: handle) { Data() }
                } else {
                    _ = report.add(attachment: item.name, filename: item.filename, data: item.data, through: handle)
                }
            }
            report.close(handle)  // R-8: the asynchronous form's handle closes at the decision
            tracker.markCompleted()
        }
        let completion = CallbackCompletion(
            onFirst: { arguments in accept(offeredAttachments(arguments)) },
            onIgnored: { kind in
                report.record(kind == .second ? .secondDecision(label) : .lateDecision(label), by: name)
            })
        let closure = delegate.needsClosure ? try decisions.acquireDecision(for: completion) : nil
        // Waiting for the method's return too keeps what it notes after deciding (a second
        // decision, say) in this report's internal log.
        let result = invoker.perform(
            label, on: .main, limitMs: limits.attachmentsDecisionMs, budgetDeadline: budgetDeadline, tracker: tracker
        ) { [decisions] in
            delegate.attachmentsAsync(handle, decision: closure?.code) { items in completion.fire { accept(items) } }
            // The closure's window starts now that the method has returned (never while it runs).
            if let closure { decisions.methodReturned(closure.slot) }
        }
        if let closure, tracker.neverStarted { decisions.methodReturned(closure.slot) }
        if let closure { decisions.release(closure.slot) } else { completion.close() }
        report.close(handle)
        if case .timedOut(_, completed: true) = result { return nil }  // decided in time; the method is merely slow
        if result != .finished {
            // Bundled without the delegate's attachments, those added during the call included.
            report.removeAttachments(addedThrough: handle)
        }
        return note(result, label: label, delegate: name, limitMs: limits.attachmentsDecisionMs, awaited: .notDecided, report: report)
    }

    /// Notes how a call of `delegate` ended when it did not finish, under its name (H-14);
    /// returns the note, or nil when it finished.
    private func note(
        _ result: CallResult, label: String, delegate: String, limitMs: Int, awaited: RuleEvent.Kind, report: LiveReport
    ) -> String? {
        let event: RuleEvent
        switch result {
        case .finished: return nil
        case .skipped(let budgetSpent):
            let why = budgetSpent
                ? "the report's \(limits.reportBudgetMs) ms budget was spent" : "it could not start within \(limitMs) ms"
            event = .skipped(label, why)
        case .timedOut(let budgetSpent, _):
            let within = budgetSpent ? "before the report's \(limits.reportBudgetMs) ms budget was spent" : "within \(limitMs) ms"
            event = .timedOut(label, awaited: awaited, within: within)
        case .stopped:
            event = .skipped(label, "the host is stopping")
        }
        report.record(event, by: delegate)
        return event.message
    }
}
