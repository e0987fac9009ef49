import FoundationEssentials
import Glibc
import HostModel
import HostSupport
import HostPlugins
import HostStore

/// Collecting what the last processes left: interrupted purges, crash files, abnormal exits.
extension Recovery {
    /// D-2: a save whose purge was interrupted: purge now.
    func resumePurges() throws(StorageError) {
        let records = try repository.records(in: [.pendingPurge])
        if !records.isEmpty { try purge(records.map { ($0.crashFile, .new($0.rowID)) }) }
    }

    /// D-1 steps 1 and 2 for `paths`, oldest first, `batch` files at a time: each file's
    /// payload, attributes and attachment copies are saved in one transaction for the batch
    /// (flushed), then the files are unlinked with one folder sync, then the records are
    /// marked purged in one transaction. That last commit does not wait for the disk: a power
    /// loss before the next flush leaves them `pending_purge`, and `resumePurges` finds their
    /// files gone and marks them again. A file that cannot be read is set aside on its own.
    /// Returns the names of the files saved.
    ///
    /// A backlog of several batches is a pipeline (`RecoveryBatches.swift`): batch k+1 is
    /// read and batch k-1 unlinked, each on a thread of its own, while batch k is saved here.
    /// Then batch k-1's records, marked purged, are given to `chains` (D-1 step 3), while
    /// batch k's files are unlinked and batch k+1 is still read; the last batch's are left for
    /// `finishChains`. A backlog of one batch is read and saved on this thread; one batch of
    /// fewer than 32 files makes every call on it, in one order (a failure sweep counts them).
    func saveCrashFiles(
        _ paths: [String], watched: ProgramExit?, batch: Int, chains: ([Int64]) throws(HostError) -> Void = { _ in }
    ) throws(HostError) -> [String] {
        var saved: [String] = []
        // Oldest first; files written in the same nanosecond (or with a clock stepped back) in
        // the order of their names, so the order never depends on the clock alone.
        let files = paths.map { (path: $0, modified: Self.modificationDate($0, system: repository.system)) }
            .sorted { ($0.modified, $0.path) < ($1.modified, $1.path) }
        let batch = max(1, batch)
        let batches = stride(from: 0, to: files.count, by: batch).map { files[$0..<min(files.count, $0 + batch)] }
        var reader = CrashReader(watched: watched)
        var pipeline = BatchPipeline(system: repository.system, host: host)
        // Waited for on every way out: no read or unlink outlives the call (a failed save waits
        // for the next batch's read to end first).
        defer { pipeline.wait() }
        for (index, files) in batches.enumerated() {
            let read = pipeline.takeRead() ?? pipeline.read(files)
            if index + 1 < batches.count, !host.isInterrupted { pipeline.startReading(batches[index + 1]) }
            let purge = try storing { () throws(StorageError) in try save(read, reader: &reader) }
            guard !purge.isEmpty else { continue }
            let unlinked = pipeline.takeUnlinked()
            if let unlinked { try storing { () throws(StorageError) in try markPurged(unlinked) } }
            if index + 1 < batches.count {
                pipeline.startUnlinking(purge)
            } else {
                try storing { () throws(StorageError) in try self.purge(purge) }
            }
            if let unlinked { try chains(unlinked) }
            saved += purge.compactMap { $0.path.map(LocalPaths.fileName) }
        }
        if let unlinked = pipeline.takeUnlinked() { try storing { () throws(StorageError) in try markPurged(unlinked) } }
        if host.isInterrupted && saved.count < files.count {
            log.info("interrupted: \(files.count - saved.count) crash file(s) left for the next launch")
        }
        return saved
    }

    /// One batch's crash files, read: each saved as a record (or counted on one), or set
    /// aside when it cannot be read. Returns the files to purge, each with its record.
    private func save(_ read: [ReadCrash], reader: inout CrashReader) throws(StorageError) -> [(path: String?, record: Repository.CrashSaved)] {
        var saves: [(save: Repository.CrashSave, crash: CrashFile)] = []
        for item in read {
            switch item.outcome {
            case .success(let found): saves.append((try reader.save(found, path: item.path, recovery: self), found.crash))
            case .failure(let rejection) where rejection.vanished: log.debug("crash file \(item.path) went before it was read: skipped")
            case .failure(let rejection) where rejection.transient:
                log.warn("crash file \(item.path) could not be read now (\(rejection.reason)): left for the next launch")
            case .failure(let rejection): try reject(item.path, because: rejection.reason, modified: item.modified)
            }
        }
        guard !saves.isEmpty else { return [] }
        let records = try repository.saveCrashes(saves.map(\.save))
        log.debug("\(records.count) crash file(s) saved as records \(records.first?.rowID ?? 0)…\(records.last?.rowID ?? 0)")
        for (item, record) in zip(saves, records) {
            switch record {
            case .new(let rowID): try skipChainsTheCrashInterrupted(item.crash, record: rowID)
            case .counted(on: let rowID): log.info("crash file \(item.save.crashFile) is the same crash as record \(rowID): counted on it")
            }
        }
        host.faults.hit(.afterSave)
        return zip(saves, records).map { (path: Optional($0.save.crashFile), record: $1) }
    }

