import FoundationEssentials
import Glibc
import Host

/// What the CLI's environment hands the engine: the faults a test arms and a shorter lock
/// wait. The engine never reads the environment itself.
enum Switches {
    /// The variables below as the process got them (read one by one: the whole environment
    /// as a dictionary costs a one-shot command more than it reads).
    static let environment: [String: String] = Dictionary(
        uniqueKeysWithValues: ["REPORTHOST_CRASH_AT", "REPORTHOST_FAULT", "REPORTHOST_DENY_CLOSURES", "REPORTHOST_LOCK_WAIT_MS"]
            .compactMap { name in getenv(name).map { (name, String(cString: $0)) } })

    /// `REPORTHOST_CRASH_AT`, `REPORTHOST_FAULT=disk-full`, `REPORTHOST_DENY_CLOSURES=1`.
    static let faults = Faults(environment: environment)

    /// `REPORTHOST_LOCK_WAIT_MS` (0 … 10 minutes), or the default 10 s.
    static let lockWaitMs: Int = environment["REPORTHOST_LOCK_WAIT_MS"].flatMap { Int($0) }.map { min(max($0, 0), 600_000) }
        ?? HostSession.defaultLockWaitMs
}
