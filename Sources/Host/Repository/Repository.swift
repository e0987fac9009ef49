import CSQLite
import Foundation

/// Where a stored report is in its life (SPEC I, `status --json` states).
public enum RecordState: String, Sendable, CaseIterable {
    /// Saved from a crash file that is not yet purged.
    case pendingPurge = "pending_purge"
    /// Saved or journaled; the handler chain has not finished.
    case pendingChain = "pending_chain"
    /// Handled; no admitted attempt yet.
    case awaitingFirstAttempt = "awaiting_first_attempt"
    case submitting
    case retry
    case terminal
}

/// One stored report.
public struct ReportRecord: Sendable {
    public var rowID: Int64
    public var document: ReportDocument
    public var state: RecordState
    public var attempts: Int
    public var nextAttemptAt: Date?
    /// The crash payload (signal, threads, modules) of a native report.
    public var crash: JSONValue?
    /// The original crash file, until it is purged.
    public var crashFile: String?
    public var session: String?
    /// A dialog report the user has not sent yet (dropped if the host dies, SPEC H-13).
    public var dialogPending: Bool
    public var outcome: String?
    public var bytes: Int

    public var reportID: String { document.id }
    public var trigger: Trigger { document.trigger }
}

/// The local repository (SPEC I-7): `reporthost.sqlite` (WAL, synchronous=FULL), the lock
/// file, `crashes/` and `attachments/` (copies, one folder per record) in one folder.
///
/// Writes that later steps depend on are durable before the call returns: SQLite commits
/// with `synchronous=FULL`, attachment files are fsync'd before the row that names them.
///
/// # Thread safety
/// The connection serializes its statements; callers run one launch at a time (the lock).
public final class Repository: Sendable {
    public let folder: URL
    let database: Database
    /// Maintenance targets checked after each save (SPEC D-12).
    public let limits: StorageLimits
    /// Writes attachment copies (tests inject ENOSPC or EIO here).
    let system: SystemCalls

    public static let databaseName = "reporthost.sqlite"
    public static let lockName = "reporthost.lock"
    static let schemaVersion = 4

    public var databasePath: String { folder.appendingPathComponent(Self.databaseName).path }
    public var crashesFolder: URL { folder.appendingPathComponent("crashes") }
    public var attachmentsFolder: URL { folder.appendingPathComponent("attachments") }

    private init(folder: URL, database: Database, limits: StorageLimits = StorageLimits(), system: SystemCalls = .live) {
        self.folder = folder
        self.database = database
        self.limits = limits
        self.system = system
    }

    /// Opens the repository in `folder`, creating the folder, its sub-folders and the
    /// database when missing, and migrating the schema.
    public static func open(
        folder: URL, limits: StorageLimits = StorageLimits(), faults: StorageFaults = .fromEnvironment, system: SystemCalls = .live
    ) throws(StorageError) -> Repository {
        for sub in [folder, folder.appendingPathComponent("crashes"), folder.appendingPathComponent("attachments")] {
            do {
                try FileManager.default.createDirectory(at: sub, withIntermediateDirectories: true)
            } catch {
                throw StorageError(path: sub.path, message: "cannot create the folder (\(errnoText(error)))")
            }
        }
        let database = try Database(path: folder.appendingPathComponent(databaseName).path, create: true, faults: faults)
        let repository = Repository(folder: folder, database: database, limits: limits, system: system)
        try repository.migrate()
        return repository
    }

    /// Opens an existing repository for reading only (`status`); nil when there is none.
    /// Creates nothing.
    public static func openForReading(folder: URL) throws(StorageError) -> Repository? {
        let path = folder.appendingPathComponent(databaseName).path
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        let repository = Repository(folder: folder, database: try Database(path: path, create: false, readOnly: true))
        let version = try repository.database.query("PRAGMA user_version").first?.first?.int ?? 0
        guard version <= schemaVersion else {
            throw StorageError(path: path, message: "schema version \(version) is newer than this host's \(schemaVersion)")
        }
        return repository
    }

