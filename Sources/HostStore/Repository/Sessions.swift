import FoundationEssentials
import Glibc
import HostModel
import HostSupport

/// Session marks (SPEC D-16): a host that dies leaves its mark, the next launch reports an
/// abnormal exit.
extension Repository {
    /// What a session was doing: `recovering` (running chains over recovered reports) or
    /// `running`. A session that died while recovering is not recovered through the chain
    /// again (that chain is the likely cause).
    package enum SessionPhase: String, Sendable { case recovering, running }

    /// Marks session `id` as running. Committed without waiting for the disk: a killed
    /// process keeps it (the log holds every commit), and the session's first flush (a
    /// report's journal, a crash batch) makes it durable. A power loss before any flush takes
    /// the mark and everything else the session wrote: that session leaves no abnormal exit.
    /// - Parameter history: the session's entry in the history (SPEC B-2), with the bounds
    ///   that prune it; nil for a session that is not one of the program's (`run`'s own host:
    ///   the watched program's session is the one rated).
    package func markSession(_ id: String, phase: SessionPhase = .running, history: SessionStart? = nil) throws(StorageError) {
        let now = Self.milliseconds(system.now())
        try database.transaction(.committed) { () throws(StorageError) in
            try database.query(
                "INSERT OR REPLACE INTO sessions(id, pid, started_at, phase, seq) VALUES(?, ?, ?, ?, \(Self.nextSequence("sessions")))",
                [.text(id), .integer(Int64(getpid())), .integer(now), .text(phase.rawValue)])
            if let history {
                try database.query(
                    """
                    INSERT OR IGNORE INTO session_history(id, started_at, end, release, cgroup, cgroup_version, oom_kills, seq)
                    VALUES(?, ?, ?, ?, ?, ?, ?, \(Self.nextSequence("session_history")))
                    """,
                    [.text(id), .integer(now), .text(SessionEnd.running.rawValue), .optional(history.release),
                     .optional(history.cgroup?.folder), history.cgroup.map { .integer(Int64($0.version)) } ?? .null,
                     history.oomKills.map { .integer(Int64($0)) } ?? .null])
                try prune(history.limits, now: now)
            }
        }
    }

    /// What the history keeps of a session when it starts.
    package struct SessionStart: Sendable {
        package var release: String?
        package var limits: SessionHistory
        /// The process's memory cgroup and its OOM kills at the start (SPEC B-5): the next
        /// launch compares them to tell an OOM kill.
        package var cgroup: MemoryCgroup?
        package var oomKills: Int?

        package init(release: String?, limits: SessionHistory, cgroup: MemoryCgroup? = nil) {
            self.release = release
            self.limits = limits
            self.cgroup = cgroup
            oomKills = cgroup?.oomKills
        }
    }

    /// SPEC B-5: why session `id`, which never stopped, ended: `oom_kill` when its memory
    /// cgroup counted an OOM kill since it started, `unknown` when not (or unreadable); nil
    /// when its start kept no cgroup.
    package func exitCause(of id: String) throws(StorageError) -> String? {
        guard let row = try database.query(
            "SELECT cgroup, cgroup_version, oom_kills FROM session_history WHERE id = ?", [.text(id)]).first,
            let folder = row[0].string, let version = row[1].int
        else { return nil }
        let cgroup = MemoryCgroup(folder: folder, version: Int(version), system: system)
        return cgroup.exitCause(oomKillsBefore: row[2].int.map { Int($0) }) == "oom_kill" ? "oom_kill" : "unknown"
    }

    /// Sets session `id`'s release: one the program names after it started (the `version`
    /// attribute, SPEC B-2).
    package func setRelease(_ release: String?, ofSession id: String) throws(StorageError) {
        try database.query("UPDATE session_history SET release = ? WHERE id = ?", [.optional(release), .text(id)])
    }

