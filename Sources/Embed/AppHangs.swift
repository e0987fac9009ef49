import EmbedCalls
import FoundationEssentials
import Glibc
import Host
import HostSupport

/// App hangs (SPEC B-4): threads the program asked to watch (`rh_embed_watch_thread`) and
/// their heartbeats (`rh_embed_heartbeat`). A watchdog thread wakes when the earliest watched
/// thread is due; one whose last heartbeat is older than its timeout is hung: its stack is
/// taken from outside by `reporthost-stack` (ptrace: the thread keeps its system call and
/// goes on, unaware), and one `app_hang` report is raised for the hang. When the heartbeat
/// comes back, the hang's length is set on the report if it has not left the machine yet,
/// and logged otherwise.
///
/// # Thread safety
/// The watches are a `WaitableState`: heartbeats from any thread, the watchdog on its own.
final class AppHangs: Sendable {
    private struct Watch {
        var timeoutMs: Int
        var lastBeat: HostInstant
        var hang: Hang?
    }

    private struct Hang {
        var since: HostInstant
        /// The report raised for it, once stored.
        var reportID: String?
        /// When the heartbeat came back (the watchdog then records the length).
        var endedAt: HostInstant?
    }

    /// `reporting`: the watchdog is raising a hang's report (a stop waits for it).
    private let state = WaitableState((watches: [Int32: Watch](), stopped: false, started: false, reporting: false))
    private let clock = SystemClock()
    private let runtime: Runtime
    /// `reporthost-stack`, beside the library.
    private let helper: String

    init(runtime: Runtime, helper: String) {
        self.runtime = runtime
        self.helper = helper
    }

    /// Watches the calling thread with `timeoutMs` (0: stops watching it). Starts the
    /// watchdog with the first watch; false when no thread can be started for it.
    func watchCallingThread(timeoutMs: Int) -> Bool {
        let thread = rh_embed_thread_id()
        let now = clock.now()
        let start = state.update { state -> Bool in
            state.watches[thread] = timeoutMs == 0 ? nil : Watch(timeoutMs: timeoutMs, lastBeat: now, hang: nil)
            guard timeoutMs > 0, !state.started else { return false }
            state.started = true
            return true
        }
        guard start else { return true }
        let started = startThread { [self] in
            nameCurrentThread("rh-hang-watch")
            watchdog()
        }
        if !started { state.update { $0.started = false } }
        return started
    }

    /// A heartbeat of the calling thread (nothing when it is not watched). Cheap: one lock,
    /// the watchdog woken only when a hang ends.
    func heartbeat() {
        let thread = rh_embed_thread_id()
        let now = clock.now()
        state.update(wakingIf: { $0.watches[thread]?.hang?.endedAt != nil }) { state in
            guard var watch = state.watches[thread] else { return }
            watch.lastBeat = now
            if watch.hang != nil, watch.hang?.endedAt == nil { watch.hang?.endedAt = now }
            state.watches[thread] = watch
        }
    }

    /// Stops the watchdog; a hang's report being raised is finished first (the host must not
    /// stop under it), and a hang that ended just before the stop (a heartbeat, then at once
    /// `rh_embed_stop`) gets its length here, as the watchdog would have given it.
    func stop() {
        state.update { $0.stopped = true }
        let ended = state.wait(until: nil, clock: clock, for: { !$0.reporting }) { state, _ -> [(String, Int)] in
            var ended: [(String, Int)] = []
            for (thread, watch) in state.watches {
                guard let hang = watch.hang, let end = hang.endedAt, let id = hang.reportID else { continue }
                ended.append((id, end.milliseconds(since: hang.since)))
                state.watches[thread]?.hang = nil
            }
            return ended
        }
        for (id, length) in ended { recordLength(length, of: id) }
    }

