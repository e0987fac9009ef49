import FoundationEssentials

/// Where crash files are written: `crashes/` in the repository. The writer (in-process,
/// preloaded into `run`'s program, or from outside by the tracer) puts them there, and the
/// repository's recovery reads them from there.
package enum CrashFolder {
    package static let name = "crashes"

    /// The crash folder of the repository in `repository`.
    package static func of(repository: URL) -> URL { repository.appendingPathComponent(name, isDirectory: true) }
}