    /// Turns the crash files of one recovery, read and symbolicated, into saves, with what they
    /// share: each session's registered attachments, breadcrumbs and release.
    private struct CrashReader {
        let watched: ProgramExit?
        var registered: [String: [String: FileIdentity]] = [:]
        /// Each crashed session's breadcrumbs, read from its ring once.
        var breadcrumbs: [String: [Breadcrumb]] = [:]
        /// Each crashed session's release (SPEC B-2), read from the history once.
        var releases: [String: String] = [:]

        init(watched: ProgramExit?) { self.watched = watched }

        /// The report `crash` (read from `path`) becomes, its plugin quarantined when at fault.
        mutating func save(_ found: ReadCrash.Found, path: String, recovery: Recovery) throws(StorageError) -> Repository.CrashSave {
            let crash = found.crash
            let culprit = try recovery.quarantineCulprit(of: crash)
            let program = watched.flatMap { $0.session == crash.session ? $0 : nil }
            var attachments: [String: FileIdentity] = [:]
            if let session = crash.session {
                if registered[session] == nil { registered[session] = try recovery.repository.crashAttachments(of: session) }
                attachments = registered[session] ?? [:]
            }
            var document = FoundReports.crash(
                crash, culprit: culprit, program: program, unsymbolicated: found.refusals, registered: attachments,
                system: recovery.repository.system)
            if program == nil, let session = crash.session {
                if breadcrumbs[session] == nil { breadcrumbs[session] = recovery.breadcrumbs(of: session) }
                document.content.breadcrumbs = breadcrumbs[session] ?? []
            }
            // The files it carries, its release and its attributes are part of what makes it the
            // same crash: one of another release, or with other files or attributes, is kept
            // whole, never counted on a record that lacks what differs.
            if let session = crash.session, releases[session] == nil {
                releases[session] = try recovery.repository.release(ofSession: session) ?? ""
            }
            let release = crash.session.flatMap { releases[$0] } ?? ""
            let attributes = crash.attributes.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            let fingerprint = found.fingerprint.map { frames in
                ([frames, "release=\(release)"] + attributes + document.content.attachments.map { "\($0.name):\($0.sha256)" })
                    .joined(separator: "\n")
            }
            return Repository.CrashSave(
                document: document, serializedCrash: found.payload, crashFile: path, session: crash.session,
                fingerprint: fingerprint)
        }
    }

    /// The crash files in `crashes/` whose name `include` accepts, by path. Names are filtered
    /// before any path is made: a start looks at a backlog's names only.
    func crashFiles(named include: (String) -> Bool = { _ in true }) -> [String] {
        let folder = repository.crashesFolder
        let names = repository.system.entries(ofFolder: folder.path) ?? []
        // A name from the folder has no slash: joined as text, not through a URL per file.
        let prefix = folder.path.hasSuffix("/") ? folder.path : folder.path + "/"
        return names.filter { name in
            (name.hasSuffix(".crash") || name.hasSuffix(".crash.partial")) && include(name) && !CrashFile.isBeingWritten(name, system: repository.system)
        }.map { prefix + $0 }
    }

    /// A watched program that went on after a fault and ended normally survived it
    /// (its own handler recovered, e.g. a runtime that uses SIGSEGV on purpose): its own
    /// crash files are not crashes. Each is deleted with a debug line. Those of a process it
    /// forked (same session, another pid) are reports: a worker's crash is one whatever its
    /// master's status.
    func discardCrashFiles(of program: ProgramExit) throws(StorageError) {
        for path in crashFiles(named: program.wrote) {
            guard repository.system.unlink(path) == 0 else {
                throw StorageError(path: path, message: "cannot discard the crash file (\(String(cString: strerror(errno))))")
            }
            log.debug("crash file \(path) discarded: \(program.program) survived the fault and exited with status 0")
        }
        DurableFile.syncDirectory(repository.crashesFolder, system: repository.system)
    }

