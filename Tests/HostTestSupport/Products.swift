import Foundation

/// Where the build put its products, and the package's source tree.
package enum Products {
    /// The folder of the running test binary: built products (the `reporthost`
    /// executable, plugin libraries) sit beside it.
    package static let directory: URL = {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: exe).deletingLastPathComponent()
    }()

    package static var reporthost: URL { directory.appendingPathComponent("reporthost") }

    /// The package root, from this file's place in the source tree.
    package static let packageRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    package static var pluginAPIInclude: URL { packageRoot.appendingPathComponent("Sources/PluginAPI/include") }

    /// The project's own Python (`scripts/test` installs junitparser, selenium and
    /// backtracepython into it).
    package static var python: URL { packageRoot.appendingPathComponent(".build/venv/bin/python") }
}

/// A fresh temporary folder per call.
package func makeTemporaryDirectory(_ label: String = "reporthost-test") -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("\(label)-\(UUID().uuidString)")
    try! FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}
