import HostSupport

/// What identifies a plugin file for the quarantine: its real path (symbolic links
/// resolved) and the sha256 of its contents, so a rebuilt plugin is a different plugin.
package struct PluginIdentity: Sendable, Hashable {
    package var realPath: String
    /// Empty when the file could not be read.
    package var digest: String

    package init(path: String, system: SystemCalls) {
        let absolute = Paths.absolute(path)
        realPath = system.realpath(absolute) ?? absolute
        digest = SHA256.hex(ofFileAt: realPath, system: system) ?? ""
    }
}
