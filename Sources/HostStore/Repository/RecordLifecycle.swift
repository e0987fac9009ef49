import FoundationEssentials
import HostCore
import HostCapture
import HostPlugins

/// A stored report's life, one named step each (crashpad's report database is the model),
/// each step one transaction. Nothing outside the repository sets a record's state: the host
/// asks for the step.
///
///     journal ──────────────────────┐          (a running-app report, H-13)
///     saveCrashes → crashFilesPurged ┤          (crash files, D-1, a batch at a time)
///     saveFound ────────────────────┤          (an abnormal exit, an unreadable crash file, a killed program)
///                                   ▼
///                             pending_chain ── reopenChain (recovered: the chain again, H-13)
///                                   │  chainFinished            discard (a dialog not sent)
///                                   ▼
///     awaiting_first_attempt / retry ── admit → submitting ── retryLater → retry
///                                   │                      └─ finish → terminal
///                                   └─ hold → held ── releaseConfigurationHolds
///     storeUnchained → awaiting_first_attempt  (a running-app report no callback sees)
///     pending_chain ── holdForRequired → held ── reopenChain(releasingHold:) (plugins.required)
///     terminal, retry ── discard (evicted, D-12)
extension Repository {
    // MARK: Stored before the chain

    /// A running-app report journaled before its first callback (SPEC H-13): `pending_chain`.
    /// A dialog report stays `dialogPending` until the user sends it (`dialogSent`).
    @discardableResult
    /// - Parameter crash: the stack payload of a report that has one (an app hang, SPEC B-4).
    package func journal(_ document: ReportDocument, session: String, dialogPending: Bool, crash: JSONValue? = nil) throws(StorageError)
        -> Int64
    {
        try store(document, state: .pendingChain, crash: crash, session: session, dialogPending: dialogPending)
    }

    /// A running-app report whose chain called nothing but the host (no handler, no
    /// delegate, no dialog): stored once, as it left the chain, `awaiting_first_attempt`.
    /// H-13 journals a report before its first callback, against a callback that ends the
    /// host; there is none. A kill before this store loses the report, as a kill before a
    /// journal would.
    @discardableResult
    package func storeUnchained(_ document: ReportDocument, session: String, crash: JSONValue? = nil) throws(StorageError) -> Int64 {
        try store(document, state: .awaitingFirstAttempt, crash: crash, session: session)
    }

    /// Sets an attribute on the stored report `reportID` while it has not left the machine
    /// (not yet sent, or waiting for a retry): how long a hang lasted, known only once it ends
    /// (SPEC B-4). Returns false when the report is sent, being sent, or gone.
    package func setAttribute(_ key: String, _ value: String, onWaiting reportID: String) throws(StorageError) -> Bool {
        try database.transaction(.committed) { () throws(StorageError) -> Bool in
            let waiting = [RecordState.pendingChain, .awaitingFirstAttempt, .retry, .held].map { SQLValue.text($0.rawValue) }
            guard let row = try database.query(
                "SELECT rowid, document FROM reports WHERE report_id = ? AND state IN (?, ?, ?, ?)", [.text(reportID)] + waiting).first,
                let rowID = row[0].int, let text = row[1].string, let json = try? JSONValue.parse(text),
                var document = ReportDocument(json: json)
            else { return false }
            document.content.attributes[key] = value
            try rewrite(rowID, document)
            return true
        }
    }

    /// The user sent a dialog report: its journal keeps their edits, and from now on it is a
    /// report to deliver even if the host dies in the after-callbacks (SPEC H-13).
    package func dialogSent(_ rowID: Int64, journal: ReportDocument) throws(StorageError) {
        try replace(rowID, document: journal, state: .pendingChain)
    }

    /// One crash file's report for `saveCrashes`.
    package struct CrashSave: Sendable {
        package var document: ReportDocument
        package var crash: JSONValue
        package var crashFile: String
        package var session: String?
        /// What makes two crashes the same one (SPEC B-3), nil for a crash never merged.
        package var fingerprint: String?

        package init(document: ReportDocument, crash: JSONValue, crashFile: String, session: String?, fingerprint: String? = nil) {
            self.document = document
            self.crash = crash
            self.crashFile = crashFile
            self.session = session
            self.fingerprint = fingerprint
        }
    }

