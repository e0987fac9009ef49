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
        guard !purged.isEmpty else { return [] }
        let pending = try storing { () throws(StorageError) in try repository.records(in: [.pendingChain], rowIDs: purged, crashes: false) }
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
        let slots = host.currentSlots
        guard required.isEmpty, !slots.hasCallbacks else { return try settleOneByOne(settling[...], currentSession: currentSession) }
        // Nothing loaded to call: the recovered reports' chains go a batch per commit.
        var rest = settling[...]
        while let first = rest.first, !host.isInterrupted {
            let isRecovered = first.trigger.isRecovered
            var run = rest.prefix { $0.trigger.isRecovered == isRecovered }
            if isRecovered {
                run = run.prefix(Self.crashFilesPerBatch)
                documents += try finishEmptyChains(run, session: currentSession, slots: slots)
            } else {
                documents += try settleOneByOne(run, currentSession: currentSession)
            }
            rest = rest.dropFirst(run.count)
        }
        return documents
    }

    /// `settle`, a record at a time: a recovered report's chain is reopened in the commit
    /// that finishes the one before.
    private func settleOneByOne(_ settling: ArraySlice<ReportRecord>, currentSession: String) throws(HostError) -> [ReportDocument] {
        var documents: [ReportDocument] = []
        // The chain of the record about to run, reopened as the one before it finished.
        var reopened: Repository.ReopenedChain?
        for (index, record) in zip(settling.indices, settling) {
            // SIGINT or SIGTERM: the rest stay pending; the next launch finishes them (D-2). A
            // chain already reopened runs (its calls skipped) and finishes.
            if host.isInterrupted && reopened == nil { break }
            if record.trigger.isRecovered {
                let next = settling[(index + 1)...].first.flatMap { $0.trigger.isRecovered ? $0 : nil }
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
        let report = reopenedReport(record, chain: chain)
        let document: ReportDocument
        if !required.isEmpty, let withoutChain = chain.skipReason.map({ "the handler chain was skipped: \($0)" })
            ?? (chain.runs > Self.maxChainRuns ? "the handler chain ended the host \(chain.runs - 1) times" : nil)
        {
            // Sent without the chain would be sent without the required slot.
            try hold(record.rowID, id: newID, withoutChain, notes: [], chainEnded: false, session: session, rerun: rerun)
            _ = report.bundle()
            return (nil, nil)
        } else if noteSkippedChain(chain, on: report) {
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

    /// `record` as the report its chain runs again on (`chain`): its content with the host's
    /// attributes under its own, its internal log and trail continued.
    private func reopenedReport(_ record: ReportRecord, chain: Repository.ReopenedChain) -> LiveReport {
        let report = LiveReport(
            trigger: record.trigger, id: chain.id, createdAt: record.document.createdAt, hostID: host.hostID, hostLog: host.logger,
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
        return report
    }

    /// Whether `chain` must not run (a crash blamed it, or it ended the host too often),
    /// noting why on `report` when so.
    private func noteSkippedChain(_ chain: Repository.ReopenedChain, on report: LiveReport) -> Bool {
        if let skipReason = chain.skipReason {
            report.note(.warn, handler: "host", "sent without the handler chain: \(skipReason)")
            return true
        }
        guard chain.runs > Self.maxChainRuns else { return false }
        // Every earlier launch died in this chain (a plugin that crashes on this report):
        // without this, the report would keep every later launch from delivering anything.
        report.note(.warn, handler: "host", "the handler chain ended the host \(chain.runs - 1) times; the report is sent without it")
        return true
    }

    /// The chains of recovered reports (`records`) when nothing is loaded to call (`slots`
    /// has no handler and no delegate, and no slot is required): bundled one after the other
    /// under new ids and stored in one commit (`Repository.emptyChainsFinished`), where each
    /// took a commit of its own, most of a backlog's recovery. SPEC H-13 is about callbacks a
    /// kill interrupts; none runs here. A kill before the commit leaves every one
    /// `pending_chain` under its old id, and the next launch runs them again under new ones
    /// (D-1); after it, every one is finished. A crash in the host's own code on one of them
    /// is not blamed on it (no callback of its ran), as no crash elsewhere in the host is.
    private func finishEmptyChains(_ records: ArraySlice<ReportRecord>, session: String, slots: ReportHost.ChainSlots)
        throws(HostError) -> [ReportDocument]
    {
        var finished: [(rowID: Int64, document: ReportDocument)] = []
        let chains = try storing { () throws(StorageError) in try repository.emptyChains(records.map(\.rowID)) }
        for record in records where !host.isInterrupted {
            guard let chain = chains[record.rowID] else { continue }
            let report = reopenedReport(record, chain: chain)
            let document: ReportDocument
            if noteSkippedChain(chain, on: report) {
                document = report.bundle()
            } else {
                host.faults.hit(.duringHandlers)
                guard let run = try host.chain(report, mode: .recovered, slots: slots) else { continue }  // no dialog: never nil
                document = run.document
            }
            finished.append((record.rowID, document))
        }
        try storing { () throws(StorageError) in try repository.emptyChainsFinished(finished) }
        for run in finished { log.info("recovered \(run.document.trigger.name) report \(run.document.id)") }
        return finished.map(\.document)
    }
}
