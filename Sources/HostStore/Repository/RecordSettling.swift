import FoundationEssentials
import HostModel
import HostSupport

/// A record's delivery steps (RecordLifecycle.swift draws the whole life).
extension Repository {
    // MARK: Delivery (admitting an attempt is in AdmissionWindow.swift)

    /// The attempt failed and a later one is allowed: `retry`, due at `at`; nil under retry
    /// behaviour `none` (due `interval` after this change once retries are allowed, D-5).
    /// Not flushed, as `finish`: the admission flushed the attempt; a power loss takes the
    /// record back to `submitting`, which the next launch counts as an interrupted attempt.
    package func retryLater(_ rowID: Int64, reason: String, at: Date?) throws(StorageError) {
        try database.transaction(.committed) { () throws(StorageError) in
            _ = try database.query(
                "UPDATE reports SET state = ?, outcome = ?, next_attempt_at = ?, updated_at = ? WHERE rowid = ?",
                [.text(RecordState.retry.rawValue), .text(reason), .optional(at.map { Self.milliseconds($0, rounding: .down) }),
                 .integer(Self.milliseconds(system.now())), .integer(rowID)])
        }
    }

    /// Runs the outcomes of several attempts (`retryLater`, and `finish` of records without
    /// attachment copies) in one commit that does not wait for the disk, as each alone would
    /// not: a kill loses no committed outcome; a power loss before the next flush takes them
    /// back to `submitting`, which the next launch counts as interrupted attempts (D-4, D-9).
    package func settling(_ body: () throws(StorageError) -> Void) throws(StorageError) {
        try database.transaction(.committed, body)
    }

    /// Holds a record (SPEC D-9, status states): it keeps its content and attempts and is not
    /// sent until its reason's kind is released.
    package func hold(_ rowID: Int64, _ reason: HoldReason) throws(StorageError) {
        try database.query(
            "UPDATE reports SET state = ?, held = ?, updated_at = ? WHERE rowid = ?",
            [.text(RecordState.held.rawValue), .text(reason.stored), .integer(Self.milliseconds(system.now())), .integer(rowID)])
    }

    /// A retryable failure of `record`'s attempt number `attempts` (D-9, D-11): retained for
    /// retry at the failure's time plus the interval (due at once with `dueNow`), not before
    /// `retryAfter`; terminal once `retry.limit` retries failed. True when it became terminal.
    @discardableResult
    package func retainOrFinish(
        _ record: ReportRecord, attempts: Int, reason: String, retry: RetryPolicy, retryAfter: TimeInterval? = nil, dueNow: Bool = false,
        now: Date
    ) throws(StorageError) -> Bool {
        let failedRetries = attempts - 1  // the initial attempt is not a retry (D-11)
        if retry.behaviour == .interval && failedRetries >= retry.limit {
            try finish(record.rowID, outcome: "retries exhausted after \(attempts) attempts: \(reason)")
            logger.warn("report \(record.reportID): \(reason); retries exhausted: terminal")
            return true
        }
        var next: Date?
        if retry.behaviour == .interval {
            let interval = now.addingTimeInterval(dueNow ? 0 : TimeInterval(retry.intervalSeconds))
            next = max(interval, now.addingTimeInterval(retryAfter ?? 0))
        }
        try retryLater(record.rowID, reason: reason, at: next)
        logger.info("report \(record.reportID): \(reason); retained for retry\(next.map { " at \(ReportDocument.timestamp($0))" } ?? " (retry behaviour none)")")
        return false
    }

    /// D-9: every record found `submitting` at launch (the host died mid-request) counts
    /// that attempt as a retryable failure, due now. The step a launch takes before it
    /// delivers: no transport, no request.
    package func settleInterruptedSubmissions(retry: RetryPolicy, now: Date? = nil) throws(StorageError) {
        let now = now ?? system.now()
        for record in try records(in: [.submitting], crashes: false) {
            try retainOrFinish(record, attempts: record.attempts, reason: "interrupted during submission", retry: retry, dueNow: true, now: now)
        }
    }