    /// The release session `id` started with (SPEC B-2); nil when none or unknown.
    package func release(ofSession id: String) throws(StorageError) -> String? {
        try database.query("SELECT release FROM session_history WHERE id = ?", [.text(id)]).first?.first?.string
    }

    /// How a session ended (SPEC B-2).
    package enum SessionEnd: String, Sendable, CaseIterable {
        case clean, crashed, abnormalExit = "abnormal_exit", running
    }

    /// The next number of a table's `seq`: sessions are ordered by it, never by the clock alone.
    private static func nextSequence(_ table: String) -> String { "(SELECT coalesce(max(seq), 0) + 1 FROM \(table))" }

    /// Forgets sessions past the history's bounds: those that started longer ago than its age,
    /// then the oldest past its count (by the order they started in).
    private func prune(_ limits: SessionHistory, now: Int64) throws(StorageError) {
        let oldest = now - Int64(limits.maxAgeDays) * 86_400_000
        try database.query("DELETE FROM session_history WHERE started_at < ?", [.integer(oldest)])
        try database.query(
            "DELETE FROM session_history WHERE id NOT IN (SELECT id FROM session_history ORDER BY seq DESC LIMIT ?)",
            [.integer(Int64(limits.maxCount))])
    }

    /// Records how session `id` ended, inside the caller's transaction. A crash outranks an
    /// abnormal exit (the same death, found two ways); a clean end is final.
    func recordEnd(of id: String, _ end: SessionEnd, at time: Date?) throws(StorageError) {
        let replaces = end == .crashed ? "('running', 'abnormal_exit')" : "('running')"
        try database.query(
            "UPDATE session_history SET end = ?, ended_at = coalesce(?, ended_at) WHERE id = ? AND end IN \(replaces)",
            [.text(end.rawValue), .optional(time.map { Self.milliseconds($0) }), .text(id)])
    }

    /// The session of a program `reporthost run` watched, with how it ended.
    package func recordWatchedSession(
        _ id: String, startedAt: Date, endedAt: Date, end: SessionEnd, history: SessionStart
    ) throws(StorageError) {
        try database.transaction(.committed) { () throws(StorageError) in
            try database.query(
                "INSERT OR IGNORE INTO session_history(id, started_at, end, release, seq) VALUES(?, ?, ?, ?, \(Self.nextSequence("session_history")))",
                [.text(id), .integer(Self.milliseconds(startedAt)), .text(SessionEnd.running.rawValue), .optional(history.release)])
            try database.query("UPDATE session_history SET ended_at = ? WHERE id = ?", [.integer(Self.milliseconds(endedAt)), .text(id)])
            try recordEnd(of: id, end, at: endedAt)
            try prune(history.limits, now: Self.milliseconds(system.now()))
        }
    }

    /// SPEC B-3: how many sessions in a row before `current` crashed or ended abnormally (a
    /// session still marked `running` whose process is gone is one the next launch will find
    /// ended abnormally). Sessions of processes still running are passed over.
    package func consecutiveCrashes(before current: String) throws(StorageError) -> Int {
        // Only the sessions since the last clean end are read: a start pays for the loop, not
        // for the history. In the order they started (the sequence: two starts can share a
        // millisecond).
        let rows = try database.query(
            """
            SELECT id, end FROM session_history WHERE id != ?1 AND seq > coalesce(
                (SELECT max(seq) FROM session_history WHERE end = 'clean' AND id != ?1), -1)
            """, [.text(current)])
        return rows.filter { row in
            guard let id = row[0].string, let end = row[1].string.flatMap(SessionEnd.init(rawValue:)) else { return false }
            return end != .clean && !(end == .running && isAlive(id))
        }.count
    }

    /// One release's sessions that started since a time (SPEC B-2).
    package struct ReleaseSessions: Sendable, Equatable {
        package var release: String?
        package var sessions = 0
        package var ended = 0
        package var crashed = 0
        package var abnormalExit = 0

        /// Ended sessions that neither crashed nor ended abnormally, over ended sessions; nil
        /// before any ended.
        package var crashFree: Double? {
            ended == 0 ? nil : Double(ended - crashed - abnormalExit) / Double(ended)
        }
    }