    /// D-1 step 1 for a batch of crash files, in one transaction: every record is saved or
    /// none is. A crash identical to one waiting in the repository (the same `fingerprint`,
    /// SPEC B-3) is counted on that record instead of saved again. Returns, in order, each
    /// file's record: new, or the one it was counted on.
    package func saveCrashes(_ saves: [CrashSave]) throws(StorageError) -> [CrashSaved] {
        let saved = try makingRoom { omitting throws(StorageError) in
            var written: [URL] = []
            var omitted: [(String, [Attachment])] = []
            do throws(StorageError) {
                let saved = try database.transaction { () throws(StorageError) -> [CrashSaved] in
                    var saved: [CrashSaved] = []
                    for save in saves {
                        if let session = save.session { try recordEnd(of: session, .crashed, at: save.document.createdAt) }
                        if let fingerprint = save.fingerprint, let waiting = try waitingRecord(withFingerprint: fingerprint) {
                            try database.query("UPDATE reports SET duplicates = duplicates + 1 WHERE rowid = ?", [.integer(waiting)])
                            try database.query(
                                "INSERT INTO merged_crashes(record, session, at) VALUES(?, ?, ?)",
                                [.integer(waiting), .optional(save.session), .integer(Self.milliseconds(save.document.createdAt))])
                            saved.append(.counted(on: waiting))
                            continue
                        }
                        let (rowID, copies) = try insert(
                            save.document, state: .pendingPurge, crash: save.crash, crashFile: save.crashFile, session: save.session,
                            fingerprint: save.fingerprint, omitting: omitting)
                        saved.append(.new(rowID))
                        written += copies.written
                        omitted.append((save.document.id, copies.omitted))
                    }
                    return saved
                }
                for (reportID, attachments) in omitted { warnOmitted(attachments, reportID: reportID) }
                return saved
            } catch {
                removeCopies(written)
                throw error
            }
        }
        try enforceLimits()
        return saved
    }

    /// Where a crash file went (`saveCrashes`).
    package enum CrashSaved: Sendable, Equatable {
        /// A record of its own, `pending_purge` until its file is gone.
        case new(Int64)
        /// Counted on a waiting record of the same crash.
        case counted(on: Int64)

        package var rowID: Int64 {
            switch self {
            case .new(let rowID), .counted(on: let rowID): rowID
            }
        }
    }

    /// A record not yet sent (nor being sent) of the crash `fingerprint` names.
    private func waitingRecord(withFingerprint fingerprint: String) throws(StorageError) -> Int64? {
        let waiting = [RecordState.pendingPurge, .pendingChain, .awaitingFirstAttempt, .retry, .held].map { SQLValue.text($0.rawValue) }
        return try database.query(
            "SELECT rowid FROM reports WHERE fingerprint = ? AND state IN (?, ?, ?, ?, ?) ORDER BY rowid LIMIT 1",
            [.text(fingerprint)] + waiting
        ).first?.first?.int
    }

    /// D-1 step 2: the crash files are gone; the chain is next. One transaction for all of
    /// them, not flushed: a power loss before the next flush leaves them `pending_purge`, and
    /// the next launch marks them again (their files are gone).
    package func crashFilesPurged(_ rowIDs: [Int64]) throws(StorageError) {
        guard !rowIDs.isEmpty else { return }
        try database.transaction(.committed) { () throws(StorageError) in
            for rowID in rowIDs {
                try database.query(
                    "UPDATE reports SET state = ?, crash_file = NULL, updated_at = ? WHERE rowid = ?",
                    [.text(RecordState.pendingChain.rawValue), .integer(Self.milliseconds(system.now())), .integer(rowID)])
            }
        }
    }

    /// A report the host raises itself from what a launch found (an abnormal exit, an
    /// unreadable crash file, a watched program a signal ended): it waits for the chain, or
    /// with `runsChain` false awaits its first attempt. A report that stands for a session
    /// mark clears the mark in the same transaction: a kill between the two cannot report it
    /// twice.
    @discardableResult
    package func saveFound(
        _ document: ReportDocument, session: String? = nil, replacingSessionMark: Bool = false, runsChain: Bool = true
    ) throws(StorageError) -> Int64 {
        try store(
            document, state: runsChain ? .pendingChain : .awaitingFirstAttempt, session: session,
            clearingSession: replacingSessionMark ? session : nil)
    }

