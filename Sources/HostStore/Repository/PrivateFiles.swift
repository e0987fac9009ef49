import FoundationEssentials
import Glibc
import HostModel
import HostSupport

/// What the repository holds is private to its owner (reports carry personal data): folders
/// 0700, files 0600, whatever the umask. New files are created so; an older repository with
/// wider modes is tightened when a primary session opens it.
extension Repository {
    /// Creates the database file owner-only before SQLite opens it: SQLite gives its WAL and
    /// shared-memory files the database file's mode.
    static func createPrivately(_ path: String, system: SystemCalls) {
        let fd = system.openRaw(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if fd >= 0 { system.close(fd) }
    }

    /// Takes the group and other bits off the repository folder and everything in it (symbolic
    /// links are left alone, never followed). Returns the paths it changed.
    @discardableResult
    package func tightenModes() -> [String] {
        var changed: [String] = []
        func tighten(_ path: String) {
            guard let status = system.lstat(path), status.st_mode & S_IFMT != S_IFLNK, status.st_mode & 0o077 != 0 else { return }
            if system.chmod(path, status.st_mode & 0o700) == 0 { changed.append(path) }
        }
        tighten(folder.path)
        for name in system.entries(ofFolder: folder.path) ?? [] {
            tighten(folder.appendingPathComponent(name).path)
        }
        // Below, everything was made owner-only by this host, or by the start that found the
        // folder open to others: the whole tree is walked only then (a start never walks a
        // backlog of crash files or attachment copies).
        if !changed.isEmpty {
            for name in system.paths(under: folder.path) ?? [] {
                tighten(folder.appendingPathComponent(name).path)
            }
        }
        if !changed.isEmpty {
            logger.warn("\(changed.count) file(s) and folder(s) in \(folder.path) were readable by other users: made owner-only")
        }
        return changed
    }
}
