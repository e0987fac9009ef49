import EmbedCalls
import FoundationEssentials
import Glibc
import Host
import HostSupport

/// App hangs (SPEC B-4): threads the program asked to watch (`rh_embed_watch_thread`) and
/// their heartbeats (`rh_embed_heartbeat`). A watchdog thread wakes when the earliest watched
/// thread is due, and a little after (`gatheringMs`); one whose last heartbeat is older than
/// its timeout is hung. The stacks of
/// the threads hung at one wake-up are taken together from outside by `reporthost-stack`
/// (ptrace: each thread keeps its system call and goes on, unaware), within a deadline, and
/// one `app_hang` report is raised for them, saying how many. A thread that did not stop in
/// time (an uninterruptible wait) is reported without its stack, with the reason. When the
/// heartbeat comes back, the hang's length is set on the report if it has not left the
/// machine yet, and logged otherwise.
///
/// A watch ends with its thread: a watched thread found gone (or its id given to a later
/// thread) when it is due is forgotten, never reported, and the helper itself checks each
/// thread's start time before it interrupts it. `stop` waits for a report being raised at
/// most `stopWaitMs`, killing the helper if it still runs.
///
/// # Thread safety
/// The watches are a `WaitableState`: heartbeats from any thread, the watchdog on its own.
final class AppHangs: Sendable {
    private struct Watch {
        var timeoutMs: Int
        var lastBeat: HostInstant
        /// Tells this thread from a later one given the same id.
        var startTime: Int64
        var hang: Hang?
    }

    private struct Hang {
        var since: HostInstant
        /// The report raised for it, once stored.
        var reportID: String?
        /// When the heartbeat came back (the watchdog then records the length).
        var endedAt: HostInstant?
    }

    /// How long `stop` waits for a hang's report being raised.
    static let stopWaitMs = 2_000

    private struct State {
        var watches: [Int32: Watch] = [:]
        var stopped = false
        var started = false
        /// The watchdog is raising a hang's report (a stop waits for it).
        var reporting = false
        /// The stack helper running now (a stop kills it).
        var helper: pid_t?
    }

    private let state = WaitableState(State())
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
        let startTime = HangStacks.startTime(of: thread) ?? 0
        let now = clock.now()
        let start = state.update { state -> Bool in
            state.watches[thread] = timeoutMs == 0 ? nil : Watch(timeoutMs: timeoutMs, lastBeat: now, startTime: startTime, hang: nil)
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

    /// Stops the watchdog. A hang's report being raised is waited for, at most `stopWaitMs`
    /// (the stack helper is killed at once: the report goes on without the stacks it had not
    /// taken), and a hang that ended just before the stop (a heartbeat, then at once
    /// `rh_embed_stop`) gets its length here, as the watchdog would have given it.
    func stop() {
        let helper = state.update { state -> pid_t? in
            state.stopped = true
            return state.helper
        }
        if let helper { kill(helper, SIGKILL) }
        let deadline = clock.now().advanced(byMilliseconds: Self.stopWaitMs)
        let ended = state.wait(until: deadline, clock: clock, for: { !$0.reporting }) { state, _ -> [(String, Int)] in
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

    /// How long past the earliest due thread the watchdog waits before it looks: threads that
    /// hang together (a lock they all wait for) cross their timeouts a few milliseconds apart,
    /// and are one report when taken in one pass. While it reports, it sees no new hang, so a
    /// thread it missed by a millisecond would wait for the helper, and one whose hang ended
    /// by then would not be reported at all. A quarter of the timeout, at most 250 ms.
    static func gatheringMs(_ timeoutMs: Int) -> Int { min(timeoutMs / 4, 250) }

    private func watchdog() {
        while true {
            let work = state.wait(until: { state in
                state.watches.values.filter { $0.hang == nil }
                    .map { $0.lastBeat.advanced(byMilliseconds: $0.timeoutMs + Self.gatheringMs($0.timeoutMs)) }.min()
            }, clock: clock, for: { state in
                state.stopped || state.watches.values.contains { $0.hang?.endedAt != nil && $0.hang?.reportID != nil }
            }) { state, _ in
                state.stopped ? nil : pass(&state)
            }
            guard let work else { return }
            for (id, length) in work.ended { recordLength(length, of: id) }
            if !work.hung.isEmpty { report(work.hung, timeoutMs: work.timeoutMs) }
            state.update { $0.reporting = false }
        }
    }

    /// One wake-up of the watchdog, under the lock: the hangs that ended (to record), the
    /// threads hung now (to report together), watches of threads that ended (forgotten).
    private func pass(_ state: inout State) -> (hung: [HangStacks.Thread], timeoutMs: Int, ended: [(String, Int)]) {
        let now = clock.now()
        var hung: [HangStacks.Thread] = []
        var timeoutMs = 0
        var ended: [(String, Int)] = []
        for (thread, watch) in state.watches {
            if let hang = watch.hang, let end = hang.endedAt, let id = hang.reportID {
                ended.append((id, end.milliseconds(since: hang.since)))
                state.watches[thread]?.hang = nil
            } else if watch.hang == nil, now.milliseconds(since: watch.lastBeat) >= watch.timeoutMs {
                guard HangStacks.startTime(of: thread) == watch.startTime else {
                    state.watches[thread] = nil
                    runtime.logger.info("app hang watch: thread \(thread) ended while watched; its watch ended with it")
                    continue
                }
                state.watches[thread]?.hang = Hang(since: watch.lastBeat, reportID: nil, endedAt: nil)
                hung.append(HangStacks.Thread(id: thread, startTime: watch.startTime))
                timeoutMs = max(timeoutMs, watch.timeoutMs)
            }
        }
        state.reporting = !hung.isEmpty || !ended.isEmpty
        return (hung.sorted { $0.id < $1.id }, timeoutMs, ended)
    }

    /// One report for the threads hung at once, with the stacks taken now.
    private func report(_ hung: [HangStacks.Thread], timeoutMs: Int) {
        let stacks = HangStacks.capture(hung, helper: helper) { pid in
            let stopped = state.update { state -> Bool in
                state.helper = pid
                return state.stopped
            }
            if stopped { kill(pid, SIGKILL) }
        }
        state.update { $0.helper = nil }
        let threads = hung.map { (id: $0.id, name: Self.threadName($0.id)) }
        do {
            let document = try runtime.raiseAppHang(threads: threads, timeoutMs: timeoutMs, stacks: stacks.stacks, missing: stacks.missing)
            state.update(wakingIf: { _ in true }) { state in
                for thread in hung { state.watches[thread.id]?.hang?.reportID = document?.id }
            }
        } catch {
            runtime.logger.error("app hang of \(hung.count) thread(s): the report could not be stored: \(error)")
        }
    }

    private func recordLength(_ milliseconds: Int, of reportID: String) {
        let recorded = (try? runtime.setAttribute("reporthost.hang_ms", String(milliseconds), onWaitingReport: reportID)) ?? false
        runtime.logger.info(
            "app hang ended after \(milliseconds) ms" + (recorded ? "; recorded on report \(reportID)" : "; report \(reportID) was already sent"))
    }

    /// The thread's name (`/proc/self/task/<tid>/comm`), or its id.
    static func threadName(_ thread: Int32) -> String {
        guard case .success(let data) = BoundedFile.read("/proc/self/task/\(thread)/comm", limit: 64, system: embedSystem) else { return String(thread) }
        let name = String(decoding: data, as: UTF8.self).trimmed
        return name.isEmpty ? String(thread) : name
    }
}
