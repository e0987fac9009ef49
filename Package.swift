// swift-tools-version:6.0
import PackageDescription

// Layers, lowest first: PluginAPI (the C ABI headers) → Host (the engine) → reporthost (the CLI).
// CFFI and CSQLite are thin shims over Debian's libffi and libsqlite3.
let package = Package(
    name: "ReportHost",
    products: [
        .library(name: "Host", targets: ["Host"]),
        .executable(name: "reporthost", targets: ["reporthost"]),
        .executable(name: "reporthost-bench", targets: ["reporthost-bench"]),
        .library(name: "rh-bench-plugin", type: .dynamic, targets: ["BenchPlugin"]),
    ],
    targets: [
        .target(name: "PluginAPI", path: "Sources/PluginAPI"),
        .systemLibrary(
            name: "CFFI", path: "Sources/CFFI", pkgConfig: "libffi",
            providers: [.apt(["libffi-dev"])]),
        .systemLibrary(
            name: "CSQLite", path: "Sources/CSQLite", pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]),
        .target(name: "Host", dependencies: ["PluginAPI", "CFFI"]),
        .executableTarget(name: "reporthost", dependencies: ["Host"]),
        .target(name: "BenchPlugin", dependencies: ["PluginAPI"], path: "Benchmarks/BenchPlugin"),
        .executableTarget(name: "reporthost-bench", dependencies: ["Host"], path: "Benchmarks/reporthost-bench"),
        .target(name: "HostTestSupport", dependencies: ["Host"], path: "Tests/HostTestSupport"),
        .testTarget(name: "PluginAPITests", dependencies: ["HostTestSupport"]),
        .testTarget(name: "HostTests", dependencies: ["Host", "HostTestSupport", "PluginAPI"]),
        .testTarget(
            name: "ReporthostTests", dependencies: ["Host", "HostTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
