import FoundationEssentials
import Glibc
import HostCore
import HostCapture
import HostPlugins

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
    package func markSession(_ id: String, phase: SessionPhase = .running) throws(StorageError) {
        try database.transaction(.committed) { () throws(StorageError) in
            try database.query(
                "INSERT OR REPLACE INTO sessions(id, pid, started_at, phase) VALUES(?, ?, ?, ?)",
                [.text(id), .integer(Int64(getpid())), .integer(Self.milliseconds(SystemCalls.live.now())), .text(phase.rawValue)])
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
    }

    /// `clearSession` for this process's own session at a clean stop, its last write: the log
    /// starts over with it, so the next process reads back a few frames, not the whole log.
    ///
    /// Tried once more when it fails (with the log's spare blocks given back on a full disk):
    /// a mark left by a failure of the moment would make the next launch report this clean
    /// stop as an abnormal exit.
    package func endSession(_ id: String) throws(StorageError) {
        do {
            try database.startLogOver { () throws(StorageError) in try deleteMark(id) }
        } catch {
            if error.outOfSpace { giveBackLogSpace() }
            try database.transaction { () throws(StorageError) in try deleteMark(id) }
        }
        system.removeItem(alivePath(id))
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
        let identity = FileIdentity.of(path) ?? FileIdentity(device: 0, inode: 0)
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
        if case .failure(let failure) = Paths.makeFolder(folder.path) {
            throw StorageError(path: folder.path, message: "cannot create the folder (\(failure))")
        }
        guard let lock = try FileLock.take(alivePath(id), waitMilliseconds: 0) else {
            throw StorageError(path: alivePath(id), message: "session \(id) is already held by another process")
        }
        return lock
    }

    /// Whether the process of session `id` is still running (it holds its liveness lock).
    package func isAlive(_ id: String) -> Bool { FileLock.isHeld(alivePath(id)) }

    private func alivePath(_ id: String) -> String {
        // Ids come from the database: only a plain file name is used as one.
        let safe = id.isEmpty || id.contains("/") || id.hasPrefix(".") ? "_" : id
        return folder.appendingPathComponent("sessions", isDirectory: true).appendingPathComponent(safe + ".alive", isDirectory: false).path
    }

    /// Session marks left by hosts that did not stop cleanly.
    package func sessions(except current: String?) throws(StorageError) -> [(id: String, startedAt: Date, phase: SessionPhase)] {
        try database.query("SELECT id, started_at, phase FROM sessions ORDER BY started_at").compactMap { row in
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
    package static func of(_ path: String) -> FileIdentity? {
        guard let status = SystemCalls.live.stat(path) else { return nil }
        return FileIdentity(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
    }
}
