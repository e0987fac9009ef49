import FoundationEssentials
import HostSupport

/// A plugin that crashed the host inside one of its calls: no file with the same content
/// (keyed by sha256, wherever it is: a copy, a hard link, a reinstall) is loaded again until
/// `reporthost quarantine --clear`. `path` is where it crashed, for display.
package struct QuarantineEntry: Sendable, Equatable {
    package var path: String
    package var name: String
    package var digest: String
    /// The signal's short name ("SEGV").
    package var signal: String
    /// The ABI member that was running ("on_before_report_created").
    package var callback: String
    /// The latest crash.
    package var at: Date
    package var crashes: Int

    package init(path: String, name: String, digest: String, signal: String, callback: String, at: Date, crashes: Int = 1) {
        self.path = path
        self.name = name
        self.digest = digest
        self.signal = signal
        self.callback = callback
        self.at = at
        self.crashes = crashes
    }

    /// The `status --json` form (SPEC I: `quarantine`).
    package var json: JSONValue {
        .object([
            ("path", .string(path)), ("name", .string(name)), ("digest", .string(digest)), ("signal", .string(signal)),
            ("callback", .string(callback)), ("at", .string(ReportDocument.timestamp(at))), ("crashes", .int(crashes)),
        ])
    }

    /// Why the plugin is not loaded, for logs and internal-log entries.
    package var reason: String {
        "\(name) (\(path)) is quarantined: it crashed the host with SIG\(signal) in \(callback) at \(ReportDocument.timestamp(at))"
            + (crashes > 1 ? " (\(crashes) crashes)" : "")
            + "; not loaded until it is rebuilt or `reporthost quarantine --clear` lifts it"
    }
}
