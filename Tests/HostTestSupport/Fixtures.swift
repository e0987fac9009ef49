import Foundation
import Host
import HostSupport

/// Compiles C fixture plugins at test time, once per source and flags per test run, into
/// one temporary folder.
///
/// # Thread safety
/// The cache is behind a `Locked`; a compile happens at most once per key, and tests
/// that need fresh plugin globals copy the result with `freshCopy`.
package enum Fixtures {
    package struct CompileError: Error, CustomStringConvertible {
        package let description: String

        package init(description: String) { self.description = description }
    }

    private static let folder = makeTemporaryDirectory("reporthost-fixtures")
    private static let cache = Locked<[String: URL]>([:])
    private static let compileLock = NSLock()

    /// The shared object built from `source` (C11) with `flags`.
    package static func plugin(_ name: String, source: String, flags: [String] = []) throws -> URL {
        let key = name + "\u{0}" + source + "\u{0}" + flags.joined(separator: " ")
        if let url = cache.withLock({ $0[key] }) { return url }
        compileLock.lock()
        defer { compileLock.unlock() }
        if let url = cache.withLock({ $0[key] }) { return url }
        let base = "\(name)-\(abs(key.hashValue))"
        let sourceURL = folder.appendingPathComponent(base + ".c")
        let output = folder.appendingPathComponent(base + ".so")
        try source.write(to: sourceURL, atomically: true, encoding: .utf8)
        try compile([
            "-std=c11", "-D_GNU_SOURCE", "-shared", "-fPIC", "-pthread", "-Wall", "-Werror", "-I", Products.pluginAPIInclude.path,
            sourceURL.path, "-o", output.path,
        ] + flags)
        cache.withLock { $0[key] = output }
        return output
    }

    /// Runs `cc` with `arguments`; throws with its output when it fails.
    package static func compile(_ arguments: [String], compiler: String = "cc") throws {
        let result = try ChildProcess.run("/usr/bin/env", [compiler] + arguments)
        guard result.status == 0 else {
            throw CompileError(description: "\(compiler) failed (\(result.status)): \(result.stderr)")
        }
    }

    /// A copy of `library` at a unique path: a fresh image with its own globals.
    package static func freshCopy(of library: URL) throws -> URL {
        let copy = folder.appendingPathComponent("copy-\(UUID().uuidString)-\(library.lastPathComponent)")
        try FileManager.default.copyItem(at: library, to: copy)
        return copy
    }

    /// Writes `text` to a file in the fixture folder.
    package static func file(_ name: String, _ text: String) throws -> URL {
        let url = folder.appendingPathComponent("\(UUID().uuidString)-\(name)")
        try text.write(to: url, atomically: true, encoding: .utf8)
        return url
    }
}
