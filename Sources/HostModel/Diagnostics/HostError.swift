import HostSupport
/// Failures the host reports to its caller. Each message names what failed and the path
/// or value involved, so a user can act on it.
public enum HostError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A configuration file or value is invalid.
    case configuration(String)
    /// A plugin refused to load or is malformed.
    case plugin(PluginLoadError)
    /// A file could not be read or written.
    case io(path: String, reason: String)
    /// Another process holds the repository lock (its pid, when it wrote one), and this entry
    /// waits to be the primary (`launch --watch`) and gave up.
    case lockHeld(path: String, holder: Int32?)
    /// The host cannot run on this system, e.g. libffi closures cannot be allocated.
    case runtime(String)

    public var description: String {
        switch self {
        case .configuration(let message): message
        case .plugin(let error): error.description
        case .io(let path, let reason): "\(path): \(reason)"
        case .runtime(let message): message
        case .lockHeld(let path, let holder):
            "\(path): another reporthost\(holder.map { " (pid \($0))" } ?? "") holds the repository lock"
        }
    }
}
