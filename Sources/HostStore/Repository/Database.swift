import CSQLite
import FoundationEssentials
import Glibc
import HostModel
import HostSupport

/// Why storage failed. Every message names the file.
package struct StorageError: Error, Equatable, Sendable, CustomStringConvertible {
    package let path: String
    package let message: String
    /// The file system had no room (ENOSPC, EDQUOT, SQLITE_FULL): the one failure that giving
    /// space back, or leaving an attachment out, can cure.
    package let outOfSpace: Bool
    package var description: String { "\(path): \(message)" }

    package init(path: String, message: String, outOfSpace: Bool = false) {
        self.path = path
        self.message = message
        self.outOfSpace = outOfSpace
    }

    /// A failure of `call` on `path`, out of space when its errno says so.
    init(path: String, message: String, _ error: SystemError) {
        self.init(path: path, message: message, outOfSpace: error.errno == ENOSPC || error.errno == EDQUOT)
    }
}

/// Runs a storage step for a caller that reports `HostError`s: a storage failure becomes an
/// I/O error naming the file (exit 1).
@discardableResult
package func storing<T>(_ body: () throws(StorageError) -> T) throws(HostError) -> T {
    do {
        return try body()
    } catch {
        throw .io(path: error.path, reason: error.message)
    }
}

/// One SQLite connection: the only owner of its `sqlite3 *`, closed in `deinit`. Statements
/// are prepared once and kept for the connection's life (at most `maxCachedStatements`).
///
/// # Thread safety
/// `@unchecked Sendable`: every use of the connection goes through `serialized`, which holds
/// the lock for the whole statement, and a transaction holds the same (recursive) lock from
/// `BEGIN` to `COMMIT`: another thread's statement never lands inside it.
final class Database: @unchecked Sendable {
    let path: String
    private let connection: OpaquePointer
    private let lock = RecursiveLock()
    private let faults: Faults
    /// Prepared statements by their SQL, reset after each use. Guarded by `lock`.
    private var statements: [String: OpaquePointer] = [:]
    static let maxCachedStatements = 128
    /// The durability of the transaction in progress, nil between transactions. Guarded by `lock`.
    private var inProgress: Durability?
    /// The log's length in frames after this connection's last commit (`keepLog`). Written by
    /// SQLite during a commit, read under `lock`.
    private let logFrames = UnsafeMutablePointer<Int32>.allocate(capacity: 1)
    /// Flushes the log on a thread of its own (`logFlusher`); started at the first flush asked
    /// of it. Guarded by `lock`.
    private var flusher: LogFlusher?

    /// Whether a transaction's commit waits for the disk (SPEC D-1 … D-4, H-13).
    enum Durability {
        /// `synchronous=FULL`: on the disk when the commit returns.
        case flushed
        /// `synchronous=NORMAL` for this commit: it survives the process being killed (WAL),
        /// and reaches the disk with the next flushed commit or checkpoint; a power loss before
        /// then takes it back. Only for a step whose earlier state is safe to come back to.
        case committed
    }

