import HostModel
import HostSupport
/// The repository's schema and its migrations: each version adds to the one before, all of
/// them in one transaction, and a database newer than this host is refused (never downgraded).
extension Repository {
    /// The schema version the database holds; one newer than this host's is refused.
    func storedSchemaVersion() throws(StorageError) -> Int64 {
        let version = try database.query("PRAGMA user_version").first?.first?.int ?? 0
        guard version <= Self.schemaVersion else {
            throw StorageError(path: databasePath, message: "schema version \(version) is newer than this host's \(Self.schemaVersion)")
        }
        return version
    }

    func migrate() throws(StorageError) {
        let version = try storedSchemaVersion()
        try database.execute("PRAGMA journal_mode=WAL")
        try database.execute("PRAGMA synchronous=FULL")
        guard version < Self.schemaVersion else { return }
        // One flushed transaction for every step (each step's own runs inside it): a new
        // repository costs one flush, not thirteen, and an upgrade is whole or not at all. The
        // version is read again under its lock: another process may have migrated meanwhile.
        try database.transaction { () throws(StorageError) in
            let version = try storedSchemaVersion()
            guard version < Self.schemaVersion else { return }
            try migrateToVersion3(from: version)
            try migrateToVersion7(from: version)
            try migrateToVersion11(from: version)
            try migrateToVersion13(from: version)
            try migrateToVersion14(from: version)
            try migrateToVersion15(from: version)
            try migrateToVersion16(from: version)
        }
    }

    /// Schemas 1 to 3: the tables, the admission window, copies' file names and chain runs.
    private func migrateToVersion3(from version: Int64) throws(StorageError) {
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
    }

    /// Schemas 4 to 7: quarantine, copies' sha256, held records and counters, crash attachments.
    private func migrateToVersion7(from version: Int64) throws(StorageError) {
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
        if version < 5 {
            // Each copy's sha256, taken once when it is written (older rows: from the copy,
            // when it is first streamed).
            try database.transaction { () throws(StorageError) in
                try database.execute("ALTER TABLE attachments ADD COLUMN sha256 TEXT; PRAGMA user_version = 5;")
            }
        }
        if version < 6 {
            // Held records say why (SPEC status states), and evictions are counted for `status`.
            try database.transaction { () throws(StorageError) in
                try database.execute("""
                    ALTER TABLE reports ADD COLUMN held TEXT;
                    CREATE TABLE counters(name TEXT PRIMARY KEY, value INTEGER NOT NULL);
                    PRAGMA user_version = 6;
                    """)
            }
        }
        if version < 7 {
            // The files a session registered for its crash files, with device and inode: the
            // only files a crash file's `attachment` lines may name.
            try database.transaction { () throws(StorageError) in
                try database.execute("""
                    CREATE TABLE crash_attachments(session TEXT NOT NULL, path TEXT NOT NULL, device INTEGER NOT NULL,
                                                   inode INTEGER NOT NULL, PRIMARY KEY(session, path));
                    PRAGMA user_version = 7;
                    """)
            }
        }
    }

    /// Schemas 10 and 11: the index of readable rows by state, and held reruns.
    private func migrateToVersion11(from version: Int64) throws(StorageError) {
        if version < 10 {
            // The readable rows by state, oldest first: SQLite checks a document once, when it
            // is written; a delivery pass, recovery, a launch's lookups and `status` find the
            // rows they need without reading the others. It replaces schema 8's index on
            // state (every write paid for both) and schema 9's version of itself, made under
            // an `IN` list of triggers (SQLite uses a partial index only for the predicate it
            // was made with).
            try database.transaction { () throws(StorageError) in
                try database.execute("""
                    DROP INDEX IF EXISTS reports_by_state;
                    DROP INDEX IF EXISTS readable_by_state;
                    CREATE INDEX readable_by_state ON reports(state, created_at) WHERE \(Self.readable);
                    PRAGMA user_version = 10;
                    """)
            }
        }
        if version < 11 {
            // How many reruns of a held report's chain ended held again: its back-off. (A
            // repository whose version was set back by hand may have the column already.)
            let columns = try database.query("SELECT name FROM pragma_table_info('reports')").compactMap { $0.first?.string }
            if !columns.contains("held_reruns") {
                try database.execute("ALTER TABLE reports ADD COLUMN held_reruns INTEGER NOT NULL DEFAULT 0")
            }
            try database.execute("PRAGMA user_version = 11")
        }
    }

