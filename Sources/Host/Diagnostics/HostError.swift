/// Failures the host reports to its caller. Each message names what failed and the path
/// or value involved, so a user can act on it.
public enum HostError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A configuration file or value is invalid (exit 2).
    case configuration(String)
    /// A command-line flag or value is invalid (exit 2).
    case usage(String)
    /// A plugin refused to load or is malformed (exit 2).
    case plugin(PluginLoadError)
    /// A file could not be read or written (exit 1).
    case io(path: String, reason: String)
    /// The host cannot run on this system, e.g. libffi closures cannot be allocated (exit 1).
    case runtime(String)

    public var description: String {
        switch self {
        case .configuration(let message): message
        case .usage(let message): message
        case .plugin(let error): error.description
        case .io(let path, let reason): "\(path): \(reason)"
        case .runtime(let message): message
        }
    }

    /// The process exit status for this failure (SPEC I-4).
    public var exitStatus: Int32 {
        switch self {
        case .configuration, .usage, .plugin: 2
        case .io, .runtime: 1
        }
    }
}