    /// Holds a record admitted for an attempt that never left: the library that sends found
    /// the configuration unusable (D-9). The admission's attempt is given back.
    package func holdUnsent(_ rowID: Int64, _ reason: HoldReason) throws(StorageError) {
        try database.query(
            "UPDATE reports SET state = ?, held = ?, attempts = MAX(attempts - 1, 0), updated_at = ? WHERE rowid = ?",
            [.text(RecordState.held.rawValue), .text(reason.stored), .integer(Self.milliseconds(system.now())), .integer(rowID)])
    }

    /// A report whose required slot did not run fully (`plugins.required`): held with the
    /// document it had before the chain (the journal, or the saved crash), under its current
    /// id, plus `notes` (what this run noted), so its chain can run again from the start
    /// (`reopenChain`). `chainEnded`: the chain ran to bundling, so the count of runs that
    /// ended the host starts again. `session`'s chain record is cleared in the same transaction.
    ///
    /// `rerunAt`: the hold ends a rerun of the held report's chain, and the next rerun is not
    /// before then (its back-off: `held_reruns` counts them). nil: a first hold, due for a
    /// rerun at the next launch that can run its slots.
    package func holdForRequired(
        _ rowID: Int64, reason: String, notes: [InternalLogEntry], chainEnded: Bool, clearingChainOf session: String? = nil,
        rerunAt: Date? = nil
    ) throws(StorageError) {
        try database.transaction { () throws(StorageError) in
            guard let found = try storedDocument(rowID) else {
                throw StorageError(path: databasePath, message: "record \(rowID) holds an unreadable document")
            }
            var document = found.document
            document.id = found.id
            document.internalLog += notes
            let stored = StoredDocument(document)
            try database.query(
                """
                UPDATE reports SET document = ?, state = ?, held = ?, dialog_pending = 0,
                    chain_runs = CASE WHEN ? THEN 0 ELSE chain_runs END, updated_at = ?,
                    held_reruns = CASE WHEN ? IS NULL THEN 0 ELSE held_reruns + 1 END, next_attempt_at = ?
                WHERE rowid = ?
                """,
                [.text(stored.text), .text(RecordState.held.rawValue), .text(HoldReason.required(reason).stored),
                 .integer(chainEnded ? 1 : 0), .integer(Self.milliseconds(system.now())),
                 .optional(rerunAt.map { Self.milliseconds($0) }), .optional(rerunAt.map { Self.milliseconds($0) }), .integer(rowID)])
            try writeBreadcrumbs(stored, of: rowID, isNew: false)
            if let session { try setChainRecord(nil, session: session) }
        }
    }

    /// Records held because a required slot did not run whose rerun is due by `now` (oldest
    /// first, at most `limit`), with how many chains in a row ended the host over each and
    /// how many reruns already ended held again.
    package func heldForRequired(dueBy now: Date? = nil, limit: Int = Int.max) throws(StorageError)
        -> [(record: ReportRecord, chainRuns: Int, reruns: Int)]
    {
        let now = now ?? system.now()
        let due = try database.query(
            """
            SELECT rowid, chain_runs, held_reruns FROM reports INDEXED BY readable_by_state
            WHERE state = ? AND \(Self.readable) AND held LIKE ? AND (next_attempt_at IS NULL OR next_attempt_at <= ?)
            ORDER BY created_at, rowid LIMIT ?
            """,
            [.text(RecordState.held.rawValue), .text(HoldReason.requiredKind + "%"), .integer(Self.milliseconds(now)),
             .integer(Int64(clamping: limit))]
        ).map { (rowID: $0[0].int ?? 0, chainRuns: Int($0[1].int ?? 0), reruns: Int($0[2].int ?? 0)) }
        // Only the due ones are read whole (every launch asks; most hold none).
        var held: [(record: ReportRecord, chainRuns: Int, reruns: Int)] = []
        for item in due {
            if let record = try record(item.rowID) { held.append((record, item.chainRuns, item.reruns)) }
        }
        return held
    }