    /// Sessions that started at or after `since`, per release (most sessions first).
    package func sessionsByRelease(since: Date) throws(StorageError) -> [ReleaseSessions] {
        var byRelease: [String?: ReleaseSessions] = [:]
        // `status` reads a repository an older host made without migrating it.
        let hasHistory = try database.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'session_history'")
        guard !hasHistory.isEmpty else { return [] }
        let rows = try database.query(
            "SELECT release, end, COUNT(*) FROM session_history WHERE started_at >= ? GROUP BY release, end",
            [.integer(Self.milliseconds(since))])
        for row in rows {
            let release = row[0].string
            let count = Int(row[2].int ?? 0)
            var entry = byRelease[release] ?? ReleaseSessions(release: release)
            entry.sessions += count
            switch row[1].string.flatMap(SessionEnd.init(rawValue:)) {
            case .clean: entry.ended += count
            case .crashed: entry.ended += count; entry.crashed += count
            case .abnormalExit: entry.ended += count; entry.abnormalExit += count
            case .running, nil: break
            }
            byRelease[release] = entry
        }
        return byRelease.values.sorted { ($0.sessions, $1.release ?? "") > ($1.sessions, $0.release ?? "") }
    }

    /// The breadcrumb ring file of session `id` (SPEC B-1).
    package func breadcrumbsPath(_ id: String) -> String {
        folder.appendingPathComponent("breadcrumbs", isDirectory: true).appendingPathComponent(Self.safeFileName(id) + ".ring").path
    }

    /// Ring files and liveness files of sessions that have no mark and no live process:
    /// leftovers of a host killed between the end of a session and their removal, or of a
    /// killed session whose abnormal exit is recorded (its mark goes with the record).
    package func removeLeftoverSessionFiles() throws(StorageError) {
        var marked: Set<String>?
        for (folderName, suffix, path) in [("breadcrumbs", ".ring", breadcrumbsPath), ("sessions", ".alive", alivePath)] {
            let names = system.entries(ofFolder: folder.appendingPathComponent(folderName, isDirectory: true).path) ?? []
            guard !names.isEmpty else { continue }
            if marked == nil { marked = Set(try database.query("SELECT id FROM sessions").compactMap { $0.first?.string }) }
            for name in names where name.hasSuffix(suffix) {
                let id = String(name.dropLast(suffix.count))
                if marked?.contains(id) == false && !isAlive(id) { system.removeItem(path(id)) }
            }
        }
    }

    /// Committed without waiting, as `markSession`: a power loss that takes it back leaves the
    /// session `recovering`, so an abnormal exit found for it skips the chain.
    package func setSessionPhase(_ id: String, _ phase: SessionPhase) throws(StorageError) {
        try database.transaction(.committed) { () throws(StorageError) in
            try database.query("UPDATE sessions SET phase = ? WHERE id = ?", [.text(phase.rawValue), .text(id)])
        }
    }

    /// Removes the mark of session `id` (one that ended, found by recovery).
    package func clearSession(_ id: String) throws(StorageError) {
        try database.transaction { () throws(StorageError) in try deleteMark(id) }
        system.removeItem(alivePath(id))
        system.removeItem(breadcrumbsPath(id))
    }

    /// `clearSession` for this process's own session at a clean stop, its last write: the log
    /// starts over with it, so the next process reads back a few frames, not the whole log.
    ///
    /// Tried once more when it fails (with the log's spare blocks given back on a full disk):
    /// a mark left by a failure of the moment would make the next launch report this clean
    /// stop as an abnormal exit.
    package func endSession(_ id: String) throws(StorageError) {
        let end = { () throws(StorageError) in
            try self.deleteMark(id)
            try self.recordEnd(of: id, .clean, at: self.system.now())
        }
        do {
            try database.startLogOver(end)
        } catch {
            if error.outOfSpace { giveBackLogSpace() }
            try database.transaction(.flushed, end)
        }
        system.removeItem(alivePath(id))
        system.removeItem(breadcrumbsPath(id))
    }

