import HostSupport
/// Why a plugin did not load. Each case names the path and the values involved.
public struct PluginLoadError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Reason: Equatable, Sendable {
        /// The file does not exist.
        case missingFile
        /// The file exists but cannot be read.
        case unreadable
        /// `dlopen` failed: not a shared object, wrong architecture or an unresolved symbol.
        case notLoadable(dlerror: String)
        /// The library has no `rh_plugin_entry`.
        case noEntry
        /// `rh_plugin_entry` returned NULL: the plugin refused to load.
        case entryReturnedNull
        /// The plugin's ABI major version differs from the host's.
        case abiMajorMismatch(plugin: UInt32, host: UInt32)
        /// The plugin needs a newer ABI minor version than the host has.
        case abiMinorNewer(plugin: UInt32, host: UInt32)
        /// A struct's `struct_size` does not cover all members of its version.
        case structTooSmall(name: String, size: UInt32, needed: UInt32)
        /// `name` is NULL, empty or not UTF-8.
        case missingName
        /// Loaded in the delegate slot without a `delegate`.
        case missingDelegate
        /// `dlopen` or `rh_plugin_entry` did not return within the callback limit.
        case entryTimedOut(milliseconds: Int)
    }

    public let path: String
    public let reason: Reason

    package init(path: String, reason: Reason) {
        self.path = path
        self.reason = reason
    }

    public var description: String {
        let what: String =
            switch reason {
            case .missingFile: "no such file"
            case .unreadable: "file is not readable"
            case .notLoadable(let text): "not a loadable shared object: \(text)"
            case .noEntry: "no rh_plugin_entry symbol (is this a ReportHost plugin?)"
            case .entryReturnedNull: "rh_plugin_entry returned NULL (the plugin refused to load; see its log lines)"
            case .abiMajorMismatch(let plugin, let host): "ABI major \(plugin), host supports \(host)"
            case .abiMinorNewer(let plugin, let host): "ABI minor \(plugin) is newer than the host's \(host)"
            case .structTooSmall(let name, let size, let needed): "\(name).struct_size \(size), needs at least \(needed)"
            case .missingName: "rh_handler.name is missing or empty"
            case .missingDelegate: "loaded as delegate but rh_handler.delegate is NULL"
            case .entryTimedOut(let ms): "loading it (dlopen and rh_plugin_entry) did not return within \(ms) ms"
            }
        return "plugin \(path): \(what)"
    }
}
