import FoundationEssentials
import Glibc

/// A process's memory cgroup (SPEC B-5): where the kernel counts the OOM kills it made in it,
/// cgroup v1 (`memory.oom_control`'s `oom_kill`) or v2 (`memory.events`'s `oom_kill`).
///
/// The hierarchy is read under `/sys/fs/cgroup`, or under `REPORTHOST_CGROUP_ROOT` when the
/// environment names another root (a machine whose cgroups are mounted elsewhere, a test).
package struct MemoryCgroup: Sendable, Equatable {
    /// The cgroup's folder.
    package var folder: String
    /// 1 or 2.
    package var version: Int
    /// The seam its files are read through.
    let system: SystemCalls

    package init(folder: String, version: Int, system: SystemCalls) {
        self.folder = folder
        self.version = version
        self.system = system
    }

    package static func == (a: MemoryCgroup, b: MemoryCgroup) -> Bool { a.folder == b.folder && a.version == b.version }

    /// Where the cgroup hierarchies are mounted.
    package static var root: String { ProcessInfo.processInfo.environment["REPORTHOST_CGROUP_ROOT"] ?? "/sys/fs/cgroup" }

    /// The memory cgroup of `pid` (its `/proc/<pid>/cgroup`): the v1 `memory` controller's
    /// when there is one, else the v2 unified one. nil when none can be read.
    package static func of(pid: pid_t, root: String = root, system: SystemCalls) -> MemoryCgroup? {
        guard let text = read("/proc/\(pid)/cgroup", system: system) else { return nil }
        var unified: String?
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3 else { continue }
            if fields[1].split(separator: ",").contains("memory") {
                let cgroup = MemoryCgroup(folder: root + "/memory" + fields[2], version: 1, system: system)
                if cgroup.oomKills != nil { return cgroup }
            } else if fields[0] == "0" && fields[1].isEmpty {
                unified = String(fields[2])
            }
        }
        guard let unified else { return nil }
        let cgroup = MemoryCgroup(folder: root + (unified == "/" ? "" : unified), version: 2, system: system)
        return cgroup.oomKills != nil ? cgroup : nil
    }

    /// How many processes the OOM killer has killed in the cgroup; nil when unreadable.
    package var oomKills: Int? {
        counter(version == 1 ? "memory.oom_control" : "memory.events", "oom_kill")
    }

    /// The most memory the cgroup has used (v1: since it was made; v2: `memory.peak`).
    package var peakBytes: Int? { number(version == 1 ? "memory.max_usage_in_bytes" : "memory.peak") }

    /// Its limit; nil when none (v1's "no limit" is a number near 2^63).
    package var limitBytes: Int? {
        guard let limit = number(version == 1 ? "memory.limit_in_bytes" : "memory.max") else { return nil }
        return limit >= Int.max / 2 ? nil : limit
    }

    /// How a process of this cgroup that SIGKILL ended died, given the OOM kills counted
    /// before it: `oom_kill` when the count rose, `killed` when it did not, `unknown` when the
    /// counter cannot be read.
    package func exitCause(oomKillsBefore before: Int?) -> String {
        guard let before, let now = oomKills else { return "unknown" }
        return now > before ? "oom_kill" : "killed"
    }

    private func counter(_ file: String, _ key: String) -> Int? {
        guard let text = Self.read(folder + "/" + file, system: system) else { return nil }
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            if fields.count == 2, fields[0] == key { return Int(fields[1]) }
        }
        return nil
    }

    private func number(_ file: String) -> Int? {
        Self.read(folder + "/" + file, system: system).flatMap { Int($0.trimmed) }
    }

    /// A small kernel file, read whole (`String(contentsOfFile:)` truncates /proc files).
    private static func read(_ path: String, system: SystemCalls) -> String? {
        guard case .success(let data) = BoundedFile.read(path, limit: 64 * 1024, followLinks: true, system: system) else { return nil }
        return String(decoding: data, as: UTF8.self)
    }
}
