// swift-tools-version:6.0
import Foundation
import PackageDescription

let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().path

/// C sample plugins export only `rh_plugin_entry` (their `exports.map` version script).
func exportsOnlyEntry(_ folder: String) -> [LinkerSetting] {
    [.unsafeFlags(["-Xlinker", "--version-script=\(packageRoot)/Plugins/\(folder)/exports.map"])]
}

// Layers, lowest first (ARCHITECTURE.md): PluginAPI (the C ABI headers) and CrashCapture (the
// signal-safe writer, C) → the engine (HostSupport, HostModel, HostCapture, HostPlugins,
// HostStore, HostRecovery, HostDelivery, Host) → Conformance (the validator) and Receiver (the
// local submission endpoint) → reporthost (the CLI). CFFI and CSQLite are thin shims over
// Debian's libffi and libsqlite3; HTTPPost is POSTs through libcurl (C); Digest is SHA-256 (C).
let package = Package(
    name: "ReportHost",
    products: [
        .library(name: "Host", targets: ["Host"]),
        .executable(name: "reporthost", targets: ["reporthost"]),
        // libreporthost-embed.so: the embedding library of reporthost/embed.h. SwiftPM cannot
        // name a library like the executable, so scripts/build links it as libreporthost.so
        // beside it. (scripts/build also compiles libreporthost-capture.so, the LD_PRELOAD
        // crash writer of `reporthost run`, with cc: SwiftPM would link the Swift runtime
        // into every watched program.)
        .library(name: "reporthost-embed", type: .dynamic, targets: ["Embed"]),
        .executable(name: "reporthost-bench", targets: ["reporthost-bench"]),
        // A hung thread's stack, read from outside by the embedding library (C: no Swift runtime).
        .executable(name: "reporthost-stack", targets: ["reporthost-stack"]),
        .library(name: "PluginKit", targets: ["PluginKit"]),
        .library(name: "rh-bench-plugin", type: .dynamic, targets: ["BenchPlugin"]),
        // Report-handler plugins (not SwiftPM package plugins): lib<name>.so beside the executable.
        .library(name: "scrub-pii", type: .dynamic, targets: ["ScrubPII"]),
        .library(name: "wrapper-sim", type: .dynamic, targets: ["WrapperSim"]),
        .library(name: "account-context", type: .dynamic, targets: ["AccountContext"]),
        .library(name: "async-example", type: .dynamic, targets: ["AsyncExample"]),
    ],
    targets: [
        .target(name: "PluginAPI", path: "Sources/PluginAPI"),
        .systemLibrary(
            name: "CFFI", path: "Sources/CFFI", pkgConfig: "libffi",
            providers: [.apt(["libffi-dev"])]),
        .systemLibrary(
            name: "CSQLite", path: "Sources/CSQLite", pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]),
        // SHA-256, built in: libcrypto cost every program that links the host 1.4 MB for it.
        .target(name: "Digest"),
        .target(name: "CrashCapture"),
        // The breadcrumb ring (SPEC B-1): lock-free, signal-safe writes into a mapped file.
        .target(name: "Breadcrumbs"),
        // embed.h's entry points that must stay lock-free (rh_embed_breadcrumb), in C.
        .target(name: "EmbedCalls", dependencies: ["PluginAPI", "Breadcrumbs"]),
        // Symbolication at recovery: elfutils' libdw (DWARF lines, inlined frames) and libelf,
        // loaded with dlopen at the first symbolizer, not linked (only recovery needs them).
        .target(name: "Symbolize", linkerSettings: [.linkedLibrary("stdc++"), .linkedLibrary("dl")]),
        // libcurl (libcurl4-openssl-dev), not FoundationNetworking: its `try!` on some curl
        // errors could end the host when a server misbehaves. Loaded with dlopen at the first
        // delivery, not linked (its 32 libraries cost every start).
        .target(name: "HTTPPost"),
        // Sentry SDKs' compressed bodies for the receiver: zlib and Brotli's decoder (Debian's
        // zlib1g-dev and libbrotli-dev), loaded with dlopen at the first body, not linked.
        .target(name: "Decompress", linkerSettings: [.linkedLibrary("dl")]),
        // SQLite's own system calls through the host's seam, for failure sweeps.
        .target(name: "SQLiteCalls", dependencies: ["CSQLite"]),
        // The engine, one target per layer, lowest first (ARCHITECTURE.md): a target sees only
        // the ones it declares below it (scripts/build checks declared = used), so a reference
        // that points up is a build error. A client imports the layers it needs; `Host`
        // re-exports the model only.
        // Support: the system-call seam, clocks, locks, threads, JSON, bounded and durable files,
        // the breadcrumb ring file, the memory cgroup's counters. Model: the report, its
        // documents and trail, the configuration, diagnostics, and the value types every layer
        // passes (what a program that embeds the host sees, re-exported by `Host`).
        .target(name: "HostSupport", dependencies: ["Digest", "Breadcrumbs"]),
        .target(name: "HostModel", dependencies: ["HostSupport"]),
        // The crash writer's Swift face, and `run`'s program: spawned, its standard error kept,
        // signals passed on, the preload's environment, whether it can be watched.
        .target(name: "HostCapture", dependencies: ["HostModel", "HostSupport", "CrashCapture", "SignalForwarding"]),
        .target(name: "HostPlugins", dependencies: ["HostModel", "HostSupport", "HostCapture", "PluginAPI", "CFFI"]),
        .target(name: "HostStore", dependencies: ["HostModel", "HostSupport", "HostCapture", "CSQLite", "SQLiteCalls"]),
        .target(name: "HostRecovery", dependencies: ["HostModel", "HostSupport", "HostPlugins", "HostStore", "Symbolize"]),
        .target(name: "HostDelivery", dependencies: ["HostModel", "HostSupport", "HostStore", "HTTPPost"]),
        .target(
            name: "Host", dependencies: ["HostModel", "HostSupport", "HostCapture", "HostPlugins", "HostStore", "HostRecovery", "HostDelivery"]),
        .target(name: "Conformance", dependencies: ["Host", "HostSupport", "HostPlugins"]),
        .target(
            name: "Embed", dependencies: ["Host", "EmbedCalls", "Breadcrumbs", "HostSupport", "HostPlugins"],
            exclude: ["exports.map", "start-order.txt"],
            // Never unloaded: its crash handler and Swift code must outlive any dlclose. It
            // exports embed.h's functions only, so the linker drops the code nothing reaches
            // from them (a smaller text a program maps at start). The functions a start runs
            // come first, together (start-order.txt, made by scripts/start-order; see the
            // function sections below the package).
            linkerSettings: [
                .unsafeFlags([
                    "-Xlinker", "-z", "-Xlinker", "nodelete", "-Xlinker", "--version-script=\(packageRoot)/Sources/Embed/exports.map",
                    "-Xlinker", "--gc-sections", "-Xlinker", "--section-ordering-file=\(packageRoot)/Sources/Embed/start-order.txt",
                ])
            ]),
        .target(name: "Receiver", dependencies: ["Host", "HostSupport", "HostStore", "HostDelivery", "Decompress"]),
        // Capture from outside (SPEC B-6): ptrace and libunwind-ptrace (libunwind-dev), loaded
        // with dlopen at the first trace, not linked (only `run` traces).
        .target(name: "RemoteCapture", linkerSettings: [.linkedLibrary("dl")]),
        .executableTarget(name: "reporthost-stack", dependencies: ["RemoteCapture"]),
        // The async-signal-safe handler that passes signals sent to `reporthost run` on.
        .target(name: "SignalForwarding"),
        // The CLI's main thread serving the main dispatch queue (Foundation's run loop did).
        .target(name: "MainQueue", linkerSettings: [.linkedLibrary("dispatch")]),
        .target(name: "MallocArena"),
        .executableTarget(
            name: "reporthost",
            dependencies: [
                "Host", "HostSupport", "HostCapture", "HostPlugins", "HostStore", "HostRecovery", "HostDelivery", "Conformance", "Receiver",
                "MainQueue", "MallocArena", "RemoteCapture",
            ]),
        .target(name: "PluginKit", dependencies: ["PluginAPI"]),
        .target(
            name: "ScrubPII", dependencies: ["PluginAPI", "Digest"], path: "Plugins/scrub-pii",
            exclude: ["exports.map", "README.md", "fuzz"], publicHeadersPath: "public",
            // Optimized in every build, as a plugin ships: it scans every byte of every text
            // (the tests' debug build would otherwise measure -O0 C).
            cSettings: [.unsafeFlags(["-O2"])],
            // Hyperscan (Debian's libhyperscan-dev): the linear-time engine its rules compile into.
            linkerSettings: exportsOnlyEntry("scrub-pii") + [.linkedLibrary("hs")]),
        .target(
            name: "WrapperSim", dependencies: ["PluginAPI"], path: "Plugins/wrapper-sim",
            exclude: ["exports.map", "README.md"], publicHeadersPath: "public",
            linkerSettings: exportsOnlyEntry("wrapper-sim")),
        .target(
            name: "AccountContext", dependencies: ["PluginKit", "PluginAPI"], path: "Plugins/account-context",
            exclude: ["README.md", "exports.map"], linkerSettings: exportsOnlyEntry("account-context")),
        .target(
            name: "AsyncExample", dependencies: ["PluginKit", "PluginAPI"], path: "Plugins/async-example",
            exclude: ["README.md", "exports.map"], linkerSettings: exportsOnlyEntry("async-example")),
        .target(name: "BenchPlugin", dependencies: ["PluginAPI"], path: "Benchmarks/BenchPlugin"),
        .executableTarget(
            name: "reporthost-bench", dependencies: ["Host", "Receiver", "HostSupport", "HostModel", "HostPlugins", "HostStore", "HostDelivery"],
            path: "Benchmarks/reporthost-bench"),
        .target(name: "HostTestSupport", dependencies: ["Host", "HostModel", "HostSupport", "HostPlugins", "HostStore"], path: "Tests/HostTestSupport"),
        .testTarget(name: "PluginAPITests", dependencies: ["HostTestSupport"]),
        .testTarget(
            name: "HostTests",
            dependencies: [
                "Host", "HostModel", "HostSupport", "HostCapture", "HostPlugins", "HostStore", "HostRecovery", "HostDelivery", "HostTestSupport", "PluginAPI",
                "Breadcrumbs", "Receiver",
            ]),
        .testTarget(name: "ReceiverTests", dependencies: ["Host", "Receiver", "HostTestSupport", "HostSupport", "HostDelivery"]),
        .testTarget(
            name: "ReporthostTests",
            dependencies: [
                "Host", "HostModel", "HostSupport", "HostCapture", "HostPlugins", "HostStore", "HostRecovery", "HostDelivery", "Conformance", "Receiver",
                "HostTestSupport", "SignalForwarding",
            ]),
    ],
    swiftLanguageModes: [.v6]
)

// Each function of the code in Sources/ in a section of its own, so that the linker can place
// the ones a start of libreporthost-embed.so runs side by side (Sources/Embed/start-order.txt).
// The kernel maps a library's code 64 KB around each page first touched: with those few
// hundred functions spread over the whole text, a start mapped nearly all 1.8 MB of it.
for target in package.targets where target.type == .regular || target.type == .executable {
    guard target.path == nil else { continue }  // Sources/<name>: not the plugins, benchmarks or tests
    target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-Xfrontend", "-function-sections"])]
    target.cSettings = (target.cSettings ?? []) + [.unsafeFlags(["-ffunction-sections"])]
}