    /// Schemas 12 and 13: session history, fingerprints, merged crashes, metric events, session order.
    private func migrateToVersion13(from version: Int64) throws(StorageError) {
        if version < 12 {
            // Every session's end and release, for crash-free rates and crash loops (SPEC B-2,
            // B-3), identical crashes counted on one record (B-3) with the sessions they came
            // from (what a crash became is always known), and the metric events that
            // wait to be sent (`metrics.enabled`). Each step may be there already (a
            // repository whose version was set back by hand).
            try database.transaction { () throws(StorageError) in
                let columns = try database.query("SELECT name FROM pragma_table_info('reports')").compactMap { $0.first?.string }
                if !columns.contains("fingerprint") { try database.execute("ALTER TABLE reports ADD COLUMN fingerprint TEXT") }
                if !columns.contains("duplicates") {
                    try database.execute("ALTER TABLE reports ADD COLUMN duplicates INTEGER NOT NULL DEFAULT 1")
                }
                let history = try database.query("SELECT name FROM pragma_table_info('session_history')").compactMap { $0.first?.string }
                if !history.isEmpty && !history.contains("cgroup") {
                    try database.execute("""
                        ALTER TABLE session_history ADD COLUMN cgroup TEXT;
                        ALTER TABLE session_history ADD COLUMN cgroup_version INTEGER;
                        ALTER TABLE session_history ADD COLUMN oom_kills INTEGER;
                        """)
                }
                try database.execute("""
                    CREATE TABLE IF NOT EXISTS session_history(
                        id TEXT PRIMARY KEY,
                        started_at INTEGER NOT NULL,
                        ended_at INTEGER,
                        end TEXT NOT NULL,
                        release TEXT,
                        cgroup TEXT,
                        cgroup_version INTEGER,
                        oom_kills INTEGER);
                    CREATE INDEX IF NOT EXISTS session_history_by_start ON session_history(started_at);
                    CREATE INDEX IF NOT EXISTS reports_by_fingerprint ON reports(fingerprint) WHERE fingerprint IS NOT NULL;
                    CREATE TABLE IF NOT EXISTS merged_crashes(record INTEGER NOT NULL, session TEXT, at INTEGER NOT NULL);
                    CREATE TABLE IF NOT EXISTS metric_events(
                        id INTEGER PRIMARY KEY,
                        kind TEXT NOT NULL,
                        body TEXT NOT NULL,
                        created_at INTEGER NOT NULL,
                        attempts INTEGER NOT NULL DEFAULT 0);
                    PRAGMA user_version = 12;
                    """)
            }
        }
        if version < 13 {
            // Sessions in the order they started, by a sequence: two starts can fall in the same
            // millisecond, and the wall clock can step back. Rows kept so far take their rowid
            // (their order of insertion).
            try database.transaction { () throws(StorageError) in
                for table in ["sessions", "session_history"] {
                    let columns = try database.query("SELECT name FROM pragma_table_info('\(table)')").compactMap { $0.first?.string }
                    if !columns.contains("seq") {
                        try database.execute("ALTER TABLE \(table) ADD COLUMN seq INTEGER; UPDATE \(table) SET seq = rowid;")
                    }
                }
                try database.execute("""
                    CREATE INDEX IF NOT EXISTS session_history_by_seq ON session_history(seq);
                    PRAGMA user_version = 13;
                    """)
            }
        }
    }

    /// Schema 14: the index of readable rows holds, unchecked, the rows the host is still
    /// writing (`Repository.readable`). Made again from the rows as they are: each document is
    /// checked once, here.
    private func migrateToVersion14(from version: Int64) throws(StorageError) {
        guard version < 14 else { return }
        try database.transaction { () throws(StorageError) in
            try database.execute("""
                DROP INDEX IF EXISTS readable_by_state;
                CREATE INDEX readable_by_state ON reports(state, created_at) WHERE \(Self.readable);
                PRAGMA user_version = 14;
                """)
        }
    }

    /// Schema 15: a crash's payload in a table of its own, written once with its record and
    /// deleted with it. In the record's row, 5 KB and more of it made SQLite write its overflow
    /// pages again at each of the record's state changes (four for a recovered crash). Rows
    /// kept so far keep theirs in `reports.crash`, read as before (`Repository.columns`).
    private func migrateToVersion15(from version: Int64) throws(StorageError) {
        guard version < 15 else { return }
        try createRecordPart("crash_payloads", column: "payload", trigger: "crash_payload_with_record", version: 15)
    }

    /// Schema 16: a report's breadcrumbs in a table of their own (`StoredDocuments`), deleted
    /// with its record. Records kept so far keep theirs in their documents, read as before.
    private func migrateToVersion16(from version: Int64) throws(StorageError) {
        guard version < 16 else { return }
        try createRecordPart("report_breadcrumbs", column: "breadcrumbs", trigger: "breadcrumbs_with_record", version: 16)
    }

    /// A table that keeps one large part of a record apart from its row (one text `column`,
    /// keyed by the record's rowid), emptied of a record's row by `trigger` when the record is
    /// deleted; the schema is `version` then.
    private func createRecordPart(_ table: String, column: String, trigger: String, version: Int) throws(StorageError) {
        try database.transaction { () throws(StorageError) in
            try database.execute("""
                CREATE TABLE IF NOT EXISTS \(table)(record INTEGER PRIMARY KEY, \(column) TEXT NOT NULL);
                CREATE TRIGGER IF NOT EXISTS \(trigger) AFTER DELETE ON reports
                    BEGIN DELETE FROM \(table) WHERE record = old.rowid; END;
                PRAGMA user_version = \(version);
                """)
        }
    }

    /// The crash payload as a column of `reports`: since schema 15 a record's payload is in
    /// `crash_payloads`, a record kept from before has it in its own row.
    var payloadColumn: String {
        knownTable("crash_payloads", payloadTable) ? "coalesce(crash, (SELECT payload FROM crash_payloads WHERE record = reports.rowid))" : "crash"
    }

    /// Whether the database has the table `name`, looked up once (`known` keeps the answer): a
    /// repository read without migrating it may lack the newest.
    func knownTable(_ name: String, _ known: Locked<Bool?>) -> Bool {
        known.withLock { known in
            if let known { return known }
            let present = !((try? database.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [.text(name)])) ?? []).isEmpty
            known = present
            return present
        }
    }
}
