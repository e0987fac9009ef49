import SQLiteCalls
import HostModel
import HostSupport

/// SQLite's own system calls through the seam (`rh_sqlite_route_system_calls`), so a failure
/// sweep reaches the database's reads and writes as well as the host's. Process-wide: for a
/// process of its own (the CLI under `REPORTHOST_SWEEP`), never for tests that share one.
///
/// # Thread safety
/// The plan behind a `Locked`; the gate is called from any thread SQLite runs on.
package enum SQLiteSystemCalls {
    private static let plan = Locked<FaultPlan?>(nil)

    /// Routes every later SQLite call through `plan`; false when SQLite does not allow it.
    package static func route(through plan: FaultPlan) -> Bool {
        self.plan.withLock { $0 = plan }
        return rh_sqlite_route_system_calls { kind in
            let call: SystemCall =
                switch kind {
                case RH_SQLITE_OPEN: .open
                case RH_SQLITE_CREATE: .create
                case RH_SQLITE_READ: .read
                case RH_SQLITE_WRITE: .write
                case RH_SQLITE_TRUNCATE: .truncate
                default: .unlink
                }
            return SQLiteSystemCalls.plan.withLock { $0 }?.failure(of: call) ?? 0
        } == 0
    }
}
