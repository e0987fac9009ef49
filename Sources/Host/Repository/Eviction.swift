import Foundation

/// Maintenance: the storage limits (SPEC D-12) and the leftovers of an interrupted run.
extension Repository {
    /// What one maintenance pass evicted.
    public struct Eviction: Sendable, Equatable {
        public var evicted: [String] = []
        /// Targets still exceeded once nothing evictable was left (protected records remain).
        public var overTarget = false
    }

    /// Evicts until `maxRecordCount` and `maxDatabaseSizeMB` hold, or nothing evictable is
    /// left: terminal records first, then retry records, oldest first. Never evicted: records
    /// pending purge or chain, awaiting their first attempt, or being submitted.
    ///
    /// The database file does not shrink when rows are deleted, so the size target is
    /// measured as the pages in use (page count less free pages). Each step deletes one
    /// evictable record, so the pass ends after at most that many steps.
    @discardableResult
    public func enforceLimits() throws(StorageError) -> Eviction {
        var eviction = Eviction()
        let maxRecords = limits.maxRecordCount
        let maxBytes = limits.maxDatabaseSizeMB * 1024 * 1024
        guard maxRecords > 0 || maxBytes > 0 else { return eviction }
        let candidates = try database.query(
            """
            SELECT rowid, report_id FROM reports WHERE state IN ('terminal', 'retry')
            ORDER BY CASE state WHEN 'terminal' THEN 0 ELSE 1 END, created_at, rowid
            """)
        var total = try database.query("SELECT COUNT(*) FROM reports").first?.first?.int ?? 0
        func overTarget() throws(StorageError) -> Bool {
            if maxRecords > 0 && total > maxRecords { return true }
            if maxBytes > 0 { return try usedBytes() > maxBytes }
            return false
        }
        for candidate in candidates {
            guard try overTarget() else { return eviction }
            try delete(candidate[0].int ?? 0)
            eviction.evicted.append(candidate[1].string ?? "")
            total -= 1
        }
        eviction.overTarget = try overTarget()
        return eviction
    }

    /// Bytes of the database pages in use.
    public func usedBytes() throws(StorageError) -> Int {
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
    public func sweepLeftovers() throws(StorageError) -> Int {
        let files = FileManager.default
        var removed = 0
        for name in (try? files.contentsOfDirectory(atPath: folder.path)) ?? [] where name.hasPrefix("outgoing-") {
            if (try? files.removeItem(at: folder.appendingPathComponent(name))) != nil { removed += 1 }
        }
        var named: [String: Set<String>] = [:]
        for row in try database.query("SELECT record, position, file FROM attachments") {
            named[String(row[0].int ?? 0), default: []].insert(row[2].string ?? String(row[1].int ?? 0))
        }
        for record in (try? files.contentsOfDirectory(atPath: attachmentsFolder.path)) ?? [] {
            let recordFolder = attachmentsFolder.appendingPathComponent(record)
            guard let kept = named[record] else {
                if (try? files.removeItem(at: recordFolder)) != nil { removed += 1 }
                continue
            }
            for copy in (try? files.contentsOfDirectory(atPath: recordFolder.path)) ?? [] where !kept.contains(copy) {
                if (try? files.removeItem(at: recordFolder.appendingPathComponent(copy))) != nil { removed += 1 }
            }
        }
        return removed
    }
}
