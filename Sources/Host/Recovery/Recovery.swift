import Foundation

/// What a launch finds and finishes before its own work (SPEC D-1, D-2, D-16, H-13), in
/// this order: interrupted purges, new crash files, abnormal exits, then every chain that
/// has not finished.
struct Recovery {
    let host: ReportHost
    let repository: Repository

    private var log: HostLogger { host.logger }

    func run(currentSession: String) throws(HostError) -> [ReportDocument] {
        try HostSession.storage { () throws(StorageError) in
            try resumePurges()
            try saveCrashFiles()
            try recordAbnormalExits(currentSession: currentSession)
        }
        return try finishChains()
    }

    /// D-2: a save whose purge was interrupted: purge now.
    private func resumePurges() throws(StorageError) {
        for record in try repository.records(in: [.pendingPurge]) {
            try purge(record.crashFile, record: record.rowID)
        }
    }

    /// D-1 steps 1 and 2 for every crash file: save payload, attributes and attachment copies,
    /// then purge the file. Files are taken oldest first.
    private func saveCrashFiles() throws(StorageError) {
        let folder = repository.crashesFolder
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        let files = names.filter { $0.hasSuffix(".crash") || $0.hasSuffix(".crash.partial") }
            .map { folder.appendingPathComponent($0).path }
            .map { ($0, Self.modificationDate($0)) }
            .sorted { $0.1 < $1.1 }
        for (path, modified) in files {
            guard let crash = CrashFile(path: path, modifiedAt: modified) else {
                let aside = path + ".unreadable"
                try? FileManager.default.moveItem(atPath: path, toPath: aside)
                log.warn("crash file \(path) is not a ReportHost crash file; kept as \(aside)")
                continue
            }
            let rowID = try repository.insert(
                document(for: crash), state: .pendingPurge, crash: crash.payload, crashFile: path, session: crash.session)
            log.debug("crash file \(path) saved as record \(rowID)")
            FaultPoint.afterSave.hit()
            try purge(path, record: rowID)
        }
    }

    private func purge(_ path: String?, record rowID: Int64) throws(StorageError) {
        if let path, FileManager.default.fileExists(atPath: path) {
            guard unlink(path) == 0 else {
                throw StorageError(path: path, message: "cannot purge the crash file (\(String(cString: strerror(errno))))")
            }
            DurableFile.syncDirectory(URL(fileURLWithPath: path).deletingLastPathComponent())
        }
        try repository.setState(rowID, .pendingChain)
        FaultPoint.afterPurge.hit()
    }

    /// The report a crash file becomes: its attributes, and copies of the attachments it
    /// names (a missing or unreadable one is omitted with a diagnostic, D-3).
    private func document(for crash: CrashFile) -> ReportDocument {
        var content = ReportContent()
        content.summary = "\(crash.signalName) (signal \(crash.signal), code \(crash.code)) at \(crash.address)"
        content.attributes = crash.attributes
        var notes: [InternalLogEntry] = []
        if !crash.complete {
            notes.append(InternalLogEntry(level: .warn, handler: "host", message: "the crash file was not complete; recovered what it held"))
        }
        for path in crash.attachmentPaths {
            if let data = FileManager.default.contents(atPath: path), !data.isEmpty, data.count <= ReportContent.attachmentMaxBytes {
                let name = URL(fileURLWithPath: path).lastPathComponent
                content.attachments.append(Attachment(name: name, filename: name, data: data, source: .recovered))
            } else {
                notes.append(InternalLogEntry(
                    level: .warn, handler: "host", message: "attachment \(path) is missing, empty, unreadable or over 3 MB: omitted"))
            }
        }
        return ReportDocument(
            id: UUID().uuidString.lowercased(), trigger: .crash, content: content, internalLog: notes, createdAt: crash.time)
    }

