import FoundationEssentials
import HostModel
import HostSupport

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

    /// `journal`, committed without waiting for the disk and flushed on a thread of its own
    /// (`LogFlusher`) while the caller runs the callbacks: the commit is what H-13 asks before
    /// the first callback (a killed process loses nothing the log holds); the flush is against
    /// a power loss, and `waitUntilFlushed` returns once it is done, before the caller says the
    /// report is stored.
    package func journalFlushingBehind(_ document: ReportDocument, session: String, dialogPending: Bool, crash: JSONValue? = nil)
        throws(StorageError) -> (rowID: Int64, flush: PendingFlush)
    {
        // Started first: nothing is journaled when no flush can be asked for.
        let flusher = try database.logFlusher(folder: folder.path, system: system)
        let rowID = try store(document, state: .pendingChain, crash: crash, session: session, dialogPending: dialogPending, durability: .committed)
        return (rowID, PendingFlush(flusher: flusher, ticket: flusher.flush()))
    }

    /// Waits until the flush `journalFlushingBehind` asked for is done; throws when it failed.
    package func waitUntilFlushed(_ flush: PendingFlush) throws(StorageError) {
        try flush.flusher.wait(for: flush.ticket)
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
                "SELECT rowid, document, \(breadcrumbsColumn) FROM reports WHERE report_id = ? AND state IN (?, ?, ?, ?)",
                [.text(reportID)] + waiting
            ).first, let rowID = row[0].int, var document = Self.document(text: row[1].string, breadcrumbs: row[2].string)
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
        /// The crash payload, serialized (a recovery serializes it where it reads the crash
        /// file: a batch ahead, on a thread of its own, when the backlog has several).
        package var crash: String
        package var crashFile: String
        package var session: String?
        /// What makes two crashes the same one (SPEC B-3), nil for a crash never merged.
        package var fingerprint: String?

        package init(document: ReportDocument, serializedCrash: String, crashFile: String, session: String?, fingerprint: String? = nil) {
            self.document = document
            self.crash = serializedCrash
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
                    // A session's first crash ends it (`recordEnd` changes a running one only).
                    var ended: Set<String> = []
                    for save in saves {
                        if let session = save.session, ended.insert(session).inserted {
                            try recordEnd(of: session, .crashed, at: save.document.createdAt)
                        }
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
        /// The id the report's chain runs under.
        package var id: String
        /// The record's attachments, bytes read from its copies.
        package var attachments: [Attachment]
        /// How many times this record's chain has run, this one included.
        package var runs: Int
        /// Why the chain must not run (a crash interrupted it), if so.
        package var skipReason: String?
    }

    /// A recovered report's chain to reopen (`reopenChain`).
    package struct ChainReopening: Sendable {
        package let rowID: Int64
        /// The id the chain runs under (the old one is gone).
        package let newID: String
        /// The session that runs it.
        package let session: String
        /// A record held for a required slot that can run now: it runs whatever an earlier
        /// crash decided.
        package var releasingHold = false

        package init(_ rowID: Int64, newID: String, session: String, releasingHold: Bool = false) {
            self.rowID = rowID
            self.newID = newID
            self.session = session
            self.releasingHold = releasingHold
        }
    }

    /// SPEC H-13: a recovered report's chain runs again under a new id, counted; unless it
    /// must be skipped, its session names this record as the one whose chain runs, so a crash
    /// from here on blames it.
    package func reopenChain(_ chain: ChainReopening) throws(StorageError) -> ReopenedChain {
        // Not flushed: a kill keeps the commit (WAL), so the run is counted; a power loss takes
        // it back with everything after it, and nothing of it has left the machine before the
        // admission's flush.
        let (runs, skip) = try database.transaction(.committed) { () throws(StorageError) in try reopen(chain) }
        return ReopenedChain(id: chain.newID, attachments: try attachments(of: chain.rowID), runs: runs, skipReason: skip)
    }

    /// `reopenChain`'s writes, inside the caller's transaction: the runs so far and why the
    /// chain must be skipped, if so.
    private func reopen(_ chain: ChainReopening) throws(StorageError) -> (Int, String?) {
        let rowID = SQLValue.integer(chain.rowID)
        if chain.releasingHold { try database.query("UPDATE reports SET skip_chain = NULL WHERE rowid = ?", [rowID]) }
        try database.query("UPDATE reports SET report_id = ?, chain_runs = chain_runs + 1 WHERE rowid = ?", [.text(chain.newID), rowID])
        let row = try database.query("SELECT chain_runs, skip_chain FROM reports WHERE rowid = ?", [rowID]).first
        let skip = row?[1].string
        if skip == nil { try setChainRecord(chain.rowID, session: chain.session) }
        return (Int(row?[0].int ?? 0), skip)
    }

    /// The chains of recovered reports (`rowIDs`) about to run with nothing loaded to call (no
    /// handler, no delegate): what `reopenChain` returns for each, under a new id, read without
    /// a write, in two queries for them all (and one for each record that has attachments).
    /// `emptyChainsFinished` counts each run and re-keys each record as it stores the bundle.
    /// A record not found has no entry.
    package func emptyChains(_ rowIDs: [Int64]) throws(StorageError) -> [Int64: ReopenedChain] {
        guard !rowIDs.isEmpty else { return [:] }
        let ids = [Self.list(rowIDs)]
        let withAttachments = Set(
            try database.query("SELECT DISTINCT record FROM attachments WHERE record IN \(Self.listed)", ids).compactMap { $0[0].int })
        var chains: [Int64: ReopenedChain] = [:]
        let rows = try database.query("SELECT rowid, chain_runs, skip_chain FROM reports WHERE rowid IN \(Self.listed)", ids)
        for row in rows {
            guard let rowID = row[0].int else { continue }
            chains[rowID] = ReopenedChain(
                id: randomUUID(), attachments: withAttachments.contains(rowID) ? try attachments(of: rowID) : [],
                runs: Int(row[1].int ?? 0) + 1, skipReason: row[2].string)
        }
        return chains
    }

    /// The chains of `emptyChains`, each a record and its bundle: each run counted and each
    /// bundle stored as `chainFinished` stores one, all in one commit, not flushed (see
    /// `chainFinished`). No callback ran in them, so no callback's change can be lost (H-13):
    /// a kill before the commit leaves every record `pending_chain` under its old id, for the
    /// next launch to run again.
    package func emptyChainsFinished(_ runs: [(rowID: Int64, document: ReportDocument)]) throws(StorageError) {
        guard !runs.isEmpty else { return }
        var copies: [AttachmentCopies] = []
        try makingRoom { omitting throws(StorageError) in
            copies = []
            do throws(StorageError) {
                try database.transaction(.committed) { () throws(StorageError) in
                    for run in runs {
                        copies.append(try replaceRow(
                            run.rowID, document: run.document, state: .awaitingFirstAttempt, omitting: omitting, countingChainRun: true))
                    }
                }
            } catch {
                removeCopies(copies.flatMap(\.written))
                throw error
            }
        }
        for (run, copy) in zip(runs, copies) { warnOmitted(copy.omitted, reportID: run.document.id) }
        // The old copies go only once the rows naming the new ones are committed.
        removeCopies(copies.flatMap(\.replaced))
        try enforceLimits()
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
    ///
    /// `next`: the next recovered report's chain is reopened in the same transaction (one
    /// commit where there were two; a kill leaves what it left between the two: this report
    /// finished, the next one's run counted and its record named). Returns it.
    ///
    /// `journaled`: the document the record was journaled with and has held since; when the
    /// chain left its breadcrumbs as they were (most chains), they are not written again, nor
    /// read back to be compared (a full ring is 13 KB).
    @discardableResult
    package func chainFinished(
        _ rowID: Int64, document: ReportDocument, session: String? = nil, flush: Bool = true, reopening next: ChainReopening? = nil,
        journaled: ReportDocument? = nil
    ) throws(StorageError) -> ReopenedChain? {
        var reopened: (runs: Int, skip: String?)?
        let keeps = journaled.map { $0.content.breadcrumbs == document.content.breadcrumbs } ?? false
        try replace(
            rowID, document: document, state: .awaitingFirstAttempt, clearingChainOf: session, flush: flush,
            keepingStoredBreadcrumbs: keeps
        ) { () throws(StorageError) in
            if let next { reopened = try reopen(next) }
        }
        guard let next, let reopened else { return nil }
        return ReopenedChain(id: next.newID, attachments: try attachments(of: next.rowID), runs: reopened.runs, skipReason: reopened.skip)
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
}
