import FoundationEssentials
import Glibc
import Host
import HostStore
import HostSupport

/// What the CLI's environment hands the engine: the faults a test arms (the engine builds its
/// seam from them); and the command's own seam. The engine never reads the environment itself.
enum Switches {
    /// The variables below as the process got them (read one by one: the whole environment
    /// as a dictionary costs a one-shot command more than it reads).
    static let environment: [String: String] = Dictionary(
        uniqueKeysWithValues: ["REPORTHOST_CRASH_AT", "REPORTHOST_FAULT", "REPORTHOST_DENY_CLOSURES", "REPORTHOST_SWEEP"]
            .compactMap { name in getenv(name).map { (name, String(cString: $0)) } })

    /// `REPORTHOST_CRASH_AT`, `REPORTHOST_FAULT=disk-full`, `REPORTHOST_DENY_CLOSURES=1`,
    /// `REPORTHOST_SWEEP`.
    static let faults: Faults = {
        let faults = Faults(environment: environment, sweep: sweep)
        // A sweep fails SQLite's own calls too.
        if sweep != nil, let plan = faults.calls { _ = SQLiteSystemCalls.route(through: plan) }
        return faults
    }()

    /// `REPORTHOST_SWEEP=K:ERRNO` (ENOSPC, EIO or EINTR): the failure sweep, the `K`th system
    /// call that can fail with ERRNO fails (0: none, only counted), SQLite's own calls
    /// included. The command says how many such calls it made on stderr as it exits.
    static let sweep: (k: Int, errno: Int32)? = environment["REPORTHOST_SWEEP"].flatMap { text in
        let parts = text.split(separator: ":")
        let errnos: [Substring: Int32] = ["ENOSPC": ENOSPC, "EIO": EIO, "EINTR": EINTR]
        guard parts.count == 2, let k = Int(parts[0]), k >= 0, let number = errnos[parts[1]] else { return nil }
        return (k, number)
    }

    /// The line a swept command ends with.
    static func reportSweep() {
        if sweep != nil, let plan = faults.calls { writeStandardError("reporthost: sweep: \(plan.sweptCalls) calls\n") }
    }

    /// A `REPORTHOST_CRASH_AT` that names no fault point (a typo would arm nothing, silently):
    /// the usage error that lists the points.
    static var unknownCrashPoint: String? {
        guard let point = environment["REPORTHOST_CRASH_AT"], FaultPoint(rawValue: point) == nil else { return nil }
        return "REPORTHOST_CRASH_AT '\(point)' is not a fault point (one of: \(FaultPoint.allCases.map(\.rawValue).joined(separator: ", ")))"
    }

    /// The seam the command's own calls take (its inputs: the configuration file, `--attach`
    /// files, standard output): the real calls. The sweep's plan is the engine's (`faults`,
    /// which the runtime builds its seam from): the sweep proves what the host stores, and
    /// an input the command cannot read is the usage error it always was.
    static let system: SystemCalls = Faults().systemCalls
}