    private func migrate() throws(StorageError) {
        let version = try database.query("PRAGMA user_version").first?.first?.int ?? 0
        if version > Self.schemaVersion {
            throw StorageError(path: databasePath, message: "schema version \(version) is newer than this host's \(Self.schemaVersion)")
        }
        try database.execute("PRAGMA journal_mode=WAL")
        try database.execute("PRAGMA synchronous=FULL")
        if version < 1 {
            try database.transaction { () throws(StorageError) in
                try database.execute("""
                    CREATE TABLE reports(
                        rowid INTEGER PRIMARY KEY,
                        report_id TEXT NOT NULL UNIQUE,
                        trigger TEXT NOT NULL,
                        state TEXT NOT NULL,
                        attempts INTEGER NOT NULL DEFAULT 0,
                        next_attempt_at INTEGER,
                        created_at INTEGER NOT NULL,
                        document TEXT NOT NULL,
                        crash TEXT,
                        crash_file TEXT,
                        session TEXT,
                        dialog_pending INTEGER NOT NULL DEFAULT 0,
                        outcome TEXT,
                        bytes INTEGER NOT NULL DEFAULT 0,
                        updated_at INTEGER NOT NULL);
                    CREATE TABLE attachments(
                        record INTEGER NOT NULL,
                        position INTEGER NOT NULL,
                        name TEXT NOT NULL,
                        filename TEXT NOT NULL,
                        source TEXT NOT NULL,
                        size INTEGER NOT NULL,
                        PRIMARY KEY(record, position));
                    CREATE TABLE sessions(id TEXT PRIMARY KEY, pid INTEGER NOT NULL, started_at INTEGER NOT NULL);
                    PRAGMA user_version = 1;
                    """)
            }
        }
        if version < 2 {
            // The local admission window (SPEC D-7), shared by every process on this repository.
            try database.transaction { () throws(StorageError) in
                try database.execute("CREATE TABLE admissions(at INTEGER NOT NULL); PRAGMA user_version = 2;")
            }
        }
        if version < 3 {
            // Copies get their own file names (replaced only after the rows naming the new ones
            // commit), and chains count their runs (a record whose chain keeps killing the host
            // is sent without callbacks after three).
            try database.transaction { () throws(StorageError) in
                try database.execute("""
                    ALTER TABLE attachments ADD COLUMN file TEXT;
                    ALTER TABLE reports ADD COLUMN chain_runs INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE sessions ADD COLUMN phase TEXT NOT NULL DEFAULT 'running';
                    PRAGMA user_version = 3;
                    """)
            }
        }
        if version < 4 {
            // Plugins that crashed the host (kept across launches), the record a recovering
            // session was running the chain over, and records to store without the chain.
            try database.transaction { () throws(StorageError) in
                try database.execute("""
                    CREATE TABLE quarantine(
                        path TEXT NOT NULL,
                        digest TEXT NOT NULL,
                        name TEXT NOT NULL,
                        signal TEXT NOT NULL,
                        callback TEXT NOT NULL,
                        at INTEGER NOT NULL,
                        crashes INTEGER NOT NULL DEFAULT 1,
                        PRIMARY KEY(path, digest));
                    ALTER TABLE sessions ADD COLUMN chain_record INTEGER;
                    ALTER TABLE reports ADD COLUMN skip_chain TEXT;
                    PRAGMA user_version = 4;
                    """)
            }
        }
    }

    // MARK: Records

    private static let columns =
        "rowid, document, state, attempts, next_attempt_at, crash, crash_file, session, dialog_pending, outcome, bytes"