    /// D-16: a session mark without a crash file of that session is an abnormal exit.
    private func recordAbnormalExits(currentSession: String) throws(StorageError) {
        let sessionsWithCrashes = Set(try repository.records().compactMap { $0.trigger == .crash ? $0.session : nil })
        for (session, startedAt, phase) in try repository.sessions(except: currentSession) {
            if !sessionsWithCrashes.contains(session) {
                var content = ReportContent()
                content.summary = "The host exited abnormally (session \(session))"
                var notes = [InternalLogEntry(
                    level: .info, handler: "host",
                    message: "session \(session) started at \(ReportDocument.timestamp(startedAt)) never stopped cleanly")]
                // It died while running chains over recovered reports: running this one through
                // the same chain would likely end this launch too.
                let skipChain = phase == .recovering
                if skipChain {
                    notes.append(InternalLogEntry(
                        level: .warn, handler: "host", message: "the session ended during recovery; sent without the handler chain"))
                }
                let document = ReportDocument(
                    id: UUID().uuidString.lowercased(), trigger: .abnormalExit, content: content, internalLog: notes,
                    createdAt: startedAt)
                try repository.insert(
                    document, state: skipChain ? .awaitingFirstAttempt : .pendingChain, session: session, clearingSession: session)
                log.info("session \(session) ended abnormally: recorded")
            } else {
                try repository.clearSession(session)
            }
        }
    }

    /// Runs or settles every chain that has not finished: native reports get the chain in
    /// recovered mode under a new id (H-13); a running-app report goes as journaled, without
    /// its callbacks' changes; a dialog report the user had not sent is dropped.
    private func finishChains() throws(HostError) -> [ReportDocument] {
        var documents: [ReportDocument] = []
        let pending = try HostSession.storage { () throws(StorageError) in try repository.records(in: [.pendingChain]) }
        for record in pending {
            if record.trigger.isRecovered {
                documents.append(try rerunChain(record))
            } else if record.dialogPending {
                try HostSession.storage { () throws(StorageError) in try repository.delete(record.rowID) }
                log.info("dialog report \(record.reportID) was never sent by its user: dropped")
            } else {
                var document = record.document
                document.content.attachments = try HostSession.storage { () throws(StorageError) in try repository.attachments(of: record.rowID) }
                document.internalLog.append(InternalLogEntry(
                    level: .warn, handler: "host",
                    message: "the host stopped during the handler chain; the report is sent without the callbacks' changes"))
                try HostSession.storage { () throws(StorageError) in try repository.update(record.rowID, document: document, state: .awaitingFirstAttempt) }
                log.info("report \(record.reportID) recovered from the journal")
            }
        }
        return documents
    }

    /// A chain that ended the host this many times is not run again: the report goes without it.
    static let maxChainRuns = 3

    private func rerunChain(_ record: ReportRecord) throws(HostError) -> ReportDocument {
        let newID = UUID().uuidString.lowercased()
        let (attachments, runs) = try HostSession.storage { () throws(StorageError) -> ([Attachment], Int) in
            try repository.rekey(record.rowID, to: newID)
            return (try repository.attachments(of: record.rowID), try repository.countChainRun(record.rowID))
        }
        let report = LiveReport(
            trigger: record.trigger, id: newID, createdAt: record.document.createdAt, hostID: host.hostID, hostLog: host.logger)
        let hostAttributes = host.attributes.snapshot
        report.edit { content in
            content = record.document.content
            content.attributes = hostAttributes.merging(record.document.content.attributes) { _, crashed in crashed }
            content.attachments = attachments
        }
        for entry in record.document.internalLog { report.note(entry.level, handler: entry.handler, entry.message) }
        let document: ReportDocument
        if runs > Self.maxChainRuns {
            // Every earlier launch died in this chain (a plugin that crashes on this report):
            // without this, the report would keep every later launch from delivering anything.
            report.note(.warn, handler: "host", "the handler chain ended the host \(runs - 1) times; the report is sent without it")
            document = report.bundle()
        } else {
            FaultPoint.duringHandlers.hit()
            document = try host.runChain(report, mode: .recovered) ?? report.snapshot
        }
        try HostSession.storage { () throws(StorageError) in try repository.update(record.rowID, document: document, state: .awaitingFirstAttempt) }
        log.info("recovered \(document.trigger.name) report \(document.id)")
        return document
    }

    static func modificationDate(_ path: String) -> Date {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date) ?? Date()
    }
}
