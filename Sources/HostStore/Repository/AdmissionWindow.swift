import FoundationEssentials
import HostModel
import HostSupport

/// The local admission window (SPEC D-7): at most `perMinute` submissions admitted in any
/// 60 s, shared by every process on this repository.
extension Repository {
    /// What `admit` decided.
    package enum Admission: Sendable, Equatable {
        /// Counted in the window; the record is `submitting` with one more attempt.
        case admitted
        /// A local rejection (D-7): nothing is counted.
        case rateLimited
        /// The record is no longer waiting to be sent (another process on the repository took
        /// it, or it was evicted): nothing is counted, nothing sent.
        case taken
    }

    /// Admits one submission if the record still waits to be sent and fewer than `perMinute`
    /// were admitted in the last 60 s (0 = unlimited), and marks the record `submitting` with
    /// one more attempt, in one transaction.
    package func admit(_ rowID: Int64, perMinute: Int, now: Date) throws(StorageError) -> Admission {
        try admit([rowID], perMinute: perMinute, now: now)[0]
    }

    /// `admit` for several records in order, in one flushed transaction (the flush that makes
    /// each record's history durable before its request leaves). Once the window is full,
    /// every later record is `rateLimited` too.
    package func admit(_ rowIDs: [Int64], perMinute: Int, now: Date) throws(StorageError) -> [Admission] {
        try database.transaction { () throws(StorageError) -> [Admission] in
            let nowMs = Self.milliseconds(now)
            // Rows dated in the future (a clock stepped back, a damaged row) expire too.
            try database.query(
                "DELETE FROM admissions WHERE at <= ? OR at > ?", [.integer(nowMs &- 60_000), .integer(nowMs &+ 60_000)])
            var used = perMinute > 0 ? try database.query("SELECT COUNT(*) FROM admissions").first?.first?.int ?? 0 : 0
            var full = false
            return try rowIDs.map { rowID throws(StorageError) -> Admission in
                let state = try database.query("SELECT state FROM reports WHERE rowid = ?", [.integer(rowID)]).first?.first?.string
                guard state == RecordState.awaitingFirstAttempt.rawValue || state == RecordState.retry.rawValue else { return .taken }
                if full || (perMinute > 0 && used >= perMinute) {
                    full = true
                    return .rateLimited
                }
                used += 1
                try database.query("INSERT INTO admissions(at) VALUES(?)", [.integer(nowMs)])
                try database.query(
                    "UPDATE reports SET state = ?, attempts = attempts + 1, updated_at = ? WHERE rowid = ?",
                    [.text(RecordState.submitting.rawValue), .integer(nowMs), .integer(rowID)])
                return .admitted
            }
        }
    }

    /// When the admission window lets the next submission in (nil: now).
    package func nextAdmission(perMinute: Int, now: Date) throws(StorageError) -> Date? {
        guard perMinute > 0 else { return nil }
        let nowMs = Self.milliseconds(now)
        let times = try database.query(
            "SELECT at FROM admissions WHERE at > ? AND at <= ? ORDER BY at", [.integer(nowMs &- 60_000), .integer(nowMs &+ 60_000)]
        ).compactMap { $0[0].int }
        guard times.count >= perMinute else { return nil }
        return Self.date(times[times.count - perMinute] &+ 60_000)
    }
}
