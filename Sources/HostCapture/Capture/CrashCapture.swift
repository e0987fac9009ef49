import CrashCapture
import FoundationEssentials

/// The signal-safe crash writer (SPEC D-1), as the parts of the engine that need it see it:
/// host-wide attributes and attachment paths for crash files, an alternate stack for each
/// thread that runs plugin code, and which plugin call each thread is in (so a plugin that
/// crashes the host is named and quarantined).
///
/// A value handed in, not a global: `ReportHost(crashCapture:)` passes it to the loader and
/// the pipeline, the session installs it. `.process` reaches the process's one C writer
/// (signal handlers are process-wide); `.off` records nothing, for a host that must leave
/// the process's crash state alone.
///
/// # Thread safety
/// The C writer keeps its own state behind atomics and per-thread marks: any thread.
package struct CrashCapture: Sendable {
    /// Whether calls reach the C writer.
    package let isLive: Bool

    /// The writer of this process.
    package static let process = CrashCapture(isLive: true)
    /// A writer that records nothing.
    package static let off = CrashCapture(isLive: false)

    /// Installs the handlers writing into `crashes`, naming `session`; registers the host-wide
    /// attributes, telling `omitted` the keys crash files cannot carry. Returns false if the
    /// handlers could not be installed.
    @discardableResult
    package func install(
        crashes: URL, session: String, attributes: [String: String], omitted: (String) -> Void = { _ in }
    ) -> Bool {
        guard isLive else { return false }
        for (key, value) in attributes.sorted(by: { $0.key < $1.key }) where !setAttribute(key, value) { omitted(key) }
        return rh_crash_install(crashes.path, session)
    }

    /// Whether the handlers are installed in this process.
    package var isInstalled: Bool { isLive && rh_crash_is_installed() }

    /// The log line for an attribute crash files cannot carry.
    package static func omission(of key: String) -> String {
        "crash files omit the attribute '\(key.prefix(64))' (at most 64 attributes, each key=value of at most 511 bytes "
            + "with no newline); reports still carry it"
    }

    /// Sets (nil: removes) a host-wide attribute recorded in crash files. Returns false when
    /// crash files cannot carry it (`omission(of:)` says why): they then omit the key, rather
    /// than keep a value reports no longer carry.
    @discardableResult
    package func setAttribute(_ key: String, _ value: String?) -> Bool {
        guard isLive else { return true }
        if let value, rh_crash_set_attribute(key, value) { return true }
        rh_crash_remove_attribute(key)
        return value == nil
    }

    /// Gives the calling thread an alternate signal stack (freed when the thread ends), so a
    /// stack overflow there is still captured. Does nothing before `install`.
    @discardableResult
    package func prepareThread() -> Bool { isLive && rh_crash_prepare_thread() }

    /// Registers an attachment path recorded in crash files.
    package func addAttachment(path: String) {
        guard isLive else { return }
        _ = rh_crash_add_attachment(path)
    }

    /// Re-reads the module map after a library was loaded.
    package func refreshModules() {
        guard isLive else { return }
        rh_crash_refresh_modules()
    }

    /// Registers a plugin file before it is opened; 0 when the writer's table is full (or
    /// the writer is off).
    package func registerPlugin(path: String, digest: String) -> Int32 { isLive ? rh_crash_register_plugin(path, digest) : 0 }

    /// Names a registered plugin once its entry returned.
    package func namePlugin(_ id: Int32, _ name: String) {
        guard isLive, id > 0 else { return }
        rh_crash_name_plugin(id, name)
    }

    /// Runs `body` marked as `call` of plugin `id` on this thread, so a crash inside it names
    /// the plugin and the member.
    package func inPlugin<T>(_ id: Int32, _ call: PluginCall, _ body: () throws -> T) rethrows -> T {
        guard isLive, id > 0 else { return try body() }
        let previous = rh_crash_enter_plugin(id, call.marker)
        defer { rh_crash_leave_plugin(previous) }
        return try body()
    }

    /// Crashes on purpose with `signal` (`reporthost crash`).
    package static func crash(_ signal: Int32) -> Never {
        rh_crash_now(signal)
        fatalError("signal \(signal) did not end the process")
    }
}

/// A plugin member a thread is in, as a crash file names it (the writer's `rh_crash_call`):
/// the engine's other layers never see the C constants.
package enum PluginCall: Sendable {
    /// `dlopen`: the library's constructors.
    case load
    case entry, before, after, destroy, addFields, checkFields, attachments, attachmentsAsync

    var marker: rh_crash_call {
        switch self {
        case .load: RH_CRASH_CALL_LOAD
        case .entry: RH_CRASH_CALL_ENTRY
        case .before: RH_CRASH_CALL_BEFORE
        case .after: RH_CRASH_CALL_AFTER
        case .destroy: RH_CRASH_CALL_DESTROY
        case .addFields: RH_CRASH_CALL_ADD_FIELDS
        case .checkFields: RH_CRASH_CALL_CHECK_FIELDS
        case .attachments: RH_CRASH_CALL_ATTACHMENTS
        case .attachmentsAsync: RH_CRASH_CALL_ATTACHMENTS_ASYNC
        }
    }
}