    /// Opens (creating if `create`) the database at `path`; for writing, never through a
    /// symbolic link planted under its name (SQLite's `SQLITE_OPEN_NOFOLLOW`).
    init(path: String, create: Bool, readOnly: Bool = false, faults: Faults = Faults()) throws(StorageError) {
        self.path = path
        self.faults = faults
        var handle: OpaquePointer?
        let flags = readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW | (create ? SQLITE_OPEN_CREATE : 0))
        // A reader's every call goes through `serialized`, so SQLite's own mutex (taken at
        // each column read) is left out there.
        let status = sqlite3_open_v2(path, &handle, flags | (readOnly ? SQLITE_OPEN_NOMUTEX : SQLITE_OPEN_FULLMUTEX), nil)
        guard status == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            if let handle { sqlite3_close_v2(handle) }
            throw StorageError(path: path, message: Database.explain(status, message), outOfSpace: status & 0xff == SQLITE_FULL)
        }
        connection = handle
        sqlite3_busy_timeout(handle, 5_000)
        logFrames.initialize(to: 0)
        // A reader (`status`, `show`) maps the file rather than copying each page it reads
        // with pread: a tenth of `status --all` at 10,000 records. (The log is not mapped.)
        if readOnly { sqlite3_exec(handle, "PRAGMA mmap_size=\(Self.readerMapBytes)", nil, nil, nil) }
    }

    /// How much of the file a reader maps (SQLite maps at most the file's size).
    static let readerMapBytes = 1 << 30

    deinit {
        flusher?.finish()
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(connection)
        logFrames.deallocate()
    }

    /// A message a user can act on for an SQLite status.
    static func explain(_ status: Int32, _ message: String) -> String {
        switch status & 0xff {
        case SQLITE_FULL: "the disk is full (\(message)); what was stored before is intact"
        case SQLITE_CORRUPT, SQLITE_NOTADB: "the database is corrupt or not a ReportHost database (\(message)); it was left in place"
        case SQLITE_READONLY: "the database is read-only (\(message))"
        case SQLITE_CANTOPEN: "cannot open the database (\(message)): check the folder exists and is writable"
        case SQLITE_BUSY, SQLITE_LOCKED: "the database is busy (\(message))"
        case SQLITE_IOERR: "input/output error (\(message))"
        default: message
        }
    }

    private func failure(_ status: Int32) -> StorageError {
        StorageError(
            path: path, message: Database.explain(status, String(cString: sqlite3_errmsg(connection))), outOfSpace: status & 0xff == SQLITE_FULL)
    }

    /// Runs one or more statements without results.
    func execute(_ sql: String) throws(StorageError) {
        try serialized { () throws(StorageError) in
            if failsWrite(sql) { throw StorageError(path: path, message: Database.explain(SQLITE_FULL, "database or disk is full"), outOfSpace: true) }
            let status = sqlite3_exec(connection, sql, nil, nil, nil)
            guard status == SQLITE_OK else { throw failure(status) }
        }
    }

    /// Runs `sql` with `values` bound in order; returns every row.
    @discardableResult
    func query(_ sql: String, _ values: [SQLValue] = []) throws(StorageError) -> [[SQLValue]] {
        try query(sql, values) { row in (0..<row.count).map(row.value) }
    }

    /// One row of a result, read in place (valid only inside `query`'s `make`).
    struct Row {
        fileprivate let statement: OpaquePointer

        var count: Int { Int(sqlite3_column_count(statement)) }

        func value(_ column: Int) -> SQLValue {
            let column = Int32(column)
            switch sqlite3_column_type(statement, column) {
            case SQLITE_INTEGER: return .integer(sqlite3_column_int64(statement, column))
            // NULL pointers: a zero-length BLOB, or out of memory.
            case SQLITE_TEXT: return .text(sqlite3_column_text(statement, column).map { String(cString: $0) } ?? "")
            case SQLITE_BLOB:
                return .blob(sqlite3_column_blob(statement, column).map {
                    Data(bytes: $0, count: Int(sqlite3_column_bytes(statement, column)))
                } ?? Data())
            default: return .null
            }
        }

        /// The column as an integer; nil unless it holds one.
        func int(_ column: Int) -> Int64? {
            sqlite3_column_type(statement, Int32(column)) == SQLITE_INTEGER ? sqlite3_column_int64(statement, Int32(column)) : nil
        }

        /// The column as text; nil unless it holds text.
        func text(_ column: Int) -> String? {
            guard sqlite3_column_type(statement, Int32(column)) == SQLITE_TEXT else { return nil }
            return sqlite3_column_text(statement, Int32(column)).map { String(cString: $0) } ?? ""
        }
    }

    /// Runs `sql` with `values` bound in order; one value per row from `make` (nil skips the
    /// row), which reads the columns in place: no array of values is built for a row.
    func query<T>(_ sql: String, _ values: [SQLValue] = [], each make: (Row) -> T?) throws(StorageError) -> [T] {
        try serialized { () throws(StorageError) -> [T] in
            if failsWrite(sql) { throw StorageError(path: path, message: Database.explain(SQLITE_FULL, "database or disk is full"), outOfSpace: true) }
            let statement = try prepared(sql)
            defer {
                sqlite3_reset(statement)
                sqlite3_clear_bindings(statement)
            }
            for (index, value) in values.enumerated() {
                let position = Int32(index + 1)
                switch value {
                case .null: sqlite3_bind_null(statement, position)
                case .integer(let v): sqlite3_bind_int64(statement, position, v)
                case .text(let v): sqlite3_bind_text(statement, position, v, -1, Database.transient)
                case .blob(let v):
                    _ = v.withUnsafeBytes { sqlite3_bind_blob(statement, position, $0.baseAddress, Int32(v.count), Database.transient) }
                }
            }
            var rows: [T] = []
            while true {
                let status = sqlite3_step(statement)
                if status == SQLITE_DONE { break }
                guard status == SQLITE_ROW else { throw failure(status) }
                if let row = make(Row(statement: statement)) { rows.append(row) }
            }
            return rows
        }
    }

    /// The statement for `sql`, prepared once. [lock held]
    private func prepared(_ sql: String) throws(StorageError) -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        if statements.count >= Self.maxCachedStatements {
            for statement in statements.values { sqlite3_finalize(statement) }
            statements.removeAll()
        }
        var statement: OpaquePointer?
        let status = sqlite3_prepare_v3(connection, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard status == SQLITE_OK, let statement else { throw failure(status) }
        statements[sql] = statement
        return statement
    }

    /// Keeps the write-ahead log file between connections (SQLite deletes it when the last
    /// one closes), so the blocks `Repository.preallocateLog` gave it stay. Closing does not
    /// checkpoint: the next connection to open reads back every frame since the log last
    /// started over (about 3.5 ms for 300), so a clean stop ends with `startLogOver` instead.
    func keepLog() {
        var persist: Int32 = 1
        sqlite3_file_control(connection, "main", SQLITE_FCNTL_PERSIST_WAL, &persist)
        rh_sqlite3_no_checkpoint_on_close(connection, 1)
        rh_sqlite3_count_log_frames(connection, logFrames)
    }

    /// Runs `body` in one flushed transaction, a connection's last write. When the log holds
    /// `startOverFrames` or more, it is checkpointed first without waiting for anyone: when
    /// that took every frame and no other process reads, the write starts the log over, and
    /// the next process to open the repository reads back its frames only. (Below that, the
    /// checkpoint's three flushes cost more than reading the frames back.)
    func startLogOver(_ body: () throws(StorageError) -> Void) throws(StorageError) {
        // Only a speed-up for the next process: a checkpoint that fails must not keep the write.
        if try serialized({ logFrames.pointee }) >= Self.startOverFrames { try? execute("PRAGMA wal_checkpoint(PASSIVE)") }
        try transaction(.flushed, body)
    }

    /// See `startLogOver`: reading 100 frames back at open costs about a millisecond here.
    package static let startOverFrames: Int32 = 100

    /// Runs `body` in one transaction: committed if it returns, rolled back if it throws.
    /// Inside another transaction (same thread: the lock is held) it is part of that one,
    /// which must wait for the disk at least as `durability` asks.
    @discardableResult
    func transaction<T>(_ durability: Durability = .flushed, _ body: () throws(StorageError) -> T) throws(StorageError) -> T {
        try serialized { () throws(StorageError) -> T in
            if let outer = inProgress {
                assert(durability == .committed || outer == .flushed, "a flushed step inside a transaction that does not flush")
                return try body()
            }
            inProgress = durability
            defer { inProgress = nil }
            // Set between transactions (SQLite ignores it inside one), back to FULL after.
            // These five statements are prepared once (`query`), not parsed at each
            // transaction: parsing them was a fifth of a report's second write. (SQLite
            // applies a `PRAGMA synchronous` when it compiles it, so it compiles the two again
            // at each run, measured: 1.6% of a recovery's thread; BEGIN, COMMIT and ROLLBACK
            // it does not.)
            if durability == .committed { try query("PRAGMA synchronous=NORMAL") }
            defer { if durability == .committed { _ = try? query("PRAGMA synchronous=FULL") } }
            try query("BEGIN IMMEDIATE")
            do throws(StorageError) {
                let result = try body()
                try query("COMMIT")
                return result
            } catch {
                _ = try? query("ROLLBACK")
                throw error
            }
        }
    }

    /// The log's flusher, started at the first call: flushes asked of it run on its thread,
    /// through `system` (the seam for injected faults); `folder` holds the database.
    func logFlusher(folder: String, system: SystemCalls) throws(StorageError) -> LogFlusher {
        try serialized { () throws(StorageError) -> LogFlusher in
            if let flusher { return flusher }
            let started = try LogFlusher(logAt: path + "-wal", folder: folder, system: system)
            flusher = started
            return started
        }
    }

    private func serialized<T>(_ body: () throws(StorageError) -> T) throws(StorageError) -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    /// Whether a fault plan fails `sql` as a write on a full disk would. Without a plan (in
    /// production) the statement's text is not read: that was a tenth of a report's last write.
    private func failsWrite(_ sql: String) -> Bool {
        faults.calls != nil && Database.writes(sql) && faults.fails(.databaseWrite)
    }

    private static func writes(_ sql: String) -> Bool {
        let verb = sql.drop { $0.isWhitespace }.prefix(7).uppercased()
        return ["INSERT", "UPDATE", "DELETE", "CREATE", "REPLACE"].contains { verb.hasPrefix($0) }
    }

    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
}

/// A value bound to or read from SQLite.
enum SQLValue: Equatable, Sendable {
    case null
    case integer(Int64)
    case text(String)
    case blob(Data)

    var int: Int64? { if case .integer(let v) = self { v } else { nil } }
    var string: String? { if case .text(let v) = self { v } else { nil } }

    static func optional(_ text: String?) -> SQLValue { text.map(SQLValue.text) ?? .null }
    static func optional(_ value: Int64?) -> SQLValue { value.map(SQLValue.integer) ?? .null }
}
