import FoundationEssentials
import HostModel
import HostSupport
import HostCapture
import HostPlugins
import HostStore
import HostRecovery
import HostDelivery

/// The one place that decides what to deliver and when (`launch --watch`, embedding
/// programs, and the one-shot commands, which make one `pass`).
///
/// The worker recovers (primary sessions only; a session recovers once), then delivers: a
/// pass at once, then again whenever a report is stored or the next retry is due, never more
/// than `maxSleepMs` apart. Never on the program's threads. Asked to stop, it finishes
/// recovery (local work, bounded by the chain limits), makes one last pass for reports stored
/// since the previous one, and ends.
///
/// # Thread safety
/// State is a `WaitableState`.
final class DeliveryWorker: Sendable {
    private let state = WaitableState((wakes: 0, stopping: false, recovered: false, finished: false))
    private let session: HostSession
    /// Ends a submission still in flight when stop's grace is over.
    private let cancellation = Cancellation()
    /// Sees each pass's summary (`launch --watch` logs them).
    private let onPass: @Sendable (Deliverer.Summary) -> Void

    /// The longest sleep between passes: a report stored by another process wakes nothing
    /// here, and a wake time read from the database is outside input.
    static let maxSleepMs = 60_000

    /// How long to sleep after a pass that gave `last`: until the earliest retry due or the
    /// admission window's next opening, at most `maxSleepMs`.
    static func sleepMs(after last: Deliverer.Summary, deliverer: Deliverer) -> Int {
        let now = deliverer.now()
        let wake = Deliverer.earliestNextPass(after: last, wake: (try? deliverer.nextWake()).flatMap { $0 }, now: now)
        let due = wake.map { max(0, $0.timeIntervalSince(now) * 1000) } ?? Double(maxSleepMs)
        return Int(min(due, Double(maxSleepMs)))
    }

    init(session: HostSession, onPass: @escaping @Sendable (Deliverer.Summary) -> Void = { _ in }) {
        self.session = session
        self.onPass = onPass
        let started = startThread { [self] in
            nameCurrentThread("rh-delivery")
            run()
        }
        if !started {
            // Nothing is lost: crash files and stored reports wait for the next start.
            session.host.logger.error("no delivery thread (the system refused one): nothing is recovered or sent until the next start")
            state.update { ($0.recovered, $0.finished) = (true, true) }
        }
    }

    func wake() { state.update { $0.wakes += 1 } }

    /// Asks the worker to end: waits for recovery (at most `recoveryLimitMs`), then at most
    /// `graceMs` for the last delivery pass. A submission still in flight then is cancelled
    /// and settled as a retryable failure (D-9) before the session ends, so the worker writes
    /// nothing to the repository after the lock is released; the worker is given at most
    /// `cancelMs` more for that.
    func stop(graceMs: Int, recoveryLimitMs: Int = 60_000, cancelMs: Int = 3_000) {
        state.update { $0.stopping = true }
        let clock = SystemClock()
        let recoveryDeadline = clock.now().advanced(byMilliseconds: recoveryLimitMs)
        _ = state.wait(until: recoveryDeadline, clock: clock, for: { $0.recovered }) { _, done in done }
        let deadline = clock.now().advanced(byMilliseconds: graceMs)
        if state.wait(until: deadline, clock: clock, for: { $0.finished }, then: { _, finished in finished }) { return }
        cancellation.cancel()
        let cancelDeadline = clock.now().advanced(byMilliseconds: cancelMs)
        let finished = state.wait(until: cancelDeadline, clock: clock, for: { $0.finished }) { _, finished in finished }
        session.host.logger.info(
            finished ? "stopped: the delivery in flight was cancelled and stays stored for the next start"
                : "stopped with a delivery still in flight: it is settled at the next start")
    }

    private func run() {
        defer { state.update { $0.finished = true } }
        let log = session.host.logger
        do {
            try session.recover()
        } catch {
            log.warn("recovery: \(error)")
        }
        state.update { $0.recovered = true }
        // Held reports' chains, in the background: never ahead of the program's own reports.
        do {
            try session.rerunHeld()
        } catch {
            log.warn("held reports: \(error)")
        }
        // A secondary's passes send only its own reports' initial attempts (the deliverer
        // knows its session).
        guard session.host.configuration.submission.isSet else { return }
        let deliverer = session.deliverer(transport: CurlTransport(cancellation: cancellation))
        let clock = SystemClock()
        var seen = -1
        var last = Deliverer.Summary()
        while true {
            let (wakes, stopping) = state.read { ($0.wakes, $0.stopping) }
            if wakes != seen {
                seen = wakes
                do {
                    last = try deliverer.deliver(retries: !stopping)
                    onPass(last)
                } catch {
                    log.warn("delivery: \(error)")
                }
            }
            if stopping { return }
            // Until a new report, the next retry, or stop.
            let deadline = clock.now().advanced(byMilliseconds: Self.sleepMs(after: last, deliverer: deliverer))
            let timedOut = state.wait(until: deadline, clock: clock, for: { $0.stopping || $0.wakes != seen }) { _, woken in !woken }
            if timedOut { seen = -1 }
        }
    }
}
