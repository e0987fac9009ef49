import FoundationEssentials
import Glibc
import HostModel
import HostSupport

/// Crash-free metrics (SPEC B-2, `metrics.enabled`): the events each session sends in
/// Backtrace's unique and summed events form wait here until a delivery pass sends them.
extension Repository {
    /// A metric event waiting to be sent.
    package struct MetricEvent: Sendable, Equatable {
        package var id: Int64
        /// `unique-events` or `summed-events`: the endpoint it goes to.
        package var kind: String
        package var body: String
        package var attempts: Int
    }

    /// How many failed attempts an event gets before it is dropped (metrics are counts: one
    /// lost launch is better than a queue that never drains).
    package static let metricAttemptsMax = 10

    /// Queues events, in one transaction.
    package func queueMetricEvents(_ events: [(kind: String, body: String)]) throws(StorageError) {
        guard !events.isEmpty else { return }
        try database.transaction(.committed) { () throws(StorageError) in
            for event in events {
                try database.query(
                    "INSERT INTO metric_events(kind, body, created_at) VALUES(?, ?, ?)",
                    [.text(event.kind), .text(event.body), .integer(Self.milliseconds(system.now()))])
            }
        }
    }

    /// The oldest waiting events.
    package func pendingMetricEvents(limit: Int = 100) throws(StorageError) -> [MetricEvent] {
        try database.query("SELECT id, kind, body, attempts FROM metric_events ORDER BY id LIMIT ?", [.integer(Int64(limit))]).compactMap { row in
            guard let id = row[0].int, let kind = row[1].string, let body = row[2].string else { return nil }
            return MetricEvent(id: id, kind: kind, body: body, attempts: Int(row[3].int ?? 0))
        }
    }

    /// An event the server took (or refused for good): gone.
    package func metricEventDone(_ id: Int64) throws(StorageError) {
        try database.transaction(.committed) { () throws(StorageError) in
            try database.query("DELETE FROM metric_events WHERE id = ?", [.integer(id)])
        }
    }

    /// An attempt that failed: counted; dropped past `metricAttemptsMax`. Returns whether it
    /// was dropped.
    @discardableResult
    package func metricEventFailed(_ id: Int64) throws(StorageError) -> Bool {
        try database.transaction(.committed) { () throws(StorageError) -> Bool in
            try database.query("UPDATE metric_events SET attempts = attempts + 1 WHERE id = ?", [.integer(id)])
            let dropped = try database.query(
                "DELETE FROM metric_events WHERE id = ? AND attempts >= ? RETURNING id", [.integer(id), .integer(Int64(Self.metricAttemptsMax))])
            return !dropped.isEmpty
        }
    }

    /// This installation's id (Backtrace's `guid`): made once, kept in the repository's
    /// `guid` file, so every session of the program counts as the same user.
    package func installationGUID() -> String {
        let path = folder.appendingPathComponent("guid").path
        func stored() -> String? {
            guard case .success(let data) = BoundedFile.read(path, limit: 64, system: system) else { return nil }
            let text = String(decoding: data, as: UTF8.self).trimmed
            return text.count == 36 ? text : nil
        }
        if let known = stored() { return known }
        // Something that is not an id (empty, a FIFO, a link, garbage) is replaced, once: a
        // broken file must not give every session an installation of its own.
        if system.lstat(path) != nil {
            logger.warn("the installation id file \(path) holds no id (or is not a regular file): it is replaced")
            system.removeItem(path)
        }
        let made = randomUUID()
        let temporary = path + ".tmp-\(getpid())"
        // A leftover or a link planted under this name goes (the link itself, never what it
        // points to); the new file is created, never opened through a link.
        system.removeItem(temporary)
        guard case .success(let fd) = system.open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600) else { return made }
        _ = system.writeAll(fd, made + "\n")
        _ = system.fsync(fd)
        system.close(fd)
        // link, not rename: a process that made one first keeps it, and this one reads it.
        let linked = link(temporary, path) == 0
        system.removeItem(temporary)
        return linked ? made : stored() ?? made
    }
}

/// The events one session start sends (Backtrace's crash-free metrics): a unique event
/// (`guid`: this installation) and a summed event (`Application Launches`), each carrying the
/// release and the session. The server rates sessions by the crash reports whose `guid` and
/// `application.session` match.
package enum SessionMetrics {
    package static func events(
        application: String, release: String?, session: String, guid: String, at time: Date
    ) -> [(kind: String, body: String)] {
        let attributes = JSONValue.object([
            ("application.version", .string(release ?? "")), ("application.session", .string(session)), ("guid", .string(guid)),
        ])
        let common: [(String, JSONValue)] = [
            ("application", .string(application)), ("appversion", .string(release ?? "")),
            ("metadata", .object([("dropped_events", .int(0))])),
        ]
        let timestamp = JSONValue.int(Int(time.timeIntervalSince1970.rounded(.down)))
        let unique = JSONValue.object(common + [
            ("unique_events", .array([.object([("timestamp", timestamp), ("unique", .array([.string("guid")])), ("attributes", attributes)])])),
        ])
        let summed = JSONValue.object(common + [
            ("summed_events", .array([.object([
                ("timestamp", timestamp), ("metric_group", .string("Application Launches")), ("attributes", attributes),
            ])])),
        ])
        return [("unique-events", unique.serialized()), ("summed-events", summed.serialized())]
    }
}
