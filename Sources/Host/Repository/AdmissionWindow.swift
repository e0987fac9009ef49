import Foundation

/// The local admission window (SPEC D-7): at most `perMinute` submissions admitted in any
/// 60 s, shared by every process on this repository.
extension Repository {
    /// Admits one submission if fewer than `perMinute` were admitted in the last 60 s (0 =
    /// unlimited), and marks the record `submitting` with one more attempt, in one transaction.
    /// Returns false for a local rejection: nothing is counted.
    public func admit(_ rowID: Int64, perMinute: Int, now: Date) throws(StorageError) -> Bool {
        try database.transaction { () throws(StorageError) -> Bool in
            let nowMs = Self.milliseconds(now)
            // Rows dated in the future (a clock stepped back, a damaged row) expire too.
            try database.query(
                "DELETE FROM admissions WHERE at <= ? OR at > ?", [.integer(nowMs &- 60_000), .integer(nowMs &+ 60_000)])
            if perMinute > 0 {
                let used = try database.query("SELECT COUNT(*) FROM admissions").first?.first?.int ?? 0
                if used >= perMinute { return false }
            }
            try database.query("INSERT INTO admissions(at) VALUES(?)", [.integer(nowMs)])
            try database.query(
                "UPDATE reports SET state = ?, attempts = attempts + 1, updated_at = ? WHERE rowid = ?",
                [.text(RecordState.submitting.rawValue), .integer(nowMs), .integer(rowID)])
            return true
        }
    }

    /// When the admission window lets the next submission in (nil: now).
    public func nextAdmission(perMinute: Int, now: Date) throws(StorageError) -> Date? {
        guard perMinute > 0 else { return nil }
        let nowMs = Self.milliseconds(now)
        let times = try database.query(
            "SELECT at FROM admissions WHERE at > ? AND at <= ? ORDER BY at", [.integer(nowMs &- 60_000), .integer(nowMs &+ 60_000)]
        ).compactMap { $0[0].int }
        guard times.count >= perMinute else { return nil }
        return Self.date(times[times.count - perMinute] &+ 60_000)
    }
}
