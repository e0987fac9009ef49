import PluginAPI
import HostModel
import HostSupport
import HostCapture

/// How a chain runs its callbacks.
package enum ChainMode: Sendable, Equatable {
    /// A running-app report: callbacks on the main thread; wait for completion (SPEC H-8).
    case runningApp
    /// A report raised with `--terminating`: wait for each method to return; its handle
    /// closes then (SPEC H-11).
    case terminating
    /// A recovered report: callbacks off the main thread; wait only for the method to
    /// return, about 3 s (SPEC H-9).
    case recovered
}

/// Runs one handler callback under the completion contract (SPEC H-7 … H-11).
struct CallbackRunner {
    let invoker: Invoker
    let limits: Limits
    let closures: ClosurePool

    /// A callback whose handle stays open until bundling (recovered reports): its
    /// completion may still arrive before then (SPEC H-9).
    struct Pending {
        var closureSlot: Int?
        var completion: CallbackCompletion
    }

    /// How a callback ended, for the chain: whether it ran fully (`plugins.required`).
    enum Outcome {
        /// It returned (and completed, where the mode waits for completion).
        case ran
        /// It returned; its handle stays open until bundling, as its completion may still
        /// arrive (recovered reports, SPEC H-9).
        case open(Pending)
        /// It did not run fully: skipped, timed out, abandoned or not called (the event's words).
        case fellShort(String)
    }

    /// The host stopped waiting for a callback: later calls of its completion are late.
    func release(_ callback: Pending) {
        if let slot = callback.closureSlot { closures.release(slot) } else { callback.completion.close() }
    }

    /// Runs `step` of `handler` for `report`.
    func run(
        _ handler: Handler, in slot: HandlerSlot, step: HandlerStep, report: LiveReport, mode: ChainMode,
        budgetDeadline: HostInstant
    ) throws(HostError) -> Outcome {
        let name = handler.name
        let label = "\(name).on_\(step.rawValue)_report_created"
        var contributor = Contributor(
            handler: name, slot: slot.rawValue, step: slot.source(step).rawValue, source: slot.source(step),
            budgetKey: "\(slot.rawValue).\(step.rawValue)")
        contributor.knowsAppHang = handler.declaredMinor >= 1
        let handle = report.openHandle(for: contributor)
        let finish: CallFinish = mode == .runningApp ? .completedAndReturned : .returned
        let tracker = CallTracker(finish: finish)
        let observer = invoker.observer
        let completion = CallbackCompletion(
            onFirst: {
                report.complete(handle)
                tracker.markCompleted()
                observer?(.completed(call: label))
            },
            onIgnored: { kind in
                report.record(kind == .second ? .secondCompletion(label) : .lateCompletion(label), by: name)
            })
        let closure = handler.needsClosure ? try closures.acquire(for: completion) : nil
        let limitMs = mode == .recovered ? limits.recoveredReturnMs : limits.callbackTimeoutMs
        let notCalled = Locked(false)
        let result = invoker.perform(
            label, on: mode == .recovered ? .own : .main, limitMs: limitMs, budgetDeadline: budgetDeadline,
            tracker: tracker
        ) { [closures] in
            // An async method's body runs after `invoke` returns: hold its changes from the start.
            if mode == .recovered && handler.isAsync(step) { report.holdChanges(of: handle) }
            let called = handler.invoke(
                step, handle: handle, isTerminating: mode == .terminating, completion: closure?.code,
                swiftCompletion: completion.swiftClosure, capture: invoker.capture)
            // The closure's window starts now that the method has returned (never while it runs).
            if let closure { closures.methodReturned(closure.slot) }
            if !called {
                notCalled.withLock { $0 = true }
                tracker.markCompleted()
            }
            if mode == .recovered { report.holdChanges(of: handle) }
        }
        if let closure, tracker.neverStarted { closures.methodReturned(closure.slot) }
        // A callback whose completion arrived (its changes count) ran, even when its method
        // returned late; `shortfall` is the event of one that did not.
        let event: RuleEvent?
        let shortfall: RuleEvent?
        if notCalled.withLock({ $0 }) {
            event = .notCalled(label)
            shortfall = event
        } else {
            // Recovered: a change made after the method returned counts if completion arrives
            // before bundling (SPEC H-9), so the handle stays open until then.
            if result == .finished && mode == .recovered && !completion.isCompleted {
                return .open(Pending(closureSlot: closure?.slot, completion: completion))
            }
            let judged = events(for: result, label: label, mode: mode, limitMs: limitMs)
            event = judged.event
            shortfall = judged.shortfall
        }
        if let event { report.record(event, by: name) }
        // The completion is marked late before the handle closes, so a call racing the close
        // is noted as late, never taken for a completion.
        release(Pending(closureSlot: closure?.slot, completion: completion))
        report.close(handle)
        return shortfall.map { .fellShort($0.message) } ?? .ran
    }

    /// The event a call that returned (or never started) leaves, and the same event when the
    /// callback did not run fully (its shortfall); nil for one that finished.
    private func events(
        for result: CallResult, label: String, mode: ChainMode, limitMs: Int
    ) -> (event: RuleEvent?, shortfall: RuleEvent?) {
        switch result {
        case .finished:
            return (nil, nil)
        case .skipped(let budgetSpent):
            let why = budgetSpent
                ? "the report's \(limits.reportBudgetMs) ms budget was spent"
                : "the main thread could not start it within \(limitMs) ms"
            let event = RuleEvent.skipped(label, why)
            return (event, event)
        case .timedOut(let budgetSpent, let completed):
            let within = budgetSpent ? "before the report's \(limits.reportBudgetMs) ms budget was spent" : "within \(limitMs) ms"
            if mode == .runningApp && completed {
                return (RuleEvent.returnedLate(label, within: within), nil)
            } else if mode == .runningApp {
                let event = RuleEvent.timedOut(label, awaited: .notCompleted, within: within, outcome: "the report goes on without it")
                return (event, event)
            } else {
                let event = RuleEvent.timedOut(label, awaited: .notReturned, within: within, outcome: "abandoned")
                return (event, event)
            }
        case .stopped:
            let event = RuleEvent.skipped(label, "the host is stopping")
            return (event, event)
        }
    }
}