    // MARK: The chain

    /// What a recovered report's chain starts from.
    package struct ReopenedChain: Sendable {
        /// The record's attachments, bytes read from its copies.
        package var attachments: [Attachment]
        /// How many times this record's chain has run, this one included.
        package var runs: Int
        /// Why the chain must not run (a crash interrupted it), if so.
        package var skipReason: String?
    }

    /// SPEC H-13: a recovered report's chain runs again under `newID` (the old id is gone),
    /// counted; unless it must be skipped, `session` names this record as the one whose chain
    /// runs, so a crash from here on blames it. A record held for a required slot that can
    /// run now (`releasingHold`) runs it whatever an earlier crash decided.
    package func reopenChain(_ rowID: Int64, newID: String, session: String, releasingHold: Bool = false) throws(StorageError)
        -> ReopenedChain
    {
        // Not flushed: a kill keeps the commit (WAL), so the run is counted; a power loss takes
        // it back with everything after it, and nothing of it has left the machine before the
        // admission's flush.
        let (runs, skip) = try database.transaction(.committed) { () throws(StorageError) -> (Int, String?) in
            if releasingHold { try database.query("UPDATE reports SET skip_chain = NULL WHERE rowid = ?", [.integer(rowID)]) }
            try database.query(
                "UPDATE reports SET report_id = ?, chain_runs = chain_runs + 1 WHERE rowid = ?", [.text(newID), .integer(rowID)])
            let row = try database.query("SELECT chain_runs, skip_chain FROM reports WHERE rowid = ?", [.integer(rowID)]).first
            let skip = row?[1].string
            if skip == nil { try setChainRecord(rowID, session: session) }
            return (Int(row?[0].int ?? 0), skip)
        }
        return ReopenedChain(attachments: try attachments(of: rowID), runs: runs, skipReason: skip)
    }

    /// The chain finished (or the report was settled without it): the bundle replaces the
    /// journal, and the report awaits its first attempt. Attachments whose bytes a copy of the
    /// record already holds are not copied again. `session`'s chain record, when given, is
    /// cleared in the same transaction.
    ///
    /// `flush` false: the commit does not wait for the disk (one flush per running-app report,
    /// its journal's). A killed process loses nothing (WAL). A power loss before the next
    /// flush takes the record back to what it was at the last one, and nothing of it has left
    /// the machine by then: a submission is admitted first, in a flushed transaction, which
    /// makes every commit before it durable (the WAL is written in order). A running-app
    /// report goes back to its durable journal, which the next launch settles as H-13 says
    /// (sent without the callbacks' changes, or held under `plugins.required`); a recovered
    /// report's chain runs again under a new id.
    package func chainFinished(_ rowID: Int64, document: ReportDocument, session: String? = nil, flush: Bool = true) throws(StorageError) {
        try replace(rowID, document: document, state: .awaitingFirstAttempt, clearingChainOf: session, flush: flush)
    }