    private func deleteMark(_ id: String) throws(StorageError) {
        try database.query("DELETE FROM sessions WHERE id = ?", [.text(id)])
        try database.query("DELETE FROM crash_attachments WHERE session = ?", [.text(id)])
    }

    /// A file `session` names in its crash files (`crash --attach`), with the device and inode
    /// it has now: recovery reads an `attachment` line only for a file registered so, and only
    /// while it is still that file (SPEC D-3; its size may have grown). A file missing now is
    /// registered as none (recovery then notes it missing, or refuses the file made since).
    package func registerCrashAttachment(session: String, path: String) throws(StorageError) {
        let identity = FileIdentity.of(path, system: system) ?? FileIdentity(device: 0, inode: 0)
        try database.query(
            "INSERT OR REPLACE INTO crash_attachments(session, path, device, inode) VALUES(?, ?, ?, ?)",
            [.text(session), .text(path), .integer(Int64(bitPattern: identity.device)), .integer(Int64(bitPattern: identity.inode))])
    }

    /// The files `session` registered for its crash files: path → (device, inode).
    package func crashAttachments(of session: String) throws(StorageError) -> [String: FileIdentity] {
        var found: [String: FileIdentity] = [:]
        for row in try database.query("SELECT path, device, inode FROM crash_attachments WHERE session = ?", [.text(session)]) {
            guard let path = row[0].string else { continue }
            found[path] = FileIdentity(device: UInt64(bitPattern: row[1].int ?? 0), inode: UInt64(bitPattern: row[2].int ?? 0))
        }
        return found
    }

    /// Locks `sessions/<id>.alive` for as long as the session's process lives, so another
    /// process sharing the repository never takes a running session for an abnormal exit.
    package func holdAlive(_ id: String) throws(StorageError) -> FileLock {
        let folder = folder.appendingPathComponent("sessions")
        if case .failure(let failure) = Paths.makeFolder(folder.path, system: system) {
            throw StorageError(path: folder.path, message: "cannot create the folder (\(failure))")
        }
        guard let lock = try FileLock.take(alivePath(id), waitMilliseconds: 0, system: system) else {
            throw StorageError(path: alivePath(id), message: "session \(id) is already held by another process")
        }
        return lock
    }

    /// Whether the process of session `id` is still running (it holds its liveness lock).
    package func isAlive(_ id: String) -> Bool { FileLock.isHeld(alivePath(id), system: system) }

    private func alivePath(_ id: String) -> String {
        folder.appendingPathComponent("sessions", isDirectory: true).appendingPathComponent(Self.safeFileName(id) + ".alive", isDirectory: false).path
    }

    /// Ids come from the database: only a plain file name is used as one.
    private static func safeFileName(_ id: String) -> String {
        id.isEmpty || id.contains("/") || id.hasPrefix(".") ? "_" : id
    }

    /// Session marks left by hosts that did not stop cleanly, in the order they started.
    package func sessions(except current: String?) throws(StorageError) -> [(id: String, startedAt: Date, phase: SessionPhase)] {
        try database.query("SELECT id, started_at, phase FROM sessions ORDER BY seq").compactMap { row in
            guard let id = row[0].string, id != current else { return nil }
            return (id, Self.date(row[1].int ?? 0), row[2].string.flatMap(SessionPhase.init(rawValue:)) ?? .running)
        }
    }
}

/// Which file a path is: its device and inode.
package struct FileIdentity: Sendable, Equatable {
    package var device: UInt64
    package var inode: UInt64

    /// The file at `path` now (links followed), nil when it cannot be read.
    package static func of(_ path: String, system: SystemCalls) -> FileIdentity? {
        guard let status = system.stat(path) else { return nil }
        return FileIdentity(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
    }
}
