import FoundationEssentials
import HostModel
import HostSupport

/// The two writes every step of a record's life is made of (RecordLifecycle.swift).
extension Repository {
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
    func makingRoom<T>(_ step: (_ omitting: Bool) throws(StorageError) -> T) throws(StorageError) -> T {
        do throws(StorageError) {
            return try step(false)
        } catch where error.outOfSpace {
            giveBackLogSpace()
            return try step(true)
        }
    }

    /// Stores a new record with its attachment copies; returns its row id.
    func store(
        _ document: ReportDocument, state: RecordState, crash: JSONValue? = nil, crashFile: String? = nil,
        session: String? = nil, dialogPending: Bool = false, clearingSession: String? = nil, durability: Database.Durability = .flushed
    ) throws(StorageError) -> Int64 {
        let rowID = try makingRoom { omitting throws(StorageError) in
            try storeOnce(
                document, state: state, crash: crash, crashFile: crashFile, session: session, dialogPending: dialogPending,
                clearingSession: clearingSession, durability: durability, omitting: omitting)
        }
        try enforceLimits()
        return rowID
    }

    func storeOnce(
        _ document: ReportDocument, state: RecordState, crash: JSONValue?, crashFile: String?,
        session: String?, dialogPending: Bool, clearingSession: String?, durability: Database.Durability, omitting: Bool
    ) throws(StorageError) -> Int64 {
        // A copy written for a transaction that does not commit is removed with it: a full
        // disk must not keep the space a failed save took.
        var written = AttachmentCopies()
        let rowID: Int64
        do throws(StorageError) {
            rowID = try database.transaction(durability) { () throws(StorageError) -> Int64 in
                let (rowID, copies) = try insert(
                    document, state: state, crash: crash?.serialized(), crashFile: crashFile, session: session, dialogPending: dialogPending,
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
    /// its row id and the copies written. `crash` is the crash payload, serialized.
    func insert(
        _ document: ReportDocument, state: RecordState, crash: String? = nil, crashFile: String? = nil,
        session: String? = nil, dialogPending: Bool = false, fingerprint: String? = nil, omitting: Bool = false
    ) throws(StorageError) -> (Int64, AttachmentCopies) {
        let stored = StoredDocument(document)
        try database.query(
            """
            INSERT INTO reports(report_id, trigger, state, created_at, document, crash_file, session,
                                dialog_pending, bytes, updated_at, fingerprint)
            VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [.text(document.id), .text(document.trigger.name), .text(state.rawValue), .integer(Self.milliseconds(document.createdAt)),
             .text(stored.text), .optional(crashFile), .optional(session), .integer(dialogPending ? 1 : 0), .integer(stored.bytes),
             .integer(Self.milliseconds(system.now())), .optional(fingerprint)])
        let rowID = try database.query("SELECT last_insert_rowid()").first?.first?.int ?? 0
        try writeBreadcrumbs(stored, of: rowID, isNew: true)
        // Apart from the row, which its state changes write again (schema 15).
        if let crash { try database.query("INSERT INTO crash_payloads(record, payload) VALUES(?, ?)", [.integer(rowID), .text(crash)]) }
        let copies = try writeAttachments(document.content.attachments, record: rowID, isNew: true, omittingWhatDoesNotFit: omitting)
        if !copies.omitted.isEmpty { try rewrite(rowID, Self.omitting(copies.omitted, from: document, folder: folder.path)) }
        return (rowID, copies)
    }

    /// Replaces a row's document in place, inside the caller's transaction (the attachments
    /// a full disk left out are gone from it).
    func rewrite(_ rowID: Int64, _ document: ReportDocument) throws(StorageError) {
        let stored = StoredDocument(document)
        try database.query(
            "UPDATE reports SET document = ?, bytes = ? WHERE rowid = ?", [.text(stored.text), .integer(stored.bytes), .integer(rowID)])
        try writeBreadcrumbs(stored, of: rowID, isNew: false)
    }

    /// Says on the console which attachments a full disk left out of a stored report.
    func warnOmitted(_ omitted: [Attachment], reportID: String) {
        for attachment in omitted {
            logger.warn("report \(reportID): attachment \(attachment.name) (\(attachment.size) bytes) not stored: no space left on the disk of \(folder.path); the report was stored without it")
        }
    }

    /// Replaces a record's document (and attachment copies) and state; a dialog report that
    /// reaches here is no longer pending. `then` runs last in the same transaction.
    func replace(
        _ rowID: Int64, document: ReportDocument, state: RecordState, clearingChainOf session: String? = nil, flush: Bool = true,
        keepingStoredBreadcrumbs keeps: Bool = false, then: () throws(StorageError) -> Void = {}
    ) throws(StorageError) {
        try makingRoom { omitting throws(StorageError) in
            try replaceOnce(
                rowID, document: document, state: state, clearingChainOf: session, flush: flush, omitting: omitting,
                keepingStoredBreadcrumbs: keeps, then: then)
        }
        try enforceLimits()
    }

    func replaceOnce(
        _ rowID: Int64, document: ReportDocument, state: RecordState, clearingChainOf session: String?, flush: Bool, omitting: Bool,
        keepingStoredBreadcrumbs keeps: Bool = false, then: () throws(StorageError) -> Void = {}
    ) throws(StorageError) {
        var copies = AttachmentCopies()
        do throws(StorageError) {
            try database.transaction(flush ? .flushed : .committed) { () throws(StorageError) in
                copies = try replaceRow(rowID, document: document, state: state, omitting: omitting, keepingStoredBreadcrumbs: keeps)
                if let session { try setChainRecord(nil, session: session) }
                try then()
            }
        } catch {
            removeCopies(copies.written)
            throw error
        }
        warnOmitted(copies.omitted, reportID: document.id)
        // The old copies go only once the rows naming the new ones are committed.
        removeCopies(copies.replaced)
    }

    /// `replaceOnce`'s writes, inside the caller's transaction: the copies written, replaced
    /// and left out. `countingChainRun`: the document's id is new, its chain run again (the
    /// run counted in the same write of the row: a row holding a document is kilobytes).
    func replaceRow(
        _ rowID: Int64, document: ReportDocument, state: RecordState, omitting: Bool, countingChainRun: Bool = false,
        keepingStoredBreadcrumbs keeps: Bool = false
    ) throws(StorageError) -> AttachmentCopies {
        let stored = StoredDocument(document, keepingStoredBreadcrumbs: keeps)
        let rerun = countingChainRun ? ", report_id = ?, chain_runs = chain_runs + 1" : ""
        try database.query(
            "UPDATE reports SET document = ?, state = ?, dialog_pending = 0, held = NULL, bytes = ?, updated_at = ?\(rerun) WHERE rowid = ?",
            [.text(stored.text), .text(state.rawValue), .integer(stored.bytes), .integer(Self.milliseconds(system.now()))]
                + (countingChainRun ? [.text(document.id)] : []) + [.integer(rowID)])
        try writeBreadcrumbs(stored, of: rowID, isNew: false)
        // The id changes rarely (a chain run again); setting it unchanged would still
        // rewrite its index's page.
        if !countingChainRun {
            try database.query(
                "UPDATE reports SET report_id = ? WHERE rowid = ? AND report_id IS NOT ?",
                [.text(document.id), .integer(rowID), .text(document.id)])
        }
        let copies = try writeAttachments(document.content.attachments, record: rowID, omittingWhatDoesNotFit: omitting)
        if !copies.omitted.isEmpty { try rewrite(rowID, Self.omitting(copies.omitted, from: document, folder: folder.path)) }
        return copies
    }

    func removeCopies(_ files: [URL]) {
        for file in files { system.removeItem(file.path) }
    }
}