    /// Records held because a required slot did not run, due or not.
    package func heldForRequiredCount() throws(StorageError) -> Int {
        Int(try database.query(
            "SELECT COUNT(*) FROM reports INDEXED BY readable_by_state WHERE state = ? AND \(Self.readable) AND held LIKE ?",
            [.text(RecordState.held.rawValue), .text(HoldReason.requiredKind + "%")]).first?.first?.int ?? 0)
    }

    /// Releases every record held for configuration: one with no attempt yet awaits its first,
    /// one with attempts is a retry due now. Returns how many.
    @discardableResult
    package func releaseConfigurationHolds(now: Date? = nil) throws(StorageError) -> Int {
        let now = now ?? system.now()
        // One statement, no transaction of its own: every delivery pass runs it, and with
        // nothing held it writes nothing. (A held row that cannot be read stays held: no pass
        // would send it.)
        return try database.query(
            """
            UPDATE reports INDEXED BY readable_by_state SET state = CASE WHEN attempts = 0 THEN ? ELSE ? END,
                next_attempt_at = CASE WHEN attempts = 0 THEN NULL ELSE ? END, held = NULL, updated_at = ?
            WHERE state = ? AND \(Self.readable) AND held LIKE 'configuration:%' RETURNING rowid
            """,
            [.text(RecordState.awaitingFirstAttempt.rawValue), .text(RecordState.retry.rawValue),
             .integer(Self.milliseconds(now, rounding: .down)), .integer(Self.milliseconds(now)), .text(RecordState.held.rawValue)]
        ).count
    }

    /// Terminal (SPEC D-9: accepted, rejected, retries exhausted): keeps the row with its
    /// state and outcome, deletes the payload and the attachment copies. Without copies the
    /// commit does not wait for the disk (the attempt's admission flushed): a power loss before
    /// the next flush takes the record back to `submitting`, and the next launch counts that
    /// attempt as interrupted and sends the report again under the same id (D-4, D-9). With
    /// copies it flushes, since they are deleted at once after it.
    /// - Parameter document: the record's document when the caller has it (no read back).
    package func finish(_ rowID: Int64, outcome: String, document: ReportDocument? = nil) throws(StorageError) {
        var stub = document
        if stub == nil {
            stub = try database.query("SELECT document FROM reports WHERE rowid = ?", [.integer(rowID)])
                .first?.first?.string.flatMap { try? JSONValue.parse($0) }.flatMap(ReportDocument.init(json:))
        }
        stub?.content = ReportContent()
        stub?.internalLog = []
        let copies = try database.query("SELECT COUNT(*) FROM attachments WHERE record = ?", [.integer(rowID)]).first?.first?.int ?? 0
        try database.transaction(copies > 0 ? .flushed : .committed) { () throws(StorageError) in
            try database.query(
                "UPDATE reports SET state = ?, outcome = ?, next_attempt_at = NULL, crash = NULL, document = COALESCE(?, document), bytes = 0, updated_at = ? WHERE rowid = ?",
                [.text(RecordState.terminal.rawValue), .text(outcome), .optional(stub?.json.serialized()),
                 .integer(Self.milliseconds(system.now())), .integer(rowID)])
            try database.query("DELETE FROM crash_payloads WHERE record = ?", [.integer(rowID)])
            try database.query("DELETE FROM report_breadcrumbs WHERE record = ?", [.integer(rowID)])
            if copies > 0 { try database.query("DELETE FROM attachments WHERE record = ?", [.integer(rowID)]) }
        }
        // A record without copies has no folder (a leftover one goes with `sweepLeftovers`).
        if copies > 0 { system.removeItem(attachmentsFolder.appendingPathComponent(String(rowID)).path) }
    }
}
