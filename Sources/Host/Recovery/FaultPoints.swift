import Foundation

/// Named points where `REPORTHOST_CRASH_AT=<point>` makes the process kill itself with
/// SIGKILL (SPEC I-6), for fault tests. Read once per process.
public enum FaultPoint: String, Sendable, CaseIterable {
    case afterJournal = "after-journal"
    case duringHandlers = "during-handlers"
    case afterSave = "after-save"
    case afterPurge = "after-purge"
    case duringSubmit = "during-submit"
    case afterAccept = "after-accept"

    private static let armed = ProcessInfo.processInfo.environment["REPORTHOST_CRASH_AT"].flatMap(FaultPoint.init(rawValue:))

    /// Dies here with SIGKILL if this point is armed.
    public func hit() {
        if Self.armed == self { kill(getpid(), SIGKILL) }
    }
}
