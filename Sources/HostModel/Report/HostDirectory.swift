import HostSupport
/// Host-wide attributes (SPEC R-4): merged into every report before its first callback.
///
/// # Thread safety
/// Behind one `Locked`; plugins call `set` from any thread.
package final class HostAttributes: Sendable {
    private let values: Locked<[String: String]>
    private let mirror: @Sendable (String, String?) -> Void

    /// - Parameter mirror: told of every change (the host hands in its crash writer's
    ///   `setAttribute`, so crash files record what reports carry).
    package init(_ initial: [String: String] = [:], mirror: @escaping @Sendable (String, String?) -> Void = { _, _ in }) {
        values = Locked(initial)
        self.mirror = mirror
    }

    /// Sets `key`; nil removes it. Returns false, changing nothing, for a new key past
    /// `ReportContent.attributesMax` or a key or value over `ReportContent.textMaxBytes`
    /// (host-wide attributes reach every report: they are held to a report's limits).
    @discardableResult
    package func set(_ key: String, _ value: String?) -> Bool {
        let fits = { (text: String) in text.utf8.count <= ReportContent.textMaxBytes }
        guard fits(key), value.map(fits) ?? true else { return false }
        return values.withLock { values -> Bool in
            guard value == nil || values[key] != nil || values.count < ReportContent.attributesMax else { return false }
            values[key] = value
            // Under the lock, so crash files end with the value reports carry, whichever of
            // two threads setting one key comes last.
            mirror(key, value)
            return true
        }
    }

    package var snapshot: [String: String] { values.withLock { $0 } }
}

/// The process-wide list of hosts, so that a plugin's call that carries no host (a handle
/// whose report is gone, `log(NULL, …)`, `set_host_attribute`) reaches the right one.
/// Entries are never removed: a host's table stays valid for the life of the process.
///
/// # Thread safety
/// Behind one `Locked`.
package final class HostDirectory: Sendable {
    package static let shared = HostDirectory()

    package struct Entry: Sendable {
        package let log: HostLogger
        package let attributes: HostAttributes
        /// The host's rule events (a use of a handle whose report is gone reaches it here).
        package let events: RuleEventSink
        /// Each slot's `plugins.options`, as JSON text, by the slot's name (SPEC T-3).
        package let pluginOptions: [String: String]
        /// The data folder of the plugin in a slot (by the slot's name), made on first use;
        /// nil when the slot is empty or the folder cannot be made.
        package let dataFolder: @Sendable (String) -> String?

        package init(
            log: HostLogger, attributes: HostAttributes, events: @escaping RuleEventSink = { _, _ in },
            pluginOptions: [String: String] = [:], dataFolder: @escaping @Sendable (String) -> String? = { _ in nil }
        ) {
            self.log = log
            self.attributes = attributes
            self.events = events
            self.pluginOptions = pluginOptions
            self.dataFolder = dataFolder
        }
    }

    private let entries = Locked<(next: UInt32, byID: [UInt32: Entry])>((1, [:]))

    /// Registers a host; ids start at 1 and are never reused.
    package func register(_ entry: Entry) -> UInt32 {
        entries.withLock { state in
            let id = state.next
            state.next += 1
            state.byID[id] = entry
            return id
        }
    }

    package func entry(_ id: UInt32) -> Entry? { entries.withLock { $0.byID[id] } }
}
