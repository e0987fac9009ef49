import Foundation

/// Session marks (SPEC D-16): a host that dies leaves its mark, the next launch reports an
/// abnormal exit.
extension Repository {
    /// What a session was doing: `recovering` (running chains over recovered reports) or
    /// `running`. A session that died while recovering is not recovered through the chain
    /// again (that chain is the likely cause).
    public enum SessionPhase: String, Sendable { case recovering, running }

    public func markSession(_ id: String, phase: SessionPhase = .running) throws(StorageError) {
        try database.query(
            "INSERT OR REPLACE INTO sessions(id, pid, started_at, phase) VALUES(?, ?, ?, ?)",
            [.text(id), .integer(Int64(getpid())), .integer(Self.milliseconds(Date())), .text(phase.rawValue)])
    }

    public func setSessionPhase(_ id: String, _ phase: SessionPhase) throws(StorageError) {
        try database.query("UPDATE sessions SET phase = ? WHERE id = ?", [.text(phase.rawValue), .text(id)])
    }

    public func clearSession(_ id: String) throws(StorageError) {
        try database.query("DELETE FROM sessions WHERE id = ?", [.text(id)])
    }

    /// Session marks left by hosts that did not stop cleanly.
    public func sessions(except current: String?) throws(StorageError) -> [(id: String, startedAt: Date, phase: SessionPhase)] {
        try database.query("SELECT id, started_at, phase FROM sessions ORDER BY started_at").compactMap { row in
            guard let id = row[0].string, id != current else { return nil }
            return (id, Self.date(row[1].int ?? 0), row[2].string.flatMap(SessionPhase.init(rawValue:)) ?? .running)
        }
    }
}
