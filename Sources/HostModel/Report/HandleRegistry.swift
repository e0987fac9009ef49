import HostSupport
/// The process-wide map from report handles to live reports (ABI: "Report functions find a
/// handle in one process-wide registry, so any table serves any handle").
///
/// A handle is an id, never a pointer: the top 24 bits name the host that opened it (so a
/// use after the report is gone can still be logged to that host), the low 40 bits are a
/// process-wide sequence that is never reused. Id 0 is never issued, so a handle is never
/// NULL across the ABI.
///
/// # Thread safety
/// All state is behind one `Locked`; it never calls out while holding it.
package final class HandleRegistry: Sendable {
    package static let shared = HandleRegistry()

    private struct State {
        var nextSequence: UInt64 = 1
        var reports: [UInt64: LiveReport] = [:]
        /// Uses after bundling already noted, one per handle and operation: a plugin calling
        /// a setter in a loop on a stale handle is noted once, not a million times.
        var notedAfterBundle: Set<NotedUse> = []
    }

    private struct NotedUse: Hashable {
        let handle: UInt64
        let operation: String
    }

    /// The most uses after bundling remembered; past it, the memory starts again.
    static let notedAfterBundleMax = 4_096

    private static let sequenceBits: UInt64 = 40
    private static let sequenceMask: UInt64 = (1 << sequenceBits) - 1
    private let state = Locked(State())

    func open(_ report: LiveReport, hostID: UInt32) -> ReportHandle {
        state.withLock { state in
            let raw = (UInt64(hostID) << Self.sequenceBits) | (state.nextSequence & Self.sequenceMask)
            state.nextSequence += 1
            state.reports[raw] = report
            return ReportHandle(rawValue: raw)
        }
    }

    func report(for handle: ReportHandle) -> LiveReport? {
        state.withLock { $0.reports[handle.rawValue] }
    }

    /// Drops bundled reports' handles; later uses are answered RH_ERR_CLOSED.
    func forget(_ handles: [ReportHandle]) {
        state.withLock { state in
            for handle in handles { state.reports.removeValue(forKey: handle.rawValue) }
        }
    }

    /// The log of the host that opened `handle`.
    func hostLog(for handle: ReportHandle) -> HostLogger? { host(of: handle)?.log }

    /// Tells the host that opened `handle` of a use after its report was bundled: its log
    /// (the report is gone, H-14) and its rule events, once per handle and operation. The
    /// handler is unknown by then.
    func noteUseAfterBundle(_ handle: ReportHandle, _ operation: String) {
        guard let host = host(of: handle) else { return }
        let first = state.withLock { state in
            // Full: start again (a flood is then noted once per 4,096 uses, never silenced).
            if state.notedAfterBundle.count >= Self.notedAfterBundleMax { state.notedAfterBundle = [] }
            return state.notedAfterBundle.insert(NotedUse(handle: handle.rawValue, operation: operation)).inserted
        }
        guard first else { return }
        let event = RuleEvent.useAfterBundle(operation)
        host.log.debug(event.message)
        host.events("plugin", event)
    }

    private func host(of handle: ReportHandle) -> HostDirectory.Entry? {
        HostDirectory.shared.entry(UInt32(truncatingIfNeeded: handle.rawValue >> Self.sequenceBits))
    }
}
