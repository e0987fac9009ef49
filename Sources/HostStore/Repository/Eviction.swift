import FoundationEssentials
import HostModel
import HostSupport

/// Maintenance: the storage limits (SPEC D-12) and the leftovers of an interrupted run.
extension Repository {
    /// What one maintenance pass evicted.
    package struct Eviction: Sendable, Equatable {
        package var evicted: [String] = []
        /// The bytes the evicted records held (documents and attachments, as `status` counts).
        package var bytes = 0
        /// How many were evicted from each state.
        package var byState: [RecordState: Int] = [:]
        /// Targets still exceeded once nothing evictable was left (protected records remain).
        package var overTarget = false
    }

    /// Evictions since the repository was created (`status`).
    package struct EvictionTotals: Sendable, Equatable {
        package var records = 0
        package var bytes = 0
        package init() {}
    }

    /// Read-only commands may open a repository of an older schema, which has no counters.
    package func evictionTotals() throws(StorageError) -> EvictionTotals {
        guard try !database.query("SELECT 1 FROM sqlite_master WHERE name = 'counters'").isEmpty else { return EvictionTotals() }
        let rows = try database.query("SELECT name, value FROM counters WHERE name IN ('evicted_records', 'evicted_bytes')")
        var totals = EvictionTotals()
        for row in rows {
            let value = Int(row[1].int ?? 0)
            if row[0].string == "evicted_records" { totals.records = value } else { totals.bytes = value }
        }
        return totals
    }

    /// Evicts until `maxRecordCount` and `maxDatabaseSizeMB` hold, or nothing evictable is
    /// left: terminal records first, then retry records, oldest first. Never evicted: records
    /// pending purge or chain, awaiting their first attempt, or being submitted.
    ///
    /// The database file does not shrink when rows are deleted, so the size target is
    /// measured as the pages in use (page count less free pages). Each step deletes one
    /// evictable record, so the pass ends after at most that many steps.
    @discardableResult
    package func enforceLimits() throws(StorageError) -> Eviction {
        var eviction = Eviction()
        let maxRecords = limits.maxRecordCount
        let maxBytes = limits.maxDatabaseSizeMB * 1024 * 1024
        guard maxRecords > 0 || maxBytes > 0 else { return eviction }
        var total = try database.query("SELECT COUNT(*) FROM reports").first?.first?.int ?? 0
        func overTarget() throws(StorageError) -> Bool {
            if maxRecords > 0 && total > maxRecords { return true }
            if maxBytes > 0 { return try usedBytes() > maxBytes }
            return false
        }
        // Within the limits (every store but the one that crosses them), no record is read.
        guard try overTarget() else { return eviction }
        let candidates = try database.query(
            """
            SELECT rowid, report_id, state, bytes FROM reports WHERE state IN ('terminal', 'retry')
            ORDER BY CASE state WHEN 'terminal' THEN 0 ELSE 1 END, created_at, rowid
            """)
        for candidate in candidates {
            guard try overTarget() else { break }
            try discard(candidate[0].int ?? 0)
            eviction.evicted.append(candidate[1].string ?? "")
            eviction.bytes += Int(candidate[3].int ?? 0)
            eviction.byState[RecordState(rawValue: candidate[2].string ?? "") ?? .terminal, default: 0] += 1
            total -= 1
        }
        eviction.overTarget = try overTarget()
        try report(eviction)
        return eviction
    }

    /// One info line per pass that evicted (D-12), and the totals `status` shows.
    private func report(_ eviction: Eviction) throws(StorageError) {
        guard !eviction.evicted.isEmpty else { return }
        try database.transaction { () throws(StorageError) in
            for (name, value) in [("evicted_records", eviction.evicted.count), ("evicted_bytes", eviction.bytes)] {
                try database.query(
                    "INSERT INTO counters(name, value) VALUES(?, ?) ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
                    [.text(name), .integer(Int64(value))])
            }
        }
        let states = [RecordState.terminal, .retry].compactMap { state in eviction.byState[state].map { "\($0) \(state.rawValue)" } }
        var targets: [String] = []
        if limits.maxRecordCount > 0 { targets.append("storage.maxRecordCount \(limits.maxRecordCount)") }
        if limits.maxDatabaseSizeMB > 0 { targets.append("storage.maxDatabaseSizeMB \(limits.maxDatabaseSizeMB)") }
        logger.info(
            "storage limits (\(targets.joined(separator: ", "))): evicted \(eviction.evicted.count) record(s), \(eviction.bytes) bytes (\(states.joined(separator: ", ")))\(eviction.overTarget ? "; still over the target: the rest are protected" : "")")
    }

    /// Bytes of the database pages in use.
    package func usedBytes() throws(StorageError) -> Int {
        let pages = try database.query("PRAGMA page_count").first?.first?.int ?? 0
        let free = try database.query("PRAGMA freelist_count").first?.first?.int ?? 0
        let size = try database.query("PRAGMA page_size").first?.first?.int ?? 4096
        return Int((pages - free) * size)
    }

    /// Removes what a host killed between a commit and its file deletions leaves behind: request
    /// bodies (`outgoing-*.multipart`), attachment folders of records that have none, and copies
    /// no attachment row names. Call with the repository lock held (a launch). Returns how many
    /// files and folders went.
    @discardableResult
    package func sweepLeftovers() throws(StorageError) -> Int {
        var removed = 0
        for name in system.entries(ofFolder: folder.path) ?? [] where name.hasPrefix("outgoing-") {
            if system.removeItem(folder.appendingPathComponent(name).path) { removed += 1 }
        }
        var named: [String: Set<String>] = [:]
        for row in try database.query("SELECT record, position, file FROM attachments") {
            named[String(row[0].int ?? 0), default: []].insert(row[2].string ?? String(row[1].int ?? 0))
        }
        for record in system.entries(ofFolder: attachmentsFolder.path) ?? [] {
            let recordFolder = attachmentsFolder.appendingPathComponent(record)
            guard let kept = named[record] else {
                if system.removeItem(recordFolder.path) { removed += 1 }
                continue
            }
            for copy in system.entries(ofFolder: recordFolder.path) ?? [] where !kept.contains(copy) {
                if system.removeItem(recordFolder.appendingPathComponent(copy).path) { removed += 1 }
            }
        }
        return removed
    }
}
