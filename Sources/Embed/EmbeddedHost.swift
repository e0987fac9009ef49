import Foundation
import Host

/// The host inside a program that links `libreporthost.so` (embed.h): a session of its own,
/// a main thread of its own, and a background worker that recovers what earlier runs left and
/// then delivers.
///
/// # Thread safety
/// Calls come from any thread of the program; the mutable state is behind `Locked`s.
final class EmbeddedHost: Sendable {
    let host: ReportHost
    let session: HostSession
    let mainThread: ThreadExecutor
    let worker: BackgroundWorker
    /// Stopping, and the reports being raised now (stop waits for them).
    private let calls = WaitableState((stopping: false, inFlight: 0))
    /// Files each thread added for its next report (the `extended` source).
    private let pendingAttachments = Locked<[UInt: [String]]>([:])

    /// The `extended` source's budget (SPEC R-7).
    static let attachmentsPerReport = 3

    init(configuration: Configuration) throws(HostError) {
        let logger = try configuration.makeLogger(overrideLevel: nil)
        let mainThread = ThreadExecutor(name: "reporthost-main")
        let host: ReportHost
        do {
            host = try ReportHost(configuration: configuration, logger: logger, mainExecutor: mainThread)
        } catch {
            mainThread.finish()
            throw error
        }
        // A second copy of the program must not wait 10 s for the first one's lock.
        let session: HostSession
        do {
            session = try HostSession.open(host: host, lockWaitMs: 100, secondaryAllowed: true)
        } catch {
            host.stop()
            mainThread.finish()
            throw error
        }
        self.host = host
        self.session = session
        self.mainThread = mainThread
        worker = BackgroundWorker(session: session)
    }

    // MARK: Calls from the program

    /// Runs `body` unless the host is stopping; stop waits for it to end.
    func call<T>(_ body: () -> T) -> T? {
        let admitted = calls.update { state -> Bool in
            guard !state.stopping else { return false }
            state.inFlight += 1
            return true
        }
        guard admitted else { return nil }
        defer { calls.update { $0.inFlight -= 1 } }
        return body()
    }

    /// Whether the calling thread is the host's main thread (where plugin callbacks run).
    var isHostThread: Bool { mainThread.isCurrentThread }

    func addAttachment(_ path: String) -> Bool {
        pendingAttachments.withLock { pending in
            let key = Self.threadKey
            guard pending[key, default: []].count < Self.attachmentsPerReport else { return false }
            pending[key, default: []].append(Paths.absolute(path))
            return true
        }
    }

    /// Raises a report with the calling thread's pending attachments, stores it and wakes the
    /// worker to deliver it.
    func report(_ trigger: Trigger, summary: String?, description: String?) throws(HostError) -> ReportDocument? {
        let paths = pendingAttachments.withLock { $0.removeValue(forKey: Self.threadKey) ?? [] }
        var request = ReportRequest(trigger: trigger)
        request.summary = summary
        request.description = description
        for path in paths {
            let name = URL(fileURLWithPath: path).lastPathComponent
            var attachment = ReportRequest.ExtendedAttachment(name: name, filename: name, data: Data())
            switch BoundedFile.read(path, limit: ReportContent.attachmentMaxBytes, followLinks: true) {
            case .success(let data): attachment.data = data
            case .failure(.tooLarge(let size, _)): attachment.declaredSize = UInt(clamping: size)
            case .failure(let failure):
                // Dropped and noted: an empty attachment is refused with a note.
                host.logger.warn("attachment \(path) could not be read (\(failure)); dropped")
            }
            request.attachments.append(attachment)
        }
        let document = try session.raise(request)
        worker.wake()
        return document
    }

    // MARK: Stopping

    /// embed.h's stop: new calls are refused, calls in flight finish, the worker ends (a
    /// delivery in flight gets at most `deliveryGraceMs`), plugins are destroyed on the
    /// host's main thread, the session ends.
    func stop(deliveryGraceMs: Int = 2_000) {
        calls.update { $0.stopping = true }
        calls.wait(until: nil, clock: SystemClock(), for: { $0.inFlight == 0 }, then: { _, _ in })
        worker.stop(graceMs: deliveryGraceMs)
        host.stop()
        session.end()
        mainThread.finish()
        pendingAttachments.withLock { $0 = [:] }
    }

    /// The calling thread (`pthread_t` is an integer on Linux).
    private static var threadKey: UInt { UInt(pthread_self()) }
}

/// Recovers (primary sessions only), then delivers: a pass at once, then again whenever a
/// report is stored or the next retry is due. Never on the program's threads. Asked to stop,
/// it finishes recovery (local work, bounded by the chain limits), makes one last pass for
/// reports stored since the previous one, and ends.
///
/// # Thread safety
/// State is a `WaitableState`.
final class BackgroundWorker: Sendable {
    private let state = WaitableState((wakes: 0, stopping: false, recovered: false, finished: false))
    private let session: HostSession
    /// Ends a submission still in flight when stop's grace is over.
    private let cancellation = Cancellation()

    init(session: HostSession) {
        self.session = session
        let thread = Thread { [self] in
            nameCurrentThread("rh-delivery")
            run()
        }
        thread.start()
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
        guard session.isPrimary, session.host.configuration.submission.url != nil else { return }
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
                } catch {
                    log.warn("delivery: \(error)")
                }
            }
            if stopping { return }
            // Until a new report, the next retry (at most a minute away), or stop.
            let wake = Deliverer.earliestNextPass(after: last, wake: (try? deliverer.nextWake()).flatMap { $0 }, now: Date())
            let due = wake.map { max(0, $0.timeIntervalSinceNow) } ?? 60
            let deadline = clock.now().advanced(byMilliseconds: Int(min(due, 60) * 1000))
            let timedOut = state.wait(until: deadline, clock: clock, for: { $0.stopping || $0.wakes != seen }) { _, woken in !woken }
            if timedOut { seen = -1 }
        }
    }
}
