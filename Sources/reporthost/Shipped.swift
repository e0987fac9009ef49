import FoundationEssentials
import Glibc
import HostSupport

/// Where the CLI finds the files it ships with: beside its executable (a build folder), or
/// where `scripts/install` puts them, PREFIX/lib/reporthost beside PREFIX/bin.
enum Shipped {
    /// The folder of the running executable (after links).
    static func executableFolder() -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX))
        let count = readlink("/proc/self/exe", &buffer, buffer.count)
        guard count > 0 else { return Paths.absolute(CommandLine.arguments.first ?? ".") + "/.." }
        let path = String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return URL(fileURLWithPath: path).deletingLastPathComponent().path
    }

    /// The folders searched, in order.
    static var folders: [String] {
        let beside = executableFolder()
        return [beside, URL(fileURLWithPath: beside).deletingLastPathComponent().appendingPathComponent("lib/reporthost").path]
    }

    /// The first folder that holds every one of `names`, or nil.
    static func folder(holding names: [String]) -> String? {
        folders.first { folder in names.allSatisfy { FileManager.default.isReadableFile(atPath: "\(folder)/\($0)") } }
    }
}
