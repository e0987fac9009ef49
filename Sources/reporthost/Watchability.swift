import Foundation

/// Whether `reporthost run` can preload its crash writer into a program: not into a
/// statically linked one (no dynamic loader reads LD_PRELOAD) nor a setuid or setgid one (the
/// loader ignores LD_PRELOAD there). Such a program still runs, and how it ended is still
/// recorded, but its crashes show only as abnormal exits.
enum Watchability {
    /// Why `program` cannot be watched, or nil when it can (or when it is not an ELF file we
    /// can read: a script, which its interpreter runs dynamically).
    static func problem(with program: String) -> String? {
        guard let path = resolve(program) else { return nil }
        var status = stat()
        if stat(path, &status) == 0, status.st_mode & (S_ISUID | S_ISGID) != 0 {
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

    /// An ELF executable with no PT_INTERP program header (no dynamic loader).
    static func isStaticELF(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path), let header = try? handle.read(upToCount: 64), header.count == 64,
            header.starts(with: [0x7f, 0x45, 0x4c, 0x46]), header[4] == 2, header[5] == 1  // ELF, 64-bit, little-endian
        else { return false }
        defer { try? handle.close() }
        func integer(_ offset: Int, _ size: Int, in data: Data) -> UInt64 {
            data[data.startIndex + offset ..< data.startIndex + offset + size].reversed().reduce(0) { $0 << 8 | UInt64($1) }
        }
        let tableOffset = integer(32, 8, in: header)
        let entrySize = Int(integer(54, 2, in: header))
        let count = Int(integer(56, 2, in: header))
        guard entrySize >= 4, count > 0, count <= 256, (try? handle.seek(toOffset: tableOffset)) != nil,
            let table = try? handle.read(upToCount: entrySize * count), table.count == entrySize * count
        else { return false }
        let interpreter: UInt64 = 3  // PT_INTERP
        return !(0..<count).contains { integer($0 * entrySize, 4, in: table) == interpreter }
    }
}