    private func watchdog() {
        while true {
            let work = state.wait(until: { state in
                state.watches.values.filter { $0.hang == nil }.map { $0.lastBeat.advanced(byMilliseconds: $0.timeoutMs) }.min()
            }, clock: clock, for: { state in
                state.stopped || state.watches.values.contains { $0.hang?.endedAt != nil && $0.hang?.reportID != nil }
            }) { state, _ -> (stop: Bool, hung: [(Int32, Int)], ended: [(String, Int)]) in
                guard !state.stopped else { return (true, [], []) }
                let now = clock.now()
                var hung: [(Int32, Int)] = []
                var ended: [(String, Int)] = []
                for (thread, watch) in state.watches {
                    if let hang = watch.hang, let end = hang.endedAt, let id = hang.reportID {
                        ended.append((id, end.milliseconds(since: hang.since)))
                        state.watches[thread]?.hang = nil
                    } else if watch.hang == nil, now.milliseconds(since: watch.lastBeat) >= watch.timeoutMs {
                        state.watches[thread]?.hang = Hang(since: watch.lastBeat, reportID: nil, endedAt: nil)
                        hung.append((thread, watch.timeoutMs))
                    }
                }
                state.reporting = !hung.isEmpty || !ended.isEmpty
                return (false, hung, ended)
            }
            if work.stop { return }
            for (id, length) in work.ended { recordLength(length, of: id) }
            for (thread, timeoutMs) in work.hung { report(thread: thread, timeoutMs: timeoutMs) }
            state.update { $0.reporting = false }
        }
    }

    /// One report for the hang of `thread`, with its stack taken now.
    private func report(thread: Int32, timeoutMs: Int) {
        let lines = Self.stack(of: thread, helper: helper, log: runtime.logger)
        let name = Self.threadName(thread)
        do {
            let document = try runtime.raiseAppHang(thread: thread, name: name, timeoutMs: timeoutMs, stackLines: lines)
            state.update(wakingIf: { _ in true }) { state in state.watches[thread]?.hang?.reportID = document?.id }
        } catch {
            runtime.logger.error("app hang of thread \(thread): the report could not be stored: \(error)")
        }
    }

    private func recordLength(_ milliseconds: Int, of reportID: String) {
        let recorded = (try? runtime.setAttribute("reporthost.hang_ms", String(milliseconds), onWaitingReport: reportID)) ?? false
        runtime.logger.info(
            "app hang ended after \(milliseconds) ms" + (recorded ? "; recorded on report \(reportID)" : "; report \(reportID) was already sent"))
    }

    /// What `reporthost-stack` prints for `thread` of this process; nil when it cannot run.
    static func stack(of thread: Int32, helper: String, log: HostLogger) -> String? {
        switch Subprocess.spawn([helper, String(getpid()), String(thread)], captureOutput: true, captureErrors: true) {
        case .failure(let error):
            log.warn("app hang: \(helper) could not be started (\(error)): the report has no stack")
            return nil
        case .success(let helperProcess):
            // Yama (where it is on) lets only an allowed process trace this one.
            _ = rh_embed_allow_tracer(helperProcess.pid)
            let output = helperProcess.output.map { String(decoding: embedSystem.drain($0, keep: .first(1 << 20)), as: UTF8.self) } ?? ""
            let errors = helperProcess.errors.map { String(decoding: embedSystem.drain($0, keep: .first(4096)), as: UTF8.self) } ?? ""
            for fd in [helperProcess.output, helperProcess.errors].compactMap({ $0 }) { close(fd) }
            let ending = helperProcess.wait()
            guard ending == .exited(0) else {
                log.warn("app hang: \(helper) could not read the stack (\(ending)): \(errors.trimmed.prefix(300))")
                return nil
            }
            return output
        }
    }

    /// The thread's name (`/proc/self/task/<tid>/comm`), or its id.
    static func threadName(_ thread: Int32) -> String {
        guard case .success(let data) = BoundedFile.read("/proc/self/task/\(thread)/comm", limit: 64, system: embedSystem) else { return String(thread) }
        let name = String(decoding: data, as: UTF8.self).trimmed
        return name.isEmpty ? String(thread) : name
    }
}
