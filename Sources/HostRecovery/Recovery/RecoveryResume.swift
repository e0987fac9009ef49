import FoundationEssentials
import Glibc
import HostModel
import HostSupport
import HostPlugins
import HostStore

/// Resuming what has not finished: chains, held reruns.
extension Recovery {
    /// Runs or settles every chain that has not finished: native reports get the chain in
    /// recovered mode under a new id (H-13); a running-app report goes as journaled, without
    /// its callbacks' changes; a dialog report the user had not sent is dropped.
    func finishChains(currentSession: String) throws(HostError) -> [ReportDocument] {
        let pending = try storing { () throws(StorageError) in try repository.records(in: [.pendingChain], crashes: false) }
        return try settle(pending, currentSession: currentSession)
    }

    /// The same for the crash reports of one batch, saved together (`purged`: those whose
    /// files are gone), as soon as they are purged.
    func finishChains(of purged: [Int64], currentSession: String) throws(HostError) -> [ReportDocument] {
        guard let first = purged.min(), let last = purged.max() else { return [] }
        let batch = Set(purged)
        let pending = try storing { () throws(StorageError) in
            try repository.records(in: [.pendingChain], rowIDs: first...last, crashes: false).filter { batch.contains($0.rowID) }
        }
        return try settle(pending, currentSession: currentSession)
    }

    /// Runs or settles the chains of `pending`, in order.
    private func settle(_ pending: [ReportRecord], currentSession: String) throws(HostError) -> [ReportDocument] {
        var documents: [ReportDocument] = []
        // A journal of this session, or of another process still running (an embedding
        // program raises while its recovery runs), is a chain in progress, not an interrupted one.
        // A backlog's records mostly come from a few sessions: each is looked at once.
        var alive: [String: Bool] = [currentSession: true]
        func isRunning(_ session: String) -> Bool {
            if let known = alive[session] { return known }
            let running = repository.isAlive(session)
            alive[session] = running
            return running
        }
        let settling = pending.filter { !($0.session.map(isRunning) ?? false) }
        // The chain of the record about to run, reopened as the one before it finished.
        var reopened: Repository.ReopenedChain?
        for (index, record) in settling.enumerated() {
            // SIGINT or SIGTERM: the rest stay pending; the next launch finishes them (D-2). A
            // chain already reopened runs (its calls skipped) and finishes.
            if host.isInterrupted && reopened == nil { break }
            if record.trigger.isRecovered {
                let next = settling.dropFirst(index + 1).first.flatMap { $0.trigger.isRecovered ? $0 : nil }
                let rerun = try rerunChain(record, session: currentSession, reopened: reopened, then: next)
                if let document = rerun.document { documents.append(document) }
                reopened = rerun.next
            } else if record.dialogPending {
                try storing { () throws(StorageError) in try repository.discard(record.rowID) }
                log.info("dialog report \(record.reportID) was never sent by its user: dropped")
            } else if !required.isEmpty {
                // Sent without the callbacks' changes (H-13) would be sent without the required slot.
                try hold(record.rowID, id: record.reportID, "the host stopped during the handler chain", notes: [], chainEnded: false)
            } else {
                var document = record.document
                document.content.attachments = try storing { () throws(StorageError) in try repository.attachments(of: record.rowID) }
                document.internalLog.append(InternalLogEntry(
                    level: .warn, handler: "host",
                    message: "the host stopped during the handler chain; the report is sent without the callbacks' changes"))
                try storing { () throws(StorageError) in try repository.chainFinished(record.rowID, document: document, flush: false) }
                log.info("report \(record.reportID) recovered from the journal")
            }
        }
        return documents
    }

    private var required: Set<PluginSlot> { host.configuration.requiredSlots }

    /// `plugins.required`: the chain of each report held for a required slot runs again, from
    /// the document it had before, once every required slot can run (a rebuilt plugin, a
    /// cleared quarantine), under the rules of its kind: a running-app report's completions
    /// are waited for as when it was raised. At most `limit` per call, oldest first, each only
    /// when its back-off allows: a rerun that ends held again waits `rerunBackoff` before the
    /// next. One whose chain ended the host `maxChainRuns` times in a row stays held.
    package func rerunHeldChains(currentSession: String, limit: Int = heldRerunsPerLaunch, now: Date? = nil) throws(HostError) -> [ReportDocument] {
        let now = now ?? repository.system.now()
        guard required.allSatisfy(host.canRun) else { return [] }
        var documents: [ReportDocument] = []
        let due = try storing { () throws(StorageError) in try repository.heldForRequired(dueBy: now, limit: limit) }
        for (record, chainRuns, reruns) in due where !host.isInterrupted {
            guard chainRuns < Self.maxChainRuns else { continue }
            log.info("report \(record.reportID) was held (\(record.held ?? "")); its required slots can run now: the chain runs again")
            let rerun = Rerun(next: now.addingTimeInterval(Self.rerunBackoff(afterReruns: reruns + 1)))
            if let document = try rerunChain(record, session: currentSession, releasingHold: true, rerun: rerun).document {
                documents.append(document)
            }
        }
        return documents
    }

