import CSQLite
import FoundationEssentials
import Glibc
import HostCapture
import HostModel
import HostSupport

/// The local repository (SPEC I-7): `reporthost.sqlite` (WAL, synchronous=FULL), the lock
/// file, `crashes/` and `attachments/` (copies, one folder per record) in one folder.
///
/// Writes that later steps depend on are durable before the call returns: SQLite commits
/// with `synchronous=FULL`, attachment files are fsync'd before the row that names them.
///
/// # Thread safety
/// The connection serializes its statements; callers run one launch at a time (the lock).
package final class Repository: Sendable {
    package let folder: URL
    let database: Database
    /// Maintenance targets checked after each save (SPEC D-12).
    package let limits: StorageLimits
    /// Writes attachment copies (tests inject ENOSPC or EIO here).
    package let system: SystemCalls
    /// Where maintenance says what it did (one line per eviction pass, D-12).
    let logger: HostLogger
    /// Whether `reports` has its `duplicates` column (schema 12), once looked up.
    private let duplicatesColumn = Locked<Bool?>(nil)
    /// Whether the repository has its table of crash payloads (schema 15), once looked up.
    let payloadTable = Locked<Bool?>(nil)
    /// Whether it has its table of breadcrumbs (schema 16), once looked up.
    let breadcrumbsTable = Locked<Bool?>(nil)

    package static let databaseName = "reporthost.sqlite"
    package static let lockName = "reporthost.lock"
    static let schemaVersion = 16

    package var databasePath: String { folder.appendingPathComponent(Self.databaseName).path }
    package var crashesFolder: URL { CrashFolder.of(repository: folder) }
    package var attachmentsFolder: URL { folder.appendingPathComponent("attachments") }

    init(
        folder: URL, database: Database, system: SystemCalls, limits: StorageLimits = StorageLimits(),
        logger: HostLogger = HostLogger(destinations: [])
    ) {
        self.folder = folder
        self.database = database
        self.limits = limits
        self.system = system
        self.logger = logger
    }

    /// Opens the repository in `folder`, creating the folder, its sub-folders and the
    /// database when missing, and migrating the schema.
    package static func open(
        folder: URL, limits: StorageLimits = StorageLimits(), faults: Faults = Faults(), system: SystemCalls? = nil,
        logger: HostLogger = HostLogger(destinations: [])
    ) throws(StorageError) -> Repository {
        // The seam: the one given, else the one the faults build (the same plan, one mechanism).
        let system = system ?? faults.systemCalls
        for sub in [folder, CrashFolder.of(repository: folder), folder.appendingPathComponent("attachments")] {
            if case .failure(let failure) = Paths.makeFolder(sub.path, system: system) {
                throw StorageError(path: sub.path, message: "cannot create the folder (\(failure))")
            }
        }
        createPrivately(folder.appendingPathComponent(databaseName).path, system: system)
        let database = try Database(path: folder.appendingPathComponent(databaseName).path, create: true, faults: faults)
        let repository = Repository(folder: folder, database: database, system: system, limits: limits, logger: logger)
        try repository.migrate()
        repository.database.keepLog()
        return repository
    }

    /// Extends the write-ahead log with zeros to `logBytes` when it is shorter. A flush after
    /// an append that grows the file costs about twice one that overwrites (measured here:
    /// 0.36 against 0.19 ms for a report's two commits). Zeros past the last frame are never
    /// read as frames (each frame carries the log's salt and a checksum). Done under the write
    /// lock, so no other process appends meanwhile; on any failure (a full disk) the file is
    /// cut back to its size and the log simply grows as it would have. Once per repository
    /// (the log is kept, `Database.keepLog`); recovery does it, off an embedding program's start.
    ///
    /// Only where the disk keeps `spareAfterLogBytes` free after it: on a small file system
    /// (a container's tmpfs) those 4 MB would be the room a report and its attachments need.
    package func preallocateLog() throws(StorageError) {
        // Every launch asks: a log already at its size takes no lock.
        if let info = system.stat(databasePath + "-wal"), Int(info.st_size) >= Self.logBytes { return }
        guard let free = system.freeBytes(folder.path), free >= Int64(Self.logBytes + Self.spareAfterLogBytes) else { return }
        try database.transaction(.committed) { () throws(StorageError) in
            // The log exists from the transaction's start.
            guard case .success(let fd) = system.open(databasePath + "-wal", O_WRONLY) else { return }
            defer { system.close(fd) }
            guard let info = system.fstat(fd), Int(info.st_size) < Self.logBytes, system.lseek(fd, info.st_size, SEEK_SET) >= 0 else { return }
            let zeros = [UInt8](repeating: 0, count: 64 * 1024)
            var offset = Int(info.st_size)
            while offset < Self.logBytes {
                let count = min(zeros.count, Self.logBytes - offset)
                let written = zeros.withUnsafeBytes { system.writeAll(fd, UnsafeRawBufferPointer(rebasing: $0[..<count])) }
                guard case .success = written else { break }
                offset += count
            }
            guard offset == Self.logBytes, case .success = system.fsync(fd) else {
                system.ftruncate(fd, info.st_size)
                return
            }
        }
    }

    /// The size the write-ahead log is kept at: what it grows to between two automatic
    /// checkpoints (1,000 pages and their frame headers), so a commit overwrites blocks the
    /// log already has and its flush writes no file size or block allocation.
    package static let logBytes = 1_000 * (4_096 + 24) + 32

    /// What the disk must keep free after the log's preallocation (see `preallocateLog`).
    package static let spareAfterLogBytes = 64 * 1024 * 1024

    /// Gives a full disk the log's spare blocks back: a checkpoint that, when it takes every
    /// frame (no other process reading), cuts the log to nothing. The next launch on a disk
    /// with room preallocates it again.
    func giveBackLogSpace() {
        do throws(StorageError) {
            try database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            logger.debug("the disk is full: the write-ahead log's spare blocks were given back")
        } catch {
            logger.debug("the disk is full and the write-ahead log could not be cut back: \(error)")
        }
    }

    /// Opens an existing repository for reading only (`status`); nil when there is none.
    /// Creates nothing.
    package static func openForReading(folder: URL, system: SystemCalls) throws(StorageError) -> Repository? {
        let path = folder.appendingPathComponent(databaseName).path
        guard system.fileExists(path) else { return nil }
        let repository = Repository(folder: folder, database: try Database(path: path, create: false, readOnly: true), system: system)
        _ = try repository.storedSchemaVersion()
        return repository
    }

    /// `openForReading` for commands a person points at a folder (`status`, `show`): a folder
    /// that does not exist is an error naming it (a misspelled path must not read as an empty
    /// repository); an existing folder that holds none is nil.
    package static func openForReading(existingFolder folder: URL, system: SystemCalls) throws(StorageError) -> Repository? {
        var isFolder = false
        guard system.fileExists(folder.path, isFolder: &isFolder) else {
            throw StorageError(path: folder.path, message: "no such repository folder")
        }
        guard isFolder else { throw StorageError(path: folder.path, message: "not a folder") }
        return try openForReading(folder: folder, system: system)
    }

    // MARK: Reading records (the schema is in Schema.swift; a record's life in
    // RecordLifecycle.swift; attachment copies, the admission window, sessions and eviction
    // each in a file of their own)

    var columns: String { columns(crash: payloadColumn) }
    /// `columns` with NULL for the crash payload.
    var columnsWithoutCrash: String { columns(crash: "NULL") }

    /// The record columns, `crash` in the payload's place. Written whole, not edited with
    /// `replacing`: that is `_StringProcessing`'s code, which a start ran for this alone
    /// (recovery's first read of records, on the delivery thread).
    private func columns(crash: String) -> String {
        // `status` and `show` read a repository an older host made without migrating it:
        // one without the column reads every record as unique.
        let duplicates = duplicatesColumn.withLock { known in
            if let known { return known }
            let present = !((try? database.query("SELECT 1 FROM pragma_table_info('reports') WHERE name = 'duplicates'")) ?? []).isEmpty
            known = present
            return present
        }
        return "rowid, document, state, attempts, next_attempt_at, \(crash), crash_file, session, dialog_pending, outcome, bytes, updated_at, held, "
            + (duplicates ? "duplicates" : "1") + ", \(breadcrumbsColumn)"
    }

    /// Records in `states` (all when empty), oldest first. A row that cannot be read (a
    /// damaged document) is skipped, never fails the others: `unreadableRecords` names it.
    /// - Parameter rowIDs: only these rows (a batch's records, saved together).
    /// - Parameter crashes: false leaves `crash` nil, unread and unparsed (recovery's chains do
    ///   not look at the payload, often most of a crash record).
    package func records(in states: [RecordState] = [], rowIDs: [Int64]? = nil, crashes: Bool = true) throws(StorageError)
        -> [ReportRecord]
    {
        try rows(in: states, rowIDs: rowIDs, crashes: crashes).compactMap { row in try? record(from: row) }
    }

    /// A record's columns without its document or crash payload: what `status` lists and what
    /// a delivery pass orders, read without parsing a single document.
    package struct Summary: Sendable {
        package var rowID: Int64
        package var reportID: String
        package var trigger: Trigger
        package var state: RecordState
        package var attempts: Int
        package var nextAttemptAt: Date?
        package var createdAt: Date
        package var bytes: Int
        package var outcome: String?
        package var held: String?
        package var session: String?
        package var updatedAt: Date
    }

    /// What a row must hold to be read as a record, checked by SQLite: a known trigger, and a
    /// document that is JSON with the id, trigger and time every document has (looked into only
    /// once it is known to be JSON: json_type fails on anything else). The index
    /// `readable_by_state` holds the rows that meet it (checked as a row is written), and, with
    /// their documents unchecked, the rows the host is still `writing` (`pending_purge`,
    /// `pending_chain`), which it writes at least once more. SQLite checks a row's document each
    /// time the row changes state, the old row's too: for a report with a full breadcrumb ring,
    /// three parses of its document were a tenth of storing it. The readers leave out those
    /// whose document is damaged (`checkedIfWriting`), and `unreadableRecords` names them.
    /// The triggers are compared one by one: an `IN` list makes SQLite build a temporary table
    /// each time it checks a row, twice per update of a record.
    static let readable = "\(knownTrigger) AND (\(writing) OR \(readableDocument))"

    // Its parts (the tests build schema 13's condition from them).
    static let knownTrigger = "(\(Trigger.allCases.map { "trigger = '\($0.name)'" }.joined(separator: " OR ")))"
    static let readableDocument = """
        CASE WHEN json_valid(document) THEN json_type(document, '$.report_id') IS 'text' \
        AND json_type(document, '$.trigger') IS 'text' AND json_type(document, '$.created_at') IS 'text' ELSE 0 END
        """
    /// The states of a row the host is still writing: a crash's record before its file is
    /// purged, a report before its chain has finished.
    static let writingStates: [RecordState] = [.pendingPurge, .pendingChain]
    static let writing = writingStates.map { "state = '\($0.rawValue)'" }.joined(separator: " OR ")
    /// Leaves out the rows `writing` whose document cannot be read (the index holds them).
    private static let checkedIfWriting = "(NOT (\(writing)) OR \(readableDocument))"

    /// Summaries of the records in `states` (all when empty), oldest first, through the index
    /// on state; at most `limit` when given. Rows `unreadableRecords` names are left out: the
    /// index holds none but the few the host is writing, so only their documents are read here.
    /// - Parameter storedOrder: in the order they were stored (what `show latest` calls the
    ///   newest), not by creation time (a crash's report is dated at the crash, maybe earlier).
    package func summaries(in states: [RecordState] = [], limit: Int? = nil, storedOrder: Bool = false) throws(StorageError) -> [Summary] {
        let filter = states.isEmpty ? "" : "state IN (\(states.map { _ in "?" }.joined(separator: ", "))) AND "
        let order = storedOrder ? "rowid" : "created_at, rowid"
        return try summaries(
            where: filter + Self.readable + " AND " + Self.checkedIfWriting, states.map { .text($0.rawValue) }, order: order, limit: limit)
    }

    private func summaries(where condition: String, _ values: [SQLValue], order: String, limit: Int?) throws(StorageError) -> [Summary] {
        try database.query(
            """
            SELECT rowid, report_id, trigger, state, attempts, next_attempt_at, created_at, bytes, outcome, held, session, updated_at
            FROM reports INDEXED BY readable_by_state WHERE \(condition) ORDER BY \(order) \(limit.map { "LIMIT \($0)" } ?? "")
            """,
            values
        ) { row in
            guard let trigger = row.text(2).flatMap(Trigger.init(name:)) else { return nil }
            return Summary(
                rowID: row.int(0) ?? 0, reportID: row.text(1) ?? "", trigger: trigger,
                state: row.text(3).flatMap(RecordState.init(rawValue:)) ?? .terminal,
                attempts: Int(clamping: min(max(row.int(4) ?? 0, 0), 1_000_000)), nextAttemptAt: row.int(5).map(Self.date),
                createdAt: Self.date(row.int(6) ?? 0), bytes: Int(row.int(7) ?? 0), outcome: row.text(8), held: row.text(9),
                session: row.text(10), updatedAt: Self.date(row.int(11) ?? 0))
        }
    }

    /// Which records a delivery pass sends as one group (D-6), read a page at a time.
    package struct DueGroup: Sendable {
        package var state: RecordState
        /// true: crash reports only (natives); false: the others; nil: any.
        package var natives: Bool?
        /// Only this session's records (a secondary sends only its own).
        package var session: String?
        /// Retries due by this time: their stored time, or (kept under `retry: none`, no time
        /// stored) their last change plus the interval.
        package var dueBy: (now: Date, intervalSeconds: Int)?
        package var newestFirst = false

        package init(state: RecordState, natives: Bool? = nil, session: String? = nil) {
            self.state = state
            self.natives = natives
            self.session = session
        }
    }

    /// The next `limit` records of `group` after `cursor` (the last of the previous page; nil
    /// for the first), through the index on state: a pass's first request never waits for the
    /// rest of the backlog to be read.
    package func page(of group: DueGroup, after cursor: Summary?, limit: Int) throws(StorageError) -> [Summary] {
        var conditions = ["state = ?", Self.readable]
        var values: [SQLValue] = [.text(group.state.rawValue)]
        if let natives = group.natives {
            let crashes = Trigger.allCases.filter(\.isRecovered).map { "'\($0.name)'" }.joined(separator: ", ")
            conditions.append("trigger \(natives ? "IN" : "NOT IN") (\(crashes))")
        }
        if let session = group.session {
            conditions.append("session = ?")
            values.append(.text(session))
        }
        if let dueBy = group.dueBy {
            // Never early: now rounded down, as due times are stored.
            conditions.append("coalesce(next_attempt_at, updated_at + ?) <= ?")
            values += [.integer(Int64(dueBy.intervalSeconds) * 1000), .integer(Self.milliseconds(dueBy.now, rounding: .down))]
        }
        let order = group.newestFirst ? "DESC" : "ASC"
        if let cursor {
            conditions.append("(created_at, rowid) \(group.newestFirst ? "<" : ">") (?, ?)")
            values += [.integer(Self.milliseconds(cursor.createdAt)), .integer(cursor.rowID)]
        }
        return try summaries(
            where: conditions.joined(separator: " AND "), values, order: "created_at \(order), rowid \(order)", limit: limit)
    }

    /// One record, read whole; nil when it is gone or cannot be read.
    package func record(_ rowID: Int64) throws(StorageError) -> ReportRecord? {
        try database.query("SELECT \(columns) FROM reports WHERE rowid = ?", [.integer(rowID)]).first
            .flatMap { row in try? record(from: row) }
    }

    /// The sessions that have a crash report stored (D-16: they are not abnormal exits).
    package func sessionsWithCrashReports() throws(StorageError) -> Set<String> {
        // A crash counted on another session's record (SPEC B-3) is known by the history.
        let rows = try database.query(
            """
            SELECT DISTINCT session FROM reports WHERE trigger = ? AND session IS NOT NULL
            UNION SELECT id FROM session_history WHERE end = ?
            """, [.text(Trigger.crash.name), .text(SessionEnd.crashed.rawValue)])
        return Set(rows.compactMap { $0.first?.string })
    }

    /// The rows `records` skips, with why (`status` reports them; nothing is deleted, D-13).
    package func unreadableRecords() throws(StorageError) -> [(rowID: Int64, reason: String)] {
        // The rows the index holds unchecked (the few the host is writing) are read each time;
        // the rows it leaves out only when there are some: a repository whose other rows are
        // all in the index (all readable) reads no other document here.
        var damaged = try database.query(
            """
            SELECT \(columns) FROM reports INDEXED BY readable_by_state
            WHERE state IN (\(Self.writingStates.map { "'\($0.rawValue)'" }.joined(separator: ", "))) AND \(Self.readable)
            AND NOT (\(Self.readableDocument))
            """)
        let counts = try database.query(
            "SELECT (SELECT COUNT(*) FROM reports), (SELECT COUNT(*) FROM reports INDEXED BY readable_by_state WHERE \(Self.readable))")
        if let counts = counts.first, counts[0].int != counts[1].int {
            // NULL (a NULL trigger or document) counts as unreadable.
            damaged += try database.query("SELECT \(columns) FROM reports WHERE NOT coalesce(\(Self.readable), 0)")
        }
        return damaged.sorted { ($0[0].int ?? 0) < ($1[0].int ?? 0) }.compactMap { row -> (rowID: Int64, reason: String)? in
            do throws(StorageError) {
                _ = try record(from: row)
                return nil
            } catch {
                return (row[0].int ?? 0, error.message)
            }
        }
    }

    /// The rows in `states` (all when empty), in `rowIDs` when given. By state through
    /// `readable_by_state`, the one index on state: the rows it leaves out, and those
    /// `checkedIfWriting` leaves out, are those `record(from:)` cannot read.
    private func rows(in states: [RecordState], rowIDs: [Int64]?, crashes: Bool) throws(StorageError) -> [[SQLValue]] {
        var conditions: [String] = []
        if !states.isEmpty {
            conditions = ["state IN (\(states.map { _ in "?" }.joined(separator: ", ")))", Self.readable, Self.checkedIfWriting]
        }
        if rowIDs != nil { conditions.append("rowid IN \(Self.listed)") }
        let filter = (states.isEmpty ? "" : "INDEXED BY readable_by_state ") + (conditions.isEmpty ? "" : "WHERE ")
            + conditions.joined(separator: " AND ")
        let columns = crashes ? self.columns : columnsWithoutCrash
        return try database.query(
            "SELECT \(columns) FROM reports \(filter) ORDER BY created_at, rowid",
            states.map { .text($0.rawValue) } + (rowIDs.map { [Self.list($0)] } ?? []))
    }

    private func record(from row: [SQLValue]) throws(StorageError) -> ReportRecord {
        let rowID = row[0].int ?? 0
        guard var document = Self.document(text: row[1].string, breadcrumbs: row[14].string) else {
            throw StorageError(path: databasePath, message: "record \(rowID) holds an unreadable document")
        }
        // The column counts the identical crashes merged into the record since its document was written.
        document.duplicates = Int(clamping: max(1, row[13].int ?? 1))
        return ReportRecord(
            rowID: rowID, document: document, state: row[2].string.flatMap(RecordState.init(rawValue:)) ?? .terminal,
            attempts: Int(clamping: min(max(row[3].int ?? 0, 0), 1_000_000)), nextAttemptAt: row[4].int.map(Self.date),
            crash: row[5].string.flatMap { try? JSONValue.parse($0) }, crashFile: row[6].string, session: row[7].string,
            dialogPending: row[8].int == 1, outcome: row[9].string, bytes: Int(row[10].int ?? 0),
            updatedAt: Self.date(row[11].int ?? 0), held: row[12].string)
    }

    // MARK: Sizes

    /// The physical size of the database file (SPEC D-12 measures this file only).
    package var databaseBytes: Int {
        system.stat(databasePath).map { Int($0.st_size) } ?? 0
    }

    /// Milliseconds since 1970, saturating: no date, however far off, traps. A due time is
    /// rounded down (`.down`): stored rounded up, "due now" would not be due at that instant.
    static func milliseconds(_ date: Date, rounding: FloatingPointRoundingRule = .toNearestOrAwayFromZero) -> Int64 {
        let value = (date.timeIntervalSince1970 * 1000).rounded(rounding)
        guard !value.isNaN else { return 0 }
        return Int64(exactly: value) ?? (value > 0 ? Int64.max : Int64.min)
    }
    static func date(_ milliseconds: Int64) -> Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }
}