    /// A report nobody will send (a cancelled dialog, a dialog report the host died before its
    /// user sent, a record evicted for the storage limits, D-12): the record, its attachment
    /// rows and copies are deleted.
    package func discard(_ rowID: Int64) throws(StorageError) {
        try database.transaction { () throws(StorageError) in
            try database.query("DELETE FROM attachments WHERE record = ?", [.integer(rowID)])
            try database.query("DELETE FROM reports WHERE rowid = ?", [.integer(rowID)])
        }
        system.removeItem(attachmentsFolder.appendingPathComponent(String(rowID)).path)
    }

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
            let row = try database.query("SELECT report_id, document FROM reports WHERE rowid = ?", [.integer(rowID)]).first
            guard let id = row?[0].string, let text = row?[1].string, let json = try? JSONValue.parse(text),
                var document = ReportDocument(json: json)
            else { throw StorageError(path: databasePath, message: "record \(rowID) holds an unreadable document") }
            document.id = id
            document.internalLog += notes
            try database.query(
                """
                UPDATE reports SET document = ?, state = ?, held = ?, dialog_pending = 0,
                    chain_runs = CASE WHEN ? THEN 0 ELSE chain_runs END, updated_at = ?,
                    held_reruns = CASE WHEN ? IS NULL THEN 0 ELSE held_reruns + 1 END, next_attempt_at = ?
                WHERE rowid = ?
                """,
                [.text(document.json.serialized()), .text(RecordState.held.rawValue), .text(HoldReason.required(reason).stored),
                 .integer(chainEnded ? 1 : 0), .integer(Self.milliseconds(system.now())),
                 .optional(rerunAt.map { Self.milliseconds($0) }), .optional(rerunAt.map { Self.milliseconds($0) }), .integer(rowID)])
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
            if copies > 0 { try database.query("DELETE FROM attachments WHERE record = ?", [.integer(rowID)]) }
        }
        // A record without copies has no folder (a leftover one goes with `sweepLeftovers`).
        if copies > 0 { system.removeItem(attachmentsFolder.appendingPathComponent(String(rowID)).path) }
    }

    // MARK: Tests and tools

    /// Puts a report straight into `state`, for tests and tools that need a repository in a
    /// given shape. The host itself never calls it: it goes through the steps above.
    @discardableResult
    func seedRecord(_ document: ReportDocument, state: RecordState) throws(StorageError) -> Int64 {
        try store(document, state: state)
    }

    // MARK: The two writes every step above is made of

    /// Runs a step that writes a report once more when the disk had no room for it: first
    /// with the write-ahead log's spare blocks given back, then leaving out the attachment
    /// copies that still do not fit (`omitting` true). A report is never lost for the sake of
    /// an attachment; a disk too full for the report itself is the second run's error.
    private func makingRoom<T>(_ step: (_ omitting: Bool) throws(StorageError) -> T) throws(StorageError) -> T {
        do throws(StorageError) {
            return try step(false)
        } catch where error.outOfSpace {
            giveBackLogSpace()
            return try step(true)
        }
    }

    /// Stores a new record with its attachment copies; returns its row id.
    private func store(
        _ document: ReportDocument, state: RecordState, crash: JSONValue? = nil, crashFile: String? = nil,
        session: String? = nil, dialogPending: Bool = false, clearingSession: String? = nil
    ) throws(StorageError) -> Int64 {
        let rowID = try makingRoom { omitting throws(StorageError) in
            try storeOnce(
                document, state: state, crash: crash, crashFile: crashFile, session: session, dialogPending: dialogPending,
                clearingSession: clearingSession, omitting: omitting)
        }
        try enforceLimits()
        return rowID
    }

    private func storeOnce(
        _ document: ReportDocument, state: RecordState, crash: JSONValue?, crashFile: String?,
        session: String?, dialogPending: Bool, clearingSession: String?, omitting: Bool
    ) throws(StorageError) -> Int64 {
        // A copy written for a transaction that does not commit is removed with it: a full
        // disk must not keep the space a failed save took.
        var written = AttachmentCopies()
        let rowID: Int64
        do throws(StorageError) {
            rowID = try database.transaction { () throws(StorageError) -> Int64 in
                let (rowID, copies) = try insert(
                    document, state: state, crash: crash, crashFile: crashFile, session: session, dialogPending: dialogPending,
                    omitting: omitting)
                written = copies
                if let clearingSession {
                    try database.query("DELETE FROM sessions WHERE id = ?", [.text(clearingSession)])
                    try database.query("DELETE FROM crash_attachments WHERE session = ?", [.text(clearingSession)])
                    try recordEnd(of: clearingSession, .abnormalExit, at: nil)
                }
                return rowID
            }
        } catch {
            removeCopies(written.written)
            throw error
        }
        warnOmitted(written.omitted, reportID: document.id)
        return rowID
    }

    /// The insert of a new record and its attachment copies, inside the caller's transaction:
    /// its row id and the copies written.
    private func insert(
        _ document: ReportDocument, state: RecordState, crash: JSONValue? = nil, crashFile: String? = nil,
        session: String? = nil, dialogPending: Bool = false, fingerprint: String? = nil, omitting: Bool = false
    ) throws(StorageError) -> (Int64, AttachmentCopies) {
        let text = document.json.serialized()  // once: the column and the size
        try database.query(
            """
            INSERT INTO reports(report_id, trigger, state, created_at, document, crash, crash_file, session,
                                dialog_pending, bytes, updated_at, fingerprint)
            VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [.text(document.id), .text(document.trigger.name), .text(state.rawValue), .integer(Self.milliseconds(document.createdAt)),
             .text(text), .optional(crash?.serialized()), .optional(crashFile), .optional(session),
             .integer(dialogPending ? 1 : 0), .integer(Int64(Self.size(of: document, serialized: text))),
             .integer(Self.milliseconds(system.now())), .optional(fingerprint)])
        let rowID = try database.query("SELECT last_insert_rowid()").first?.first?.int ?? 0
        let copies = try writeAttachments(document.content.attachments, record: rowID, isNew: true, omittingWhatDoesNotFit: omitting)
        if !copies.omitted.isEmpty { try rewrite(rowID, Self.omitting(copies.omitted, from: document, folder: folder.path)) }
        return (rowID, copies)
    }

    /// Replaces a row's document in place, inside the caller's transaction (the attachments
    /// a full disk left out are gone from it).
    private func rewrite(_ rowID: Int64, _ document: ReportDocument) throws(StorageError) {
        let text = document.json.serialized()
        try database.query(
            "UPDATE reports SET document = ?, bytes = ? WHERE rowid = ?",
            [.text(text), .integer(Int64(Self.size(of: document, serialized: text))), .integer(rowID)])
    }

    /// Says on the console which attachments a full disk left out of a stored report.
    private func warnOmitted(_ omitted: [Attachment], reportID: String) {
        for attachment in omitted {
            logger.warn("report \(reportID): attachment \(attachment.name) (\(attachment.size) bytes) not stored: no space left on the disk of \(folder.path); the report was stored without it")
        }
    }

    /// Replaces a record's document (and attachment copies) and state; a dialog report that
    /// reaches here is no longer pending.
    private func replace(
        _ rowID: Int64, document: ReportDocument, state: RecordState, clearingChainOf session: String? = nil, flush: Bool = true
    ) throws(StorageError) {
        try makingRoom { omitting throws(StorageError) in
            try replaceOnce(rowID, document: document, state: state, clearingChainOf: session, flush: flush, omitting: omitting)
        }
        try enforceLimits()
    }

    private func replaceOnce(
        _ rowID: Int64, document: ReportDocument, state: RecordState, clearingChainOf session: String?, flush: Bool, omitting: Bool
    ) throws(StorageError) {
        var copies = AttachmentCopies()
        let text = document.json.serialized()  // once: the column and the size
        do throws(StorageError) {
            try database.transaction(flush ? .flushed : .committed) { () throws(StorageError) in
                try database.query(
                    "UPDATE reports SET document = ?, state = ?, dialog_pending = 0, held = NULL, bytes = ?, updated_at = ? WHERE rowid = ?",
                    [.text(text), .text(state.rawValue), .integer(Int64(Self.size(of: document, serialized: text))),
                     .integer(Self.milliseconds(system.now())), .integer(rowID)])
                // The id changes rarely (a chain run again); setting it unchanged would still
                // rewrite its index's page.
                try database.query(
                    "UPDATE reports SET report_id = ? WHERE rowid = ? AND report_id IS NOT ?",
                    [.text(document.id), .integer(rowID), .text(document.id)])
                copies = try writeAttachments(document.content.attachments, record: rowID, omittingWhatDoesNotFit: omitting)
                if !copies.omitted.isEmpty { try rewrite(rowID, Self.omitting(copies.omitted, from: document, folder: folder.path)) }
                if let session { try setChainRecord(nil, session: session) }
            }
        } catch {
            removeCopies(copies.written)
            throw error
        }
        warnOmitted(copies.omitted, reportID: document.id)
        // The old copies go only once the rows naming the new ones are committed.
        removeCopies(copies.replaced)
    }

    private func removeCopies(_ files: [URL]) {
        for file in files { system.removeItem(file.path) }
    }
}
