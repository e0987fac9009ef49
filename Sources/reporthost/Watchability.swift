import FoundationEssentials
import Glibc

/// Whether `reporthost run` can preload its crash writer into a program: not into a
/// statically linked one (no dynamic loader reads LD_PRELOAD) nor a setuid or setgid one (the
/// loader ignores LD_PRELOAD there). Such a program still runs, and how it ended is still
/// recorded, but its crashes show only as abnormal exits.
enum Watchability {
    /// Why `program` cannot be watched, or nil when it can (or when it is not an ELF file we
    /// can read: a script, which its interpreter runs dynamically).
    static func problem(with program: String) -> String? {
        guard let path = resolve(program) else { return nil }
        if isSetID(path) {
            return "\(path) is setuid or setgid: the loader ignores LD_PRELOAD there, so its crashes show only as abnormal exits"
        }
        if isStaticELF(path) {
            return "\(path) is statically linked: the crash writer cannot be preloaded into it, so its crashes show only as abnormal exits"
        }
        return nil
    }

    /// `program` as exec finds it: a path with a slash as it is, else the first executable of
    /// that name on PATH.
    static func resolve(_ program: String) -> String? {
        if program.contains("/") { return program }
        let search = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        return search.map { "\($0)/\(program)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Whether the file is setuid or setgid.
    static func isSetID(_ path: String) -> Bool {
        var status = stat()
        return stat(path, &status) == 0 && status.st_mode & (S_ISUID | S_ISGID) != 0
    }

    /// An ELF executable with no PT_INTERP program header (no dynamic loader).
    static func isStaticELF(_ path: String) -> Bool { ELFFile(path: path)?.hasInterpreter == false }
}
