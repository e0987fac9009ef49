import FoundationEssentials
import Glibc
import HostModel
import HostSupport

/// Whether `reporthost run` can preload its crash writer into a program: not into a
/// statically linked one (no dynamic loader reads LD_PRELOAD) nor a setuid or setgid one (the
/// loader ignores LD_PRELOAD there). Such a program still runs, and how it ended is still
/// recorded, but its crashes show only as abnormal exits.
package enum Watchability {
    /// Why `program` cannot be watched, or nil when it can (or when it is not an ELF file we
    /// can read: a script, which its interpreter runs dynamically).
    package static func problem(with program: String, system: SystemCalls) -> String? {
        guard let path = resolve(program, system: system) else { return nil }
        if isSetID(path, system: system) {
            return "\(path) is setuid or setgid: the loader ignores LD_PRELOAD there, so its crashes show only as abnormal exits"
        }
        if isStaticELF(path, system: system) {
            return "\(path) is statically linked: the crash writer cannot be preloaded into it, so its crashes show only as abnormal exits"
        }
        return nil
    }

    /// `program` as exec finds it: a path with a slash as it is, else the first executable of
    /// that name on PATH.
    package static func resolve(_ program: String, system: SystemCalls) -> String? {
        if program.contains("/") { return program }
        let search = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        return search.map { "\($0)/\(program)" }.first { system.access($0, X_OK) == 0 }
    }

    /// Whether the file is setuid or setgid.
    package static func isSetID(_ path: String, system: SystemCalls) -> Bool {
        system.stat(path).map { $0.st_mode & (S_ISUID | S_ISGID) != 0 } == true
    }

    /// An ELF executable with no PT_INTERP program header (no dynamic loader).
    package static func isStaticELF(_ path: String, system: SystemCalls) -> Bool {
        ELFFile(path: path, system: system)?.hasInterpreter == false
    }
}
