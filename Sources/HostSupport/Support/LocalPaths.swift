import FoundationEssentials
import Glibc

/// Local paths in what leaves the machine: a server needs file names, and module paths for
/// symbolication, never the user's home folder.
package enum LocalPaths {
    /// The last component: what a note or attribute sent with a report names a file by. As
    /// `URL(fileURLWithPath:).lastPathComponent` names it (slashes at the end do not count, `/`
    /// is its own name), without making a URL: a backlog's recovery names every crash file.
    package static func fileName(_ path: String) -> String {
        let slash = UInt8(ascii: "/")
        let utf8 = path.utf8
        var end = utf8.endIndex
        while end > utf8.startIndex, utf8[utf8.index(before: end)] == slash { end = utf8.index(before: end) }
        guard end > utf8.startIndex else { return path.isEmpty ? "" : "/" }
        let start = utf8[..<end].lastIndex(of: slash).map(utf8.index(after:)) ?? utf8.startIndex
        return String(decoding: utf8[start..<end], as: UTF8.self)
    }

    /// `path` with the user's home folder written `~` (`/home/ana/app/libx.so` →
    /// `~/app/libx.so`); other paths as they are.
    package static func forServer(_ path: String, home: String? = homeFolder) -> String {
        guard let home, home.count > 1 else { return path }
        let prefix = home.hasSuffix("/") ? String(home.dropLast()) : home
        if path == prefix { return "~" }
        return path.hasPrefix(prefix + "/") ? "~" + path.dropFirst(prefix.count) : path
    }

    /// The home folder of the user running the host (`HOME`, else the password database).
    package static let homeFolder: String? = {
        if let home = ProcessInfo.processInfo.environment["HOME"], home.hasPrefix("/") { return home }
        guard let entry = getpwuid(getuid()), let directory = entry.pointee.pw_dir else { return nil }
        return String(cString: directory)
    }()
}