    /// How many held reports one call of `rerunHeldChains` reruns at most: a backlog of held
    /// reports whose slot is slow costs a launch a few chains, not all of them.
    package static let heldRerunsPerLaunch = 4

    /// The wait before the next rerun of a report whose `reruns`-th rerun ended held again:
    /// a minute, doubling, at most a day.
    static func rerunBackoff(afterReruns reruns: Int) -> TimeInterval {
        min(60 * pow(2, Double(max(0, min(reruns, 20) - 1))), 86_400)
    }

    /// A rerun of a held report's chain: when the next may come if this one ends held again.
    struct Rerun {
        let next: Date
    }

    /// Holds `record` under `plugins.required`, noting why on it and in the host's log.
    func hold(
        _ rowID: Int64, id: String, _ reason: String, notes: [InternalLogEntry], chainEnded: Bool, session: String? = nil,
        rerun: Rerun? = nil
    ) throws(HostError) {
        try storing { () throws(StorageError) in
            try repository.holdForRequired(
                rowID, reason: reason, notes: notes, chainEnded: chainEnded, clearingChainOf: session, rerunAt: rerun?.next)
        }
        let again = rerun.map { "; rerun not before \(ReportDocument.timestamp($0.next))" } ?? ""
        log.warn("report \(id) held, not sent: \(reason)\(again)")
    }

    /// A chain that ended the host this many times is not run again: the report goes without it.
    static let maxChainRuns = 3

    /// The report's chain again under a new id (H-13): its document, nil when the report is
    /// held. `reopened`: its chain, reopened as the one before it finished. `next`: the
    /// recovered report to run after it, whose chain this one's end reopens (returned).
    func rerunChain(
        _ record: ReportRecord, session: String, releasingHold: Bool = false, rerun: Rerun? = nil,
        reopened: Repository.ReopenedChain? = nil, then next: ReportRecord? = nil
    ) throws(HostError) -> (document: ReportDocument?, next: Repository.ReopenedChain?) {
        // A crash from here on names this record as the one whose chain crashed.
        let chain: Repository.ReopenedChain
        if let reopened {
            chain = reopened
        } else {
            let reopening = Repository.ChainReopening(record.rowID, newID: randomUUID(), session: session, releasingHold: releasingHold)
            chain = try storing { () throws(StorageError) in try repository.reopenChain(reopening) }
        }
        let newID = chain.id
        let report = LiveReport(
            trigger: record.trigger, id: newID, createdAt: record.document.createdAt, hostID: host.hostID, hostLog: host.logger,
            events: host.events)
        let hostAttributes = host.attributes.snapshot
        report.edit { content in
            content = record.document.content
            content.attributes = hostAttributes.merging(record.document.content.attributes) { _, crashed in crashed }
            content.attachments = chain.attachments
        }
        for entry in record.document.internalLog { report.note(entry.level, handler: entry.handler, entry.message) }
        report.continueTrail(record.document.changes)
        host.noteQuarantine(on: report)
        let document: ReportDocument
        if !required.isEmpty, let withoutChain = chain.skipReason.map({ "the handler chain was skipped: \($0)" })
            ?? (chain.runs > Self.maxChainRuns ? "the handler chain ended the host \(chain.runs - 1) times" : nil)
        {
            // Sent without the chain would be sent without the required slot.
            try hold(record.rowID, id: newID, withoutChain, notes: [], chainEnded: false, session: session, rerun: rerun)
            _ = report.bundle()
            return (nil, nil)
        } else if let skipReason = chain.skipReason {
            report.note(.warn, handler: "host", "sent without the handler chain: \(skipReason)")
            document = report.bundle()
        } else if chain.runs > Self.maxChainRuns {
            // Every earlier launch died in this chain (a plugin that crashes on this report):
            // without this, the report would keep every later launch from delivering anything.
            report.note(.warn, handler: "host", "the handler chain ended the host \(chain.runs - 1) times; the report is sent without it")
            document = report.bundle()
        } else {
            host.faults.hit(.duringHandlers)
            // A held running-app report runs as one (its completions waited for), in a later
            // process than the one that raised it; a crash or an abnormal exit as recovered.
            let mode: ChainMode = rerun != nil && !record.trigger.isRecovered ? .runningApp : .recovered
            guard let run = try host.chain(report, mode: mode) else { return (nil, nil) }  // no dialog: never nil
            document = run.document
            if let unmet = run.unmet(required) {
                let notes = Array(document.internalLog.dropFirst(record.document.internalLog.count))
                try hold(record.rowID, id: newID, unmet, notes: notes, chainEnded: true, session: session, rerun: rerun)
                return (nil, nil)
            }
        }
        // Not flushed: the admission before its first attempt flushes it (see `chainFinished`).
        // Not interrupted: the next record's chain is reopened in the same commit.
        let nextChain = host.isInterrupted ? nil : next.map { Repository.ChainReopening($0.rowID, newID: randomUUID(), session: session) }
        let reopenedNext = try storing { () throws(StorageError) in
            try repository.chainFinished(record.rowID, document: document, session: session, flush: false, reopening: nextChain)
        }
        log.info("recovered \(document.trigger.name) report \(document.id)")
        return (document, reopenedNext)
    }
}
