import Foundation
import PluginAPI

/// How a chain runs its callbacks.
public enum ChainMode: Sendable, Equatable {
    /// A running-app report: callbacks on the main thread; wait for completion (SPEC H-8).
    case runningApp
    /// A report raised with `--terminating`: wait for each method to return; its handle
    /// closes then (SPEC H-11).
    case terminating
    /// A recovered report: callbacks off the main thread; wait only for the method to
    /// return, about 3 s (SPEC H-9).
    case recovered
}

/// What the pipeline is waiting for, for tests and tools that must act at the right moment
/// (a test advancing a manual clock, the conformance validator).
public enum PipelineEvent: Sendable, Equatable {
    /// A callback ("<plugin>.<method>") is queued; it is skipped if not started by `deadline`.
    case awaitingStart(callback: String, deadline: HostInstant)
    /// A callback started; the host waits for it until `deadline`.
    case awaitingFinish(callback: String, deadline: HostInstant)
}

public typealias PipelineObserver = @Sendable (PipelineEvent) -> Void

/// Runs one handler callback under the completion contract and the time limits.
///
/// The callback is queued on the main executor (or a background queue when recovered). If
/// it cannot start before its limit it is skipped, never called late; once started, the
/// runner waits for what the mode requires, then closes the handle. The job and the runner
/// agree through one `WaitableState`, so "skipped" and "started" can never both happen.
struct CallbackRunner {
    let clock: any HostClock
    let limits: Limits
    let mainExecutor: any MainExecutor
    let closures: ClosurePool
    let observer: PipelineObserver?

    private struct RunState {
        enum Phase { case queued, running, skipped }
        var phase = Phase.queued
        var startedAt = HostInstant(nanoseconds: 0)
        var returned = false
        var completed = false
    }

    /// What remains to do at bundling: release closures of callbacks whose handle stays
    /// open until then (recovered reports).
    struct Leftover {
        var closureSlot: Int?
    }

    /// Runs `step` of `handler` for `report`. Returns a closure slot to release at bundling,
    /// if the handle stays open until then.
    func run(
        _ handler: Handler, in slot: HandlerSlot, step: HandlerStep, report: LiveReport, mode: ChainMode,
        budgetDeadline: HostInstant
    ) throws(HostError) -> Leftover? {
        let name = handler.name
        let callbackName = "on_\(step.rawValue)_report_created"
        let handle = report.openHandle(
            for: Contributor(handler: name, source: slot.source(step), budgetKey: "\(slot.rawValue).\(step.rawValue)"))
        let state = WaitableState(RunState())
        let completion = CallbackCompletion(
            onFirst: {
                report.close(handle)
                state.update { $0.completed = true }
            },
            onIgnored: { kind in
                report.note(
                    .warn, handler: name,
                    kind == .second
                        ? "\(callbackName): completion called again; ignored"
                        : "\(callbackName): completion called after the host stopped waiting; ignored")
            })
        let closure = handler.needsClosure ? try closures.acquire(for: completion) : nil
        func finish() { if let closure { closures.release(closure.slot) } }

        let job: @Sendable () -> Void = { [clock] in
            let start = state.update { state -> Bool in
                guard state.phase == .queued else { return false }
                state.phase = .running
                state.startedAt = clock.now()
                return true
            }
            guard start else { return }
            handler.invoke(
                step, handle: handle, isTerminating: mode == .terminating, completion: closure?.code,
                swiftCompletion: completion.swiftClosure)
            state.update { $0.returned = true }
        }
        if mode == .recovered {
            // A thread of its own, not the shared pool: an abandoned method keeps running
            // (SPEC H-9), and it must not hold a pool thread others need.
            Thread.detachNewThread(job)
        } else {
            mainExecutor.execute(job)
        }

        let limitMs = mode == .recovered ? limits.recoveredReturnMs : limits.callbackTimeoutMs
        let startDeadline = min(clock.now().advanced(byMilliseconds: limitMs), budgetDeadline)
        let callback = "\(name).\(callbackName)"
        observer?(.awaitingStart(callback: callback, deadline: startDeadline))
        let started = state.wait(until: startDeadline, clock: clock, for: { $0.phase != .queued }) { state, started in
            if !started { state.phase = .skipped }
            return started
        }
        guard started else {
            report.close(handle)
            finish()
            let why = budgetDeadline <= startDeadline && clock.now() >= budgetDeadline
                ? "the report's \(limits.reportBudgetMs) ms budget was spent"
                : "the main thread could not start it within \(limitMs) ms"
            report.note(.warn, handler: "host", "\(name).\(callbackName) skipped: \(why)")
            return nil
        }

        let startedAt = state.read { $0.startedAt }
        let deadline = min(startedAt.advanced(byMilliseconds: limitMs), budgetDeadline)
        observer?(.awaitingFinish(callback: callback, deadline: deadline))
        // A running-app callback is done when it has completed and its method has returned,
        // so what the method notes after completing still reaches the internal log.
        let finished = state.wait(
            until: deadline, clock: clock,
            for: { mode == .runningApp ? $0.completed && $0.returned : $0.returned },
            then: { state, done in done || (mode == .runningApp && state.completed) })
        guard finished else {
            report.close(handle)
            finish()
            let budgetSpent = deadline == budgetDeadline && deadline < startedAt.advanced(byMilliseconds: limitMs)
            let what = mode == .runningApp ? "complete" : "return"
            let why = budgetSpent ? "before the report's \(limits.reportBudgetMs) ms budget was spent" : "within \(limitMs) ms"
            report.note(
                .warn, handler: "host",
                "\(name).\(callbackName) did not \(what) \(why): \(mode == .recovered ? "abandoned" : "the report goes on without it"); its later changes are ignored")
            return nil
        }
        switch mode {
        case .runningApp, .terminating:
            report.close(handle)
            finish()
            return nil
        case .recovered:
            // A change made after the method returned counts if completion arrives before
            // bundling (SPEC H-9): keep the handle open until then.
            if completion.isCompleted {
                finish()
                return nil
            }
            return Leftover(closureSlot: closure?.slot)
        }
    }
}
