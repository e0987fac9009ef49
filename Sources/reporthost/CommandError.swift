import Host

/// A command line the CLI cannot run: an unknown command or option, a missing or bad value.
/// Exit status 2 (SPEC I-4).
struct UsageError: Error, CustomStringConvertible {
    let description: String

    init(_ message: String) { description = message }
}

extension HostError {
    /// The process exit status for this failure (SPEC I-4): what the user must fix in their
    /// input (configuration, plugin) is 2, what went wrong on the system is 1.
    var exitStatus: Int32 {
        switch self {
        case .configuration, .plugin: 2
        case .io, .runtime, .lockHeld: 1
        }
    }
}
