import Glibc

/// Named points where an armed fault makes the process kill itself with SIGKILL (SPEC I-6).
package enum FaultPoint: String, Sendable, CaseIterable {
    case afterJournal = "after-journal"
    case duringHandlers = "during-handlers"
    case afterSave = "after-save"
    case afterPurge = "after-purge"
    case duringSubmit = "during-submit"
    case afterAccept = "after-accept"
}

/// What a test arms in the engine; production runs with none. A value handed in (the host, its
/// repository and its deliverer each get it), never read from the environment by the engine:
/// the CLI builds it from its own environment, tests build their own. Every fault is in one
/// `FaultPlan` (`calls`); the seam every part is handed is built here, with the wall clock.
package struct Faults: Sendable, Equatable {
    /// The plan: failing calls and the kill point.
    package var calls: FaultPlan?
    /// The wall clock records are stamped with (a test freezes or steps it).
    package var wallClock: any WallClock

    package init(calls: FaultPlan? = nil, wallClock: any WallClock = SystemWallClock()) {
        self.calls = calls
        self.wallClock = wallClock
    }

    /// The seam every part of the engine is handed: the real calls, with the plan's faults
    /// and this wall clock. Entries build their seam here, and nowhere else.
    package var systemCalls: SystemCalls { SystemCalls(faults: calls, wallClock: wallClock) }

    /// Where the process kills itself (`REPORTHOST_CRASH_AT`).
    package var crashAt: FaultPoint? { calls?.crashAt }

    /// Whether the plan fails this call of `call` now (counted): database writes and closure
    /// allocations, which are not system calls of the seam.
    package func fails(_ call: SystemCall) -> Bool { calls?.failure(of: call) != nil }

    package static func == (a: Faults, b: Faults) -> Bool { a.calls === b.calls }

    /// The plan the variables above arm in `environment`: `REPORTHOST_CRASH_AT`,
    /// `REPORTHOST_FAULT=disk-full` (every database write fails as SQLite does on a full disk)
    /// and `REPORTHOST_DENY_CLOSURES=1` (libffi closure allocation fails); with `sweep`'s
    /// `k` and errno when a failure sweep runs too.
    package init(environment: [String: String], sweep: (k: Int, errno: Int32)? = nil) {
        let crashAt = environment["REPORTHOST_CRASH_AT"].flatMap(FaultPoint.init(rawValue:))
        var faults: [FaultPlan.Fault] = []
        if environment["REPORTHOST_FAULT"] == "disk-full" { faults.append(FaultPlan.Fault(.databaseWrite, errno: ENOSPC)) }
        if environment["REPORTHOST_DENY_CLOSURES"] == "1" { faults.append(FaultPlan.Fault(.closure, errno: EPERM)) }
        if let sweep {
            self.init(calls: FaultPlan(sweepingCall: sweep.k, errno: sweep.errno, crashAt: crashAt))
        } else if crashAt != nil || !faults.isEmpty {
            self.init(calls: FaultPlan(faults, crashAt: crashAt))
        } else {
            self.init()
        }
    }

    /// Dies here with SIGKILL if `point` is armed.
    package func hit(_ point: FaultPoint) {
        if crashAt == point { systemCalls.kill(getpid(), SIGKILL) }
    }
}
