import FoundationEssentials
import Glibc

/// File paths as the host resolves them.
package enum Paths {
    /// Makes `path` absolute against `base` (the working directory by default).
    package static func absolute(_ path: String, relativeTo base: String = SystemCalls.currentFolder) -> String {
        let url = path.hasPrefix("/") ? URL(fileURLWithPath: path) : URL(fileURLWithPath: base).appendingPathComponent(path)
        return url.standardizedFileURL.path
    }

    /// The folder `path` is in: `/a/b` → `/a`, `/a` → `/`, `a` → "" (no URL made: recovery
    /// asks this of every crash file it purges).
    package static func folder(of path: String) -> String {
        let path = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
        guard let slash = path.lastIndex(of: "/") else { return "" }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// Why a folder could not be made, in plain words ("permission denied", "not a
    /// directory"), naming the folder that failed.
    package struct FolderFailure: Error, Sendable, CustomStringConvertible {
        package let path: String
        package let reason: String
        package var description: String { "\(reason): \(path)" }
    }

    /// Makes `path` and the folders above it that are missing, each private to the user
    /// (0700: report contents are personal data). An existing folder is left as it is.
    package static func makeFolder(_ path: String, system: SystemCalls) -> Result<Void, FolderFailure> {
        var isFolder = false
        if system.fileExists(path, isFolder: &isFolder) {
            return isFolder ? .success(()) : .failure(FolderFailure(path: path, reason: "not a directory"))
        }
        let parent = folder(of: path)
        if !parent.isEmpty, parent != path, case .failure(let failure) = makeFolder(parent, system: system) { return .failure(failure) }
        guard system.mkdir(path, 0o700) == 0 || errno == EEXIST else {
            return .failure(FolderFailure(path: path, reason: String(cString: strerror(errno)).lowercased()))
        }
        return .success(())
    }
}
