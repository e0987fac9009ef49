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

/// The faults a test arms in the engine; production runs with none. A value handed in (the
/// host, its repository and its deliverer each get it), never read from the environment by
/// the engine: the CLI builds it from its own environment, tests build their own.
package struct Faults: Sendable, Equatable {
    /// Where the process kills itself with SIGKILL (`REPORTHOST_CRASH_AT`).
    package var crashAt: FaultPoint?
    /// Every database write fails as SQLite does on a full disk (`REPORTHOST_FAULT=disk-full`).
    package var diskFull: Bool
    /// libffi closure allocation fails, as on a system that forbids writable+executable
    /// memory (`REPORTHOST_DENY_CLOSURES=1`).
    package var denyClosures: Bool
    /// The system-call faults of a failure sweep, for the repository and delivery
    /// (`REPORTHOST_SWEEP`; the CLI routes SQLite's own calls through the same plan).
    package var calls: FaultPlan?
    /// The wall clock records are stamped with (a test freezes or steps it).
    package var wallClock: any WallClock

    package init(
        crashAt: FaultPoint? = nil, diskFull: Bool = false, denyClosures: Bool = false, calls: FaultPlan? = nil,
        wallClock: any WallClock = SystemWallClock()
    ) {
        self.crashAt = crashAt
        self.diskFull = diskFull
        self.denyClosures = denyClosures
        self.calls = calls
        self.wallClock = wallClock
    }

    /// The seam every part of the engine is handed: the real calls, with the sweep's faults
    /// and the wall clock these faults carry. Entries build their seam here, and nowhere else.
    package var systemCalls: SystemCalls { SystemCalls(faults: calls, wallClock: wallClock) }

    package static func == (a: Faults, b: Faults) -> Bool {
        a.crashAt == b.crashAt && a.diskFull == b.diskFull && a.denyClosures == b.denyClosures && a.calls === b.calls
    }

    /// The faults the variables above arm in `environment`.
    package init(environment: [String: String]) {
        self.init(
            crashAt: environment["REPORTHOST_CRASH_AT"].flatMap(FaultPoint.init(rawValue:)),
            diskFull: environment["REPORTHOST_FAULT"] == "disk-full",
            denyClosures: environment["REPORTHOST_DENY_CLOSURES"] == "1")
    }

    /// Dies here with SIGKILL if `point` is armed.
    package func hit(_ point: FaultPoint) {
        if crashAt == point { systemCalls.kill(getpid(), SIGKILL) }
    }
}
