import FoundationEssentials
import Glibc
import HostModel
import HostSupport

/// What the command line needs of an ELF file's header: its type and whether it names a
/// dynamic loader (PT_INTERP). `run` warns for a program with none (statically linked);
/// `check` refuses what is not a shared object (a position-independent executable is ET_DYN
/// too, but names a loader).
package struct ELFFile {
    /// `e_type`: 2 an executable, 3 a shared object (or a position-independent executable).
    package let type: UInt16
    /// Whether a PT_INTERP program header is there; nil when the table could not be read (a
    /// 32-bit or big-endian file, whose table this host does not read, or a truncated one).
    package let hasInterpreter: Bool?

    package static let sharedObject: UInt16 = 3

    /// nil when `path` cannot be read or is not ELF.
    package init?(path: String, system: SystemCalls) {
        let fd = system.openRaw(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { system.close(fd) }
        func read(_ count: Int, at offset: UInt64) -> Data? {
            var bytes = [UInt8](repeating: 0, count: count)
            let got = system.pread(fd, &bytes, count, off_t(clamping: offset))
            return got == count ? Data(bytes) : nil
        }
        guard let header = read(64, at: 0), header.starts(with: [0x7f, 0x45, 0x4c, 0x46])
        else { return nil }
        let littleEndian = header[header.startIndex + 5] == 1
        func integer(_ offset: Int, _ size: Int, in data: Data) -> UInt64 {
            let bytes = data[data.startIndex + offset ..< data.startIndex + offset + size]
            return (littleEndian ? bytes.reversed() : Array(bytes)).reduce(0) { $0 << 8 | UInt64($1) }
        }
        type = UInt16(integer(16, 2, in: header))
        // The program header table of a 64-bit little-endian file (this host's kind).
        let tableOffset = integer(32, 8, in: header)
        let entrySize = Int(integer(54, 2, in: header))
        let count = Int(integer(56, 2, in: header))
        guard header[header.startIndex + 4] == 2, littleEndian, entrySize >= 4, count > 0, count <= 256,
            let table = read(entrySize * count, at: tableOffset)
        else {
            hasInterpreter = nil
            return
        }
        let interpreter: UInt64 = 3  // PT_INTERP
        hasInterpreter = (0..<count).contains { integer($0 * entrySize, 4, in: table) == interpreter }
    }

    /// A shared object a plugin can be: ET_DYN with no loader of its own.
    package var isSharedObject: Bool { type == Self.sharedObject && hasInterpreter != true }
}
