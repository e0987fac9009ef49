import HostModel
import HostSupport
import HostCapture

/// What the pipeline is waiting for, for tests and tools that must act at the right moment
/// (a test advancing a manual clock, the conformance validator).
package enum PipelineEvent: Sendable, Equatable {
    /// A call ("<plugin>.<method>") is queued; it is skipped if not started by `deadline`.
    case awaitingStart(call: String, deadline: HostInstant)
    /// A call started; the host waits for it until `deadline`.
    case awaitingFinish(call: String, deadline: HostInstant)
    /// A call's method returned.
    case returned(call: String)
    /// A callback's completion was called for the first time (its changes now count).
    case completed(call: String)
    /// A handler broke a rule or the host gave up on a call (`handler`: the plugin's name,
    /// `plugin` when the report is gone); also noted in the internal log (H-14).
    case broke(handler: String, RuleEvent)
}

package typealias PipelineObserver = @Sendable (PipelineEvent) -> Void

/// Where a call into a handler or delegate runs.
enum CallThread {
    /// The host's main thread (running-app callbacks, dialog-side delegate calls).
    case main
    /// A thread of its own: recovered callbacks and the synchronous attachments call. Not
    /// the shared pool: an abandoned method keeps running and must not hold a pool thread.
    case own
}

/// What ends the host's wait for a call.
enum CallFinish {
    /// Completion (or the decision) called and the method returned (running-app callbacks,
    /// SPEC H-8; the asynchronous attachments decision, A-2).
    case completedAndReturned
    /// The method returned (terminating, recovered and synchronous delegate calls).
    case returned
}

/// How a call ended, from the host's side.
enum CallResult: Equatable {
    /// Finished as `CallFinish` asks, within the limits.
    case finished
    /// Never started: the main thread could not start it in time, or the budget was spent.
    case skipped(budgetSpent: Bool)
    /// Started but did not finish in time.
    case timedOut(budgetSpent: Bool, completed: Bool)
    /// The host was stopped or interrupted while the call was queued or running.
    case stopped
}

/// One call's progress, shared by the thread that runs it and the thread that waits.
///
/// # Thread safety
/// A `WaitableState`: "skipped" and "started" are decided under one lock, so a call the host
/// gave up on is never started late.
final class CallTracker: Sendable {
    struct State {
        enum Phase { case queued, running, skipped }
        var phase = Phase.queued
        var startedAt = HostInstant(nanoseconds: 0)
        var returned = false
        var completed = false
        var stopped = false
    }

    let state = WaitableState(State())
    /// What ends the host's wait: the waiter is woken only when that holds (or on stop), so a
    /// callback costs one thread switch for the waiter, not one per step.
    let finish: CallFinish

    init(finish: CallFinish) { self.finish = finish }

    func isDone(_ state: State) -> Bool {
        switch finish {
        case .completedAndReturned: state.completed && state.returned
        case .returned: state.returned
        }
    }

    func markCompleted() { state.update(wakingIf: isDone) { $0.completed = true } }
    func markReturned() { state.update(wakingIf: isDone) { $0.returned = true } }
    func markStopped() { state.update { $0.stopped = true } }
    var isCompleted: Bool { state.read { $0.completed } }
    /// The host gave up before the call started: its method never runs.
    var neverStarted: Bool { state.read { $0.phase == .skipped } }
}

/// The calls in flight on one host, so that stopping or interrupting the host ends their
/// waits (SPEC H-8: a callback still waiting when the host is stopped is skipped; H-15).
///
/// # Thread safety
/// Behind one `Locked`.
final class ActiveCalls: Sendable {
    private let state = Locked<(stopping: Bool, next: Int, trackers: [Int: CallTracker])>((false, 0, [:]))

    /// Registers `tracker`; nil when the host is already stopping.
    func register(_ tracker: CallTracker) -> Int? {
        state.withLock { state in
            guard !state.stopping else { return nil }
            state.next += 1
            state.trackers[state.next] = tracker
            return state.next
        }
    }