    /// A file in `crashes/` that cannot be read as a crash file (not a regular file, too large,
    /// no header, an I/O error): kept aside in `crashes/rejected/`, never read again, and
    /// reported as a crash report saying what could be read, so nothing is silently dropped
    /// and nothing is retried forever.
    func reject(_ path: String, because reason: String, modified: Date) throws(StorageError) {
        let rejected = repository.crashesFolder.appendingPathComponent("rejected")
        let system = repository.system
        _ = Paths.makeFolder(rejected.path, system: system)
        let name = LocalPaths.fileName(path)
        let aside = rejected.appendingPathComponent("\(Int64(system.now().timeIntervalSince1970))-\(name)").path
        if case .failure(let error) = system.rename(path, aside) {
            if error.errno == ENOENT && system.access(path, F_OK) != 0 { return }  // gone meanwhile: nothing to set aside or report
            // It cannot even be moved: it must not be found again on every launch.
            guard system.unlink(path) == 0 || errno == ENOENT else {
                // Never the end of the command (another launch may hold it, a folder may be
                // read-only): the next launch tries again.
                log.error("crash file \(path) could not be read (\(reason)), moved or removed (\(String(cString: strerror(errno)))): left in place")
                return
            }
        }
        DurableFile.syncDirectory(repository.crashesFolder, system: system)
        let moved = system.fileExists(aside)
        // The report names the file by its name; the local log says where it is.
        let kept = moved ? "kept as crashes/rejected/\(LocalPaths.fileName(aside))" : "removed: it could not be moved"
        try repository.saveFound(FoundReports.unreadableCrashFile(named: name, reason: reason, kept: kept, modified: modified, now: system.now()))
        log.warn("crash file \(path) could not be read (\(reason)); \(moved ? "kept as \(aside)" : kept)")
    }

    /// Quarantines the plugin a crash happened in, when the plugin (not host code it called
    /// back into) was at fault; returns the entry.
    func quarantineCulprit(of crash: CrashFile) throws(StorageError) -> QuarantineEntry? {
        guard let plugin = crash.plugin, !plugin.digest.isEmpty else { return nil }
        // The program that crashed is the first module of its map; its code is the host's.
        guard crash.blamesPlugin(hostModules: Set(crash.modules.prefix(1).map(\.path))) else {
            log.warn("the host crashed (SIG\(crash.signalName)) in its own code during \(plugin.displayName).\(plugin.callback); the plugin is not quarantined")
            return nil
        }
        let entry = QuarantineEntry(
            path: plugin.path, name: plugin.displayName, digest: plugin.digest, signal: crash.signalName,
            callback: plugin.callback, at: crash.time)
        try repository.quarantine(entry)
        log.warn("plugin \(plugin.displayName) (\(plugin.path)) crashed the host with SIG\(crash.signalName) in \(plugin.callback): quarantined")
        return entry
    }

    /// A crash of a session that was recovering ended that launch while it ran the chain over
    /// recovered reports: neither that crash nor the report whose chain crashed goes through
    /// the chain again (whatever the cause: a crash loop otherwise).
    func skipChainsTheCrashInterrupted(_ crash: CrashFile, record rowID: Int64) throws(StorageError) {
        // Only a crash while a recovered report's chain ran: an embedding program recovers in
        // the background, and its own crash then has nothing to do with the recovery.
        guard let session = crash.session, let state = try repository.sessionState(session), state.phase == .recovering,
            let interrupted = state.chainRecord
        else { return }
        try repository.skipChain(rowID, reason: "the crash happened while the host was recovering earlier reports")
        try repository.skipChain(interrupted, reason: "the handler chain over this report crashed the host (SIG\(crash.signalName))")
    }

    /// D-1 step 2 for saved records: their crash files are unlinked, the folder synced once,
    /// and the records marked purged in one transaction. A file that cannot be unlinked leaves
    /// its record `pending_purge` (the others are marked; the next launch tries again), with an
    /// error logged: never the end of the command.
    /// A file counted on another record (`.counted`) is only unlinked: its record is not its
    /// own. A kill before that unlink counts the file again at the next launch: a count too
    /// high by one, never a crash lost.
    func purge(_ saved: [(path: String?, record: Repository.CrashSaved)]) throws(StorageError) {
        try markPurged(Self.unlink(saved, system: repository.system, log: log))
    }

