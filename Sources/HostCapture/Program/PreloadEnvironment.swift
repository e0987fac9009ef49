import FoundationEssentials
import HostModel
import HostSupport

/// The environment `reporthost run` starts a program with (the engine's, not the CLI's: the
/// variable names are the capture library's, `Sources/CapturePreload/preload.c`): the library
/// preloaded ahead of what `LD_PRELOAD` held, the folder and session its crash files take, and
/// the configuration's attributes the writer carries (at most 64, none with a `=` in its key
/// or a line break).
package enum PreloadEnvironment {
    package static func make(
        from base: [String: String], library: String, crashes: URL, session: String, configuration: Configuration
    ) -> [String: String] {
        var environment = base
        environment["LD_PRELOAD"] = ([library] + (base["LD_PRELOAD"].map { [$0] } ?? [])).joined(separator: ":")
        environment["REPORTHOST_CAPTURE_DIR"] = crashes.path
        environment["REPORTHOST_CAPTURE_SESSION"] = session
        environment["REPORTHOST_CAPTURE_ATTRIBUTES"] = configuration.attributes
            .filter { !$0.key.contains("=") && !$0.key.contains("\n") && !$0.value.contains("\n") }
            .sorted { $0.key < $1.key }.prefix(64).map { "\($0.key)=\($0.value)" }.joined(separator: "\n")
        return environment
    }
}
