import FoundationEssentials
import HostModel
import HostSupport

// The quarantine's rows (`QuarantineEntry`, in Plugins/, is the value each holds).
extension Repository {
    /// Adds a crash to the quarantine of the plugin file `(path, digest)`.
    package func quarantine(_ entry: QuarantineEntry) throws(StorageError) {
        try database.query(
            """
            INSERT INTO quarantine(path, digest, name, signal, callback, at, crashes) VALUES(?, ?, ?, ?, ?, ?, 1)
            ON CONFLICT(path, digest) DO UPDATE SET
                name = excluded.name, signal = excluded.signal, callback = excluded.callback,
                at = MAX(at, excluded.at), crashes = crashes + 1
            """,
            [.text(entry.path), .text(entry.digest), .text(entry.name), .text(entry.signal), .text(entry.callback),
             .integer(Self.milliseconds(entry.at))])
    }

    /// Every quarantined plugin file, oldest crash first.
    package func quarantined() throws(StorageError) -> [QuarantineEntry] {
        try database.query("SELECT path, digest, name, signal, callback, at, crashes FROM quarantine ORDER BY at, path").map { row in
            QuarantineEntry(
                path: row[0].string ?? "", name: row[2].string ?? "", digest: row[1].string ?? "", signal: row[3].string ?? "",
                callback: row[4].string ?? "", at: Self.date(row[5].int ?? 0), crashes: Int(clamping: row[6].int ?? 1))
        }
    }

    /// The quarantine entry of a plugin file with this content, if any: the key is the file's
    /// sha256, so a copy, a hard link or a reinstall of a quarantined plugin elsewhere is
    /// quarantined too (the path is for display and `--clear PATH`).
    package func quarantineEntry(for identity: PluginIdentity) throws(StorageError) -> QuarantineEntry? {
        guard !identity.digest.isEmpty else { return nil }
        let entries = try quarantined().filter { $0.digest == identity.digest }
        return entries.first { $0.path == identity.realPath } ?? entries.first
    }

    /// Lifts the quarantine of `path`: every entry recorded under that path, and every entry
    /// of the content the file there has now (a copy quarantined under another path); of every
    /// plugin when nil. Returns how many entries were removed.
    @discardableResult
    package func clearQuarantine(path: String?) throws(StorageError) -> Int {
        try database.transaction { () throws(StorageError) -> Int in
            if let path {
                let digest = SHA256.hex(ofFileAt: path, system: system) ?? ""
                try database.query("DELETE FROM quarantine WHERE path = ? OR (digest = ? AND digest != '')", [.text(path), .text(digest)])
            } else {
                try database.query("DELETE FROM quarantine")
            }
            return Int(clamping: try database.query("SELECT changes()").first?.first?.int ?? 0)
        }
    }

    // MARK: Chains a crash interrupted

    /// Records which record this session is running the chain over (nil: none), so a crash
    /// of the session names the record whose chain crashed.
    package func setChainRecord(_ rowID: Int64?, session: String) throws(StorageError) {
        try database.query(
            "UPDATE sessions SET chain_record = ? WHERE id = ?", [rowID.map(SQLValue.integer) ?? .null, .text(session)])
    }

    /// What a session was doing, if its mark is still there: its phase and the record whose
    /// chain it was running.
    package func sessionState(_ id: String) throws(StorageError) -> (phase: SessionPhase, chainRecord: Int64?)? {
        guard let row = try database.query("SELECT phase, chain_record FROM sessions WHERE id = ?", [.text(id)]).first else {
            return nil
        }
        return (row[0].string.flatMap(SessionPhase.init(rawValue:)) ?? .running, row[1].int)
    }

    /// Marks a record to be stored without the handler chain, with the reason.
    package func skipChain(_ rowID: Int64, reason: String) throws(StorageError) {
        try database.query("UPDATE reports SET skip_chain = ? WHERE rowid = ?", [.text(reason), .integer(rowID)])
    }

    /// Why a record must be stored without the chain, if it must.
    package func skipChainReason(_ rowID: Int64) throws(StorageError) -> String? {
        try database.query("SELECT skip_chain FROM reports WHERE rowid = ?", [.integer(rowID)]).first?.first?.string
    }

    /// `quarantine --clear [PATH]` on the repository in `folder`: the rows go in one
    /// transaction on a connection of its own, which waits for a primary's write like any
    /// other (another process may hold the repository and go on), and creates or migrates
    /// nothing. nil when the folder holds no repository.
    package static func clearQuarantine(inFolder folder: URL, path: String?, system: SystemCalls) throws(StorageError) -> Int? {
        let databasePath = folder.appendingPathComponent(databaseName).path
        guard system.fileExists(databasePath) else { return nil }
        let repository = Repository(folder: folder, database: try Database(path: databasePath, create: false), system: system)
        _ = try repository.storedSchemaVersion()
        return try repository.clearQuarantine(path: path)
    }
}