    /// A purge's first half, on any thread: unlinks the files, then syncs their folders once.
    /// Returns the records to mark purged: the new ones whose file is gone.
    ///
    /// An unlink waits for the disk to free the file's blocks (to discard them, on a disk
    /// mounted so): a batch's files are unlinked by up to `unlinkers` threads at once, whose
    /// waits overlap (a thousand files took 135 ms on one thread, 60 on four). Fewer than 32
    /// files are unlinked on the calling thread alone.
    static func unlink(_ saved: [(path: String?, record: Repository.CrashSaved)], system: SystemCalls, log: HostLogger) -> [Int64] {
        let parts = max(1, min(unlinkers, saved.count / 16))
        let size = (saved.count + parts - 1) / parts
        let slices = stride(from: 0, to: saved.count, by: max(1, size)).map { saved[$0..<min(saved.count, $0 + size)] }
        let others = slices.dropFirst().map { slice in Overlapped(name: "rh-unlink") { unlinkEach(slice, system: system, log: log) } }
        let unlinked = slices.prefix(1).map { unlinkEach($0, system: system, log: log) } + others.map { $0.result() }
        for folder in Set(unlinked.flatMap(\.folders)) { DurableFile.syncDirectory(URL(fileURLWithPath: folder), system: system) }
        return unlinked.flatMap(\.purged)
    }

    /// How many threads unlink one batch's files at most.
    static let unlinkers = 4

    private static func unlinkEach(
        _ saved: ArraySlice<(path: String?, record: Repository.CrashSaved)>, system: SystemCalls, log: HostLogger
    ) -> (purged: [Int64], folders: Set<String>) {
        var purged: [Int64] = []
        var folders: Set<String> = []
        for (path, record) in saved {
            if let path, system.unlink(path) != 0, errno != ENOENT {
                log.error("crash file \(path) saved but not purged (\(String(cString: strerror(errno)))): it is sent once a launch purges it")
                continue
            }
            if let path { folders.insert(Paths.folder(of: path)) }
            if case .new(let rowID) = record { purged.append(rowID) }
        }
        return (purged, folders)
    }

    /// A purge's second half, on the recovery's thread: the records marked purged.
    func markPurged(_ rowIDs: [Int64]) throws(StorageError) {
        try repository.crashFilesPurged(rowIDs)
        host.faults.hit(.afterPurge)
    }

    /// D-16: a session mark without a crash file of that session is an abnormal exit.
    func recordAbnormalExits(currentSession: String) throws(StorageError) {
        let ended = try repository.sessions(except: currentSession)
        // Read only when there is a session to look at: it reads every record.
        let sessionsWithCrashes = ended.isEmpty ? [] : try repository.sessionsWithCrashReports()
        for (session, startedAt, phase) in ended {
            // Another process on this repository (an embedding program's second copy) still runs it.
            if repository.isAlive(session) { continue }
            if !sessionsWithCrashes.contains(session) {
                // It died while running chains over recovered reports: running this one through
                // the same chain would likely end this launch too.
                let duringRecovery = phase == .recovering
                var document = FoundReports.abnormalExit(
                    session: session, startedAt: startedAt, duringRecovery: duringRecovery, exitCause: try repository.exitCause(of: session))
                document.content.breadcrumbs = breadcrumbs(of: session)
                try repository.saveFound(document, session: session, replacingSessionMark: true, runsChain: !duringRecovery)
                repository.system.removeItem(repository.breadcrumbsPath(session))
                log.info("session \(session) ended abnormally: recorded")
            } else {
                try repository.clearSession(session)
            }
        }
        try repository.removeLeftoverSessionFiles()
    }

    /// The last `breadcrumbs.max` breadcrumbs session `id` left in its ring (SPEC B-1), a
    /// slot a kill left half written skipped (logged).
    func breadcrumbs(of session: String) -> [Breadcrumb] {
        guard let ring = BreadcrumbRing.read(fileAt: repository.breadcrumbsPath(session), last: host.configuration.breadcrumbsMax, system: repository.system)
        else { return [] }
        if ring.torn > 0 { log.info("session \(session): \(ring.torn) breadcrumb(s) left half written by the end were skipped") }
        return ring.entries.map(Breadcrumb.init)
    }
}