    /// Stores a new record with its attachment copies; returns its row id.
    @discardableResult
    public func insert(
        _ document: ReportDocument, state: RecordState, crash: JSONValue? = nil, crashFile: String? = nil,
        session: String? = nil, dialogPending: Bool = false, clearingSession: String? = nil
    ) throws(StorageError) -> Int64 {
        let rowID = try database.transaction { () throws(StorageError) -> Int64 in
            let now = Self.milliseconds(Date())
            try database.query(
                """
                INSERT INTO reports(report_id, trigger, state, created_at, document, crash, crash_file, session,
                                    dialog_pending, bytes, updated_at)
                VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [.text(document.id), .text(document.trigger.name), .text(state.rawValue), .integer(Self.milliseconds(document.createdAt)),
                 .text(document.json.serialized()), .optional(crash?.serialized()), .optional(crashFile), .optional(session),
                 .integer(dialogPending ? 1 : 0), .integer(Int64(Self.size(of: document))), .integer(now)])
            let rowID = try database.query("SELECT last_insert_rowid()").first?.first?.int ?? 0
            _ = try writeAttachments(document.content.attachments, record: rowID)
            // A report that replaces a session mark (an abnormal exit) clears it in the same
            // transaction: a kill between the two cannot report it twice.
            if let clearingSession { try database.query("DELETE FROM sessions WHERE id = ?", [.text(clearingSession)]) }
            return rowID
        }
        try enforceLimits()
        return rowID
    }

    /// Replaces a record's document (and attachment copies) and state.
    public func update(_ rowID: Int64, document: ReportDocument, state: RecordState, dialogPending: Bool = false) throws(StorageError) {
        let replaced = try database.transaction { () throws(StorageError) -> [URL] in
            try database.query(
                "UPDATE reports SET report_id = ?, document = ?, state = ?, dialog_pending = ?, bytes = ?, updated_at = ? WHERE rowid = ?",
                [.text(document.id), .text(document.json.serialized()), .text(state.rawValue), .integer(dialogPending ? 1 : 0),
                 .integer(Int64(Self.size(of: document))), .integer(Self.milliseconds(Date())), .integer(rowID)])
            return try writeAttachments(document.content.attachments, record: rowID)
        }
        // The old copies go only once the rows naming the new ones are committed.
        for file in replaced { try? FileManager.default.removeItem(at: file) }
        try enforceLimits()
    }

    public func setState(_ rowID: Int64, _ state: RecordState, crashFile: String? = nil) throws(StorageError) {
        try database.query(
            "UPDATE reports SET state = ?, crash_file = ?, updated_at = ? WHERE rowid = ?",
            [.text(state.rawValue), .optional(crashFile), .integer(Self.milliseconds(Date())), .integer(rowID)])
    }

    /// Gives the record a new report id (SPEC H-13: a recovered crash whose chain was
    /// interrupted is recovered again under a new id; the old id is gone).
    public func rekey(_ rowID: Int64, to reportID: String) throws(StorageError) {
        try database.query("UPDATE reports SET report_id = ? WHERE rowid = ?", [.text(reportID), .integer(rowID)])
    }

    /// Deletes a record, its attachment rows and copies.
    public func delete(_ rowID: Int64) throws(StorageError) {
        try database.transaction { () throws(StorageError) in
            try database.query("DELETE FROM attachments WHERE record = ?", [.integer(rowID)])
            try database.query("DELETE FROM reports WHERE rowid = ?", [.integer(rowID)])
        }
        try? FileManager.default.removeItem(at: attachmentsFolder.appendingPathComponent(String(rowID)))
    }

    /// Records in `states` (all when empty), oldest first. A row that cannot be read (a
    /// damaged document) is skipped, never fails the others: `unreadableRecords` names it.
    public func records(in states: [RecordState] = []) throws(StorageError) -> [ReportRecord] {
        try rows(in: states).compactMap { row in try? record(from: row) }
    }

    /// The rows `records` skips, with why (`status` reports them; nothing is deleted, D-13).
    public func unreadableRecords() throws(StorageError) -> [(rowID: Int64, reason: String)] {
        try rows(in: []).compactMap { row -> (rowID: Int64, reason: String)? in
            do throws(StorageError) {
                _ = try record(from: row)
                return nil
            } catch {
                return (row[0].int ?? 0, error.message)
            }
        }
    }

    private func rows(in states: [RecordState]) throws(StorageError) -> [[SQLValue]] {
        let filter = states.isEmpty ? "" : "WHERE state IN (\(states.map { _ in "?" }.joined(separator: ", ")))"
        return try database.query(
            "SELECT \(Self.columns) FROM reports \(filter) ORDER BY created_at, rowid", states.map { .text($0.rawValue) })
    }

    private func record(from row: [SQLValue]) throws(StorageError) -> ReportRecord {
        let rowID = row[0].int ?? 0
        guard let text = row[1].string, let json = try? JSONValue.parse(text), let document = ReportDocument(json: json) else {
            throw StorageError(path: databasePath, message: "record \(rowID) holds an unreadable document")
        }
        return ReportRecord(
            rowID: rowID, document: document, state: row[2].string.flatMap(RecordState.init(rawValue:)) ?? .terminal,
            attempts: Int(clamping: min(max(row[3].int ?? 0, 0), 1_000_000)), nextAttemptAt: row[4].int.map(Self.date),
            crash: row[5].string.flatMap { try? JSONValue.parse($0) }, crashFile: row[6].string, session: row[7].string,
            dialogPending: row[8].int == 1, outcome: row[9].string, bytes: Int(row[10].int ?? 0))
    }

    /// The bytes of a record's attachment copies, in order (a copy that went missing is skipped).
    public func attachments(of rowID: Int64) throws(StorageError) -> [Attachment] {
        let rows = try database.query(
            "SELECT position, name, filename, source, file FROM attachments WHERE record = ? ORDER BY position", [.integer(rowID)])
        return rows.compactMap { row in
            let file = attachmentFile(record: rowID, row: row).path
            guard case .success(let data) = BoundedFile.read(file, limit: ReportContent.attachmentMaxBytes, system: system) else { return nil }
            return Attachment(
                name: row[1].string ?? "", filename: row[2].string ?? "", data: data,
                source: row[3].string.flatMap(AttachmentSource.init(rawValue:)) ?? .recovered)
        }
    }

    /// The copies of a record's attachments as files, in order, for streaming.
    public func attachmentFiles(of rowID: Int64) throws(StorageError) -> [(name: String, filename: String, file: URL)] {
        try database.query("SELECT position, name, filename, source, file FROM attachments WHERE record = ? ORDER BY position", [.integer(rowID)])
            .map { row in (row[1].string ?? "", row[2].string ?? "", attachmentFile(record: rowID, row: row)) }
    }

    /// A copy's file: its own name (schema 3) or, for older rows, its position. A name from
    /// the database that is not a plain file name (`..`, a `/`) falls back to the position:
    /// a damaged row must never point outside the record's folder (it is read, sent and
    /// deleted there).
    private func attachmentFile(record: Int64, row: [SQLValue]) -> URL {
        let stored = row[4].string.flatMap { $0.isEmpty || $0 == "." || $0 == ".." || $0.contains("/") ? nil : $0 }
        return attachmentsFolder.appendingPathComponent(String(record))
            .appendingPathComponent(stored ?? String(row[0].int ?? 0))
    }

    /// Writes the copies under new file names (fsync'd), then replaces the rows that name
    /// them. Returns the files of the replaced copies, for the caller to delete after commit.
    private func writeAttachments(_ attachments: [Attachment], record: Int64) throws(StorageError) -> [URL] {
        let folder = attachmentsFolder.appendingPathComponent(String(record))
        let replaced = try database.query(
            "SELECT position, name, filename, source, file FROM attachments WHERE record = ?", [.integer(record)]
        ).map { attachmentFile(record: record, row: $0) }
        try database.query("DELETE FROM attachments WHERE record = ?", [.integer(record)])
        guard !attachments.isEmpty else { return replaced }
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw StorageError(path: folder.path, message: "cannot create the attachment folder (\(errnoText(error)))")
        }
        for (position, attachment) in attachments.enumerated() {
            let name = UUID().uuidString.lowercased()
            try DurableFile.write(attachment.data, to: folder.appendingPathComponent(name), system: system)
            try database.query(
                "INSERT INTO attachments(record, position, name, filename, source, size, file) VALUES(?, ?, ?, ?, ?, ?, ?)",
                [.integer(record), .integer(Int64(position)), .text(attachment.name), .text(attachment.filename),
                 .text(attachment.source.rawValue), .integer(Int64(attachment.data.count)), .text(name)])
        }
        DurableFile.syncDirectory(folder)
        return replaced
    }

    /// Counts one more run of a record's chain; returns how many there have been.
    public func countChainRun(_ rowID: Int64) throws(StorageError) -> Int {
        try database.query("UPDATE reports SET chain_runs = chain_runs + 1 WHERE rowid = ?", [.integer(rowID)])
        return Int(try database.query("SELECT chain_runs FROM reports WHERE rowid = ?", [.integer(rowID)]).first?.first?.int ?? 0)
    }

    // MARK: Delivery (SPEC D-5 … D-11)

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

    /// Records the outcome of an attempt: a state, its outcome text and the next attempt time.
    public func settle(_ rowID: Int64, state: RecordState, outcome: String?, nextAttemptAt: Date?) throws(StorageError) {
        try database.query(
            "UPDATE reports SET state = ?, outcome = ?, next_attempt_at = ?, updated_at = ? WHERE rowid = ?",
            [.text(state.rawValue), .optional(outcome), .optional(nextAttemptAt.map(Self.milliseconds)),
             .integer(Self.milliseconds(Date())), .integer(rowID)])
    }

    /// Terminal (SPEC D-9): keeps the row with its state and outcome, deletes the payload
    /// and the attachment copies.
    public func finish(_ rowID: Int64, outcome: String) throws(StorageError) {
        let rows = try database.query("SELECT document FROM reports WHERE rowid = ?", [.integer(rowID)])
        var stub = rows.first?.first?.string.flatMap { try? JSONValue.parse($0) }.flatMap(ReportDocument.init(json:))
        stub?.content = ReportContent()
        stub?.internalLog = []
        try database.transaction { () throws(StorageError) in
            try database.query(
                "UPDATE reports SET state = ?, outcome = ?, next_attempt_at = NULL, crash = NULL, document = COALESCE(?, document), bytes = 0, updated_at = ? WHERE rowid = ?",
                [.text(RecordState.terminal.rawValue), .text(outcome), .optional(stub?.json.serialized()),
                 .integer(Self.milliseconds(Date())), .integer(rowID)])
            try database.query("DELETE FROM attachments WHERE record = ?", [.integer(rowID)])
        }
        try? FileManager.default.removeItem(at: attachmentsFolder.appendingPathComponent(String(rowID)))
    }

    // MARK: Sessions (SPEC D-16)

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

    // MARK: Leftovers

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

    // MARK: Storage limits (SPEC D-12)

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

    // MARK: Sizes

    /// The physical size of the database file (SPEC D-12 measures this file only).
    public var databaseBytes: Int {
        ((try? FileManager.default.attributesOfItem(atPath: databasePath))?[.size] as? NSNumber)?.intValue ?? 0
    }

    static func size(of document: ReportDocument) -> Int {
        document.json.serialized().utf8.count + document.content.attachments.reduce(0) { $0 + $1.data.count }
    }

    /// Milliseconds since 1970, saturating: no date, however far off, traps.
    static func milliseconds(_ date: Date) -> Int64 {
        let value = (date.timeIntervalSince1970 * 1000).rounded()
        guard !value.isNaN else { return 0 }
        return Int64(exactly: value) ?? (value > 0 ? Int64.max : Int64.min)
    }
    static func date(_ milliseconds: Int64) -> Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }
}

/// Writes that survive a power cut: data and then the folder entry fsync'd, through the
/// system-call seam (a full disk is an error, never a trap).
enum DurableFile {
    static func write(_ data: Data, to url: URL, system: SystemCalls = .live) throws(StorageError) {
        let fd: Int32
        switch system.open(url.path, O_WRONLY | O_CREAT | O_TRUNC) {
        case .success(let opened): fd = opened
        case .failure(let error): throw StorageError(path: url.path, message: "cannot create (\(error))")
        }
        defer { close(fd) }
        if case .failure(let error) = system.writeAll(fd, data) { throw StorageError(path: url.path, message: "cannot write (\(error))") }
        if case .failure(let error) = system.fsync(fd) { throw StorageError(path: url.path, message: "cannot sync (\(error))") }
    }

    static func syncDirectory(_ url: URL, system: SystemCalls = .live) {
        system.syncDirectory(url.path)
    }
}

func errnoText(_ error: any Error) -> String {
    (error as NSError).userInfo[NSUnderlyingErrorKey].map { "\($0)" } ?? error.localizedDescription
}