    func unregister(_ id: Int) { state.withLock { _ = $0.trackers.removeValue(forKey: id) } }

    /// Ends every wait in flight and refuses new calls.
    func stopAll() {
        let trackers = state.withLock { state in
            state.stopping = true
            return Array(state.trackers.values)
        }
        for tracker in trackers { tracker.markStopped() }
    }

    var isStopping: Bool { state.withLock { $0.stopping } }
}

/// Runs one call under the time limits: queue it, skip it if it cannot start in time, wait
/// for what `finish` asks until the limit, report how it ended.
struct Invoker {
    let clock: any HostClock
    let mainExecutor: any MainExecutor
    let observer: PipelineObserver?
    let active: ActiveCalls
    let capture: CrashCapture
    let logger: HostLogger

    /// How long a call may run before the log says it still does (once), when its limit is longer.
    static let noticeAfterMs = 5_000

    func perform(
        _ label: String, on thread: CallThread, limitMs: Int, budgetDeadline: HostInstant, tracker: CallTracker,
        call: @escaping @Sendable () -> Void
    ) -> CallResult {
        guard let registration = active.register(tracker) else { return .stopped }
        defer { active.unregister(registration) }
        let state = tracker.state
        let job: @Sendable () -> Void = { [clock, observer] in
            // Starting does not wake the waiter: its start deadline is never later than the
            // deadline a start sets, so it notices the start when it next wakes.
            let startedAt = state.update(wakingIf: { _ in false }) { state -> HostInstant? in
                guard state.phase == .queued else { return nil }
                state.phase = .running
                state.startedAt = clock.now()
                return state.startedAt
            }
            guard let startedAt else { return }
            observer?(.awaitingFinish(call: label, deadline: min(startedAt.advanced(byMilliseconds: limitMs), budgetDeadline)))
            call()
            tracker.markReturned()
            observer?(.returned(call: label))
        }

        let startDeadline = min(clock.now().advanced(byMilliseconds: limitMs), budgetDeadline)
        observer?(.awaitingStart(call: label, deadline: startDeadline))
        switch thread {
        case .main: mainExecutor.execute(job)
        case .own:
            // A thread the system refuses leaves the call queued: the start deadline ends it.
            startThread {
                // Plugin code runs here: a stack overflow must still reach the crash writer.
                capture.prepareThread()
                job()
            }
        }
        // One wait: until the start deadline while queued, then until the call's own limit
        // (or the budget) once it has started. Most calls complete within microseconds.
        let deadline = { (state: CallTracker.State) -> HostInstant in
            state.phase == .queued ? startDeadline : min(state.startedAt.advanced(byMilliseconds: limitMs), budgetDeadline)
        }
        // A call still running after a while is said once, so a long silence has a name.
        if limitMs > Self.noticeAfterMs {
            let noticeAt = clock.now().advanced(byMilliseconds: Self.noticeAfterMs)
            let ended = state.wait(
                until: { min(deadline($0), noticeAt) }, clock: clock, spinning: .microseconds(50),
                for: { tracker.isDone($0) || $0.stopped }
            ) { _, satisfied in satisfied }
            if !ended, clock.now() >= noticeAt {
                logger.warn("\(label) is still running after \(Self.noticeAfterMs / 1_000) s; its limit is \(limitMs) ms")
            }
        }
        return state.wait(
            until: deadline,
            clock: clock, spinning: .microseconds(50), for: { tracker.isDone($0) || $0.stopped }
        ) { state, _ in
            if tracker.isDone(state) { return .finished }
            if state.phase == .queued {
                state.phase = .skipped  // never started late
                return state.stopped ? .stopped : .skipped(budgetSpent: clock.now() >= budgetDeadline)
            }
            if state.stopped { return .stopped }
            let ownDeadline = state.startedAt.advanced(byMilliseconds: limitMs)
            return .timedOut(budgetSpent: budgetDeadline < ownDeadline, completed: state.completed)
        }
    }
}
