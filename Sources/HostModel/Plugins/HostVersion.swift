/// The host's own version: what `--version` prints, what plugins read (`host_version`), and the
/// agent version a delivery names.
package enum HostVersion {
    package static let current = "0.1.0"
}
