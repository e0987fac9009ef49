import FoundationEssentials
import Glibc
import HostModel
import HostSupport
import HostStore

/// Gets stored reports to the server under the rules of SPEC D-5 … D-11: an initial attempt
/// for every new record (even with retry behaviour `none`), native reports oldest first ahead
/// of the retry backlog, the shared local admission window, and the outcome rules.
///
/// It never sleeps: what is not admissible now stays stored for a later pass (SPEC I-3).
package struct Deliverer: Sendable {
    package let repository: Repository
    package let configuration: Configuration
    package let transport: any SubmissionTransport
    package let logger: HostLogger
    package let now: @Sendable () -> Date
    /// Writes the request bodies (tests inject a full disk here).
    let system: SystemCalls
    /// Fault points armed for tests (none in production).
    let faults: Faults
    /// A secondary session's id: its passes send only the initial attempts of its own reports
    /// (SPEC I-2); nil for the primary.
    let ownSession: String?

    package init(
        repository: Repository, configuration: Configuration, transport: any SubmissionTransport, logger: HostLogger,
        now: (@Sendable () -> Date)? = nil, system: SystemCalls? = nil,
        faults: Faults = Faults(), ownSession: String? = nil
    ) {
        // The repository's seam and wall clock unless a test hands others.
        let system = system ?? repository.system
        self.ownSession = ownSession
        self.repository = repository
        self.configuration = configuration
        self.transport = transport
        self.logger = logger
        self.now = now ?? { system.now() }
        self.system = system
        self.faults = faults
    }

    /// What a pass did.
    package struct Summary: Sendable, Equatable {
        package var accepted = 0
        package var retained = 0
        package var terminal = 0
        /// Stopped by the local admission window; the rest stay eligible.
        package var rateLimited = false
        /// Reports whose request could not be built (a full disk): they stay as they were,
        /// due again at once, so a loop must not come straight back (`earliestNextPass`).
        package var notBuilt = 0
        /// Reports held because the submission configuration failed (D-9).
        package var held = 0

        package init() {}
    }

    /// Initial attempts, oldest first, native reports ahead of the others (D-6); with
    /// `retries`, then the due retries in `retry.order` (only under behaviour `interval`).
    package func deliver(retries: Bool) throws(HostError) -> Summary {
        let summary = try deliverReports(retries: retries)
        // Then the metric events (the primary's): a report never waits behind them.
        if ownSession == nil { _ = try sendMetrics() }
        return summary
    }

    private func deliverReports(retries: Bool) throws(HostError) -> Summary {
        var summary = Summary()
        guard let text = configuration.submission.endpoint else {
            logger.debug("no submission URL or DSN configured: reports stay awaiting_first_attempt")
            return summary
        }
        let url: SubmissionURL
        do {
            url = try LibcurlURL.check(text, allowInsecure: configuration.submission.allowInsecure)
        } catch {
            // A configuration failure is never final (D-9): the reports are held with the
            // reason, and a fixed configuration releases them.
            for group in dueGroups(retries: retries) {
                let records = try storing { () throws(StorageError) in try repository.page(of: group, after: nil, limit: Int.max) }
                for record in records {
                    try storing { () throws(StorageError) in try repository.hold(record.rowID, .configuration(error.description)) }
                    summary.held += 1
                }
            }
            if summary.held > 0 { logger.error("\(error): \(summary.held) report(s) held until the configuration is fixed") }
            return summary
        }
        // The DSN read once a pass: every body of the pass is an envelope, or none is.
        let destination = Destination(url: url, sentry: sentry)
        if destination.sentry != nil, let until = SentryRateLimits.limited(url.url.absoluteString, now: now()) {
            logger.info("the Sentry server limits reports (X-Sentry-Rate-Limits): none is sent before \(ReportDocument.timestamp(until))")
            summary.rateLimited = true
            return summary
        }
        let released = try storing { () throws(StorageError) in try repository.releaseConfigurationHolds(now: now()) }
        if released > 0 { logger.info("submission configuration valid again: \(released) held report(s) released") }
        let groups = dueGroups(retries: retries)
        // The retries due at the pass's start, read before anything is sent: a report that
        // fails during the pass is not due again in it.
        var dueRetries: [Repository.Summary] = []
        for group in groups where group.state == .retry {
            dueRetries += try storing { () throws(StorageError) in try repository.page(of: group, after: nil, limit: Int.max) }
        }
        for group in groups where group.state == .awaitingFirstAttempt {
            var last: Repository.Summary?
            while true {
                let page = try storing { () throws(StorageError) in try repository.page(of: group, after: last, limit: Self.pageSize) }
                guard try sendAll(page, to: destination, into: &summary) else { return summary }
                guard page.count == Self.pageSize else { break }
                last = page.last
            }
        }
        _ = try sendAll(dueRetries, to: destination, into: &summary)
        return summary
    }

    /// How many records awaiting their first attempt a pass reads at a time.
    static let pageSize = 64

    /// `records` in windows of `windowSize`; false when the pass must stop.
    /// Where a pass sends: the URL, and the DSN when the bodies are Sentry envelopes.
    private struct Destination {
        let url: SubmissionURL
        let sentry: SentryDSN?
    }

    private func sendAll(_ records: [Repository.Summary], to destination: Destination, into summary: inout Summary) throws(HostError) -> Bool {
        for start in stride(from: 0, to: records.count, by: Self.windowSize) {
            let window = Array(records[start..<min(records.count, start + Self.windowSize)])
            guard try send(window, to: destination, into: &summary) else { return false }
        }
        return true
    }

    /// How many requests a pass has on the wire at once, over kept-alive connections.
    package static let requestsInFlight = 4

    /// How many attempts are admitted together (one flush) and settled together (one commit);
    /// their requests go out `requestsInFlight` at a time, a new one as soon as one ends. A
    /// kill or a stop during a window counts each of its attempts as interrupted, at most this
    /// many.
    package static let windowSize = 16

    /// What a pass sends, in order, each group finished before the next starts: initial
    /// attempts of native reports oldest first, then of the others (D-6); with `retries` under
    /// behaviour `interval`, the retries due in `retry.order`. Read from the columns through the
    /// index on state; initial attempts a page at a time: the first request waits for one
    /// page, whatever the backlog.
    private func dueGroups(retries: Bool) -> [Repository.DueGroup] {
        var groups = [true, false].map { Repository.DueGroup(state: .awaitingFirstAttempt, natives: $0, session: ownSession) }
        if retries && ownSession == nil && configuration.retry.behaviour == .interval {
            var due = Repository.DueGroup(state: .retry)
            due.dueBy = (now(), configuration.retry.intervalSeconds)
            due.newestFirst = configuration.retry.order == .stack
            groups.append(due)
        }
        return groups
    }

    /// When a retry record is due under behaviour `interval`: its stored time, or, for one kept
    /// under `none` (no time stored), its failure time plus the interval (D-5, D-11), so
    /// nothing kept under `none` is stranded once retries are allowed again.
    private func retryDue(_ record: Repository.Summary) -> Date {
        record.nextAttemptAt ?? record.updatedAt.addingTimeInterval(TimeInterval(configuration.retry.intervalSeconds))
    }

    /// One window of attempts: each body is built, the window admitted in one flushed
    /// transaction (the only flush a delivered report costs: it also makes every earlier
    /// commit of the record durable before anything leaves the machine), the requests sent
    /// together, and the outcomes settled in one commit (a record with attachment copies in
    /// one of its own, which flushes before the copies are deleted). False when the pass must
    /// stop (the local window is full, or the host is stopping).
    private func send(_ window: [Repository.Summary], to destination: Destination, into summary: inout Summary) throws(HostError) -> Bool {
        let (url, sentry) = (destination.url, destination.sentry)
        let built = try bodies(for: window, sentry: sentry, into: &summary)
        defer { for item in built { if case .file(let file) = item.body.content { system.unlink(file.path) } } }
        guard !built.isEmpty else { return true }
        let admissions = try storing { () throws(StorageError) in
            try repository.admit(built.map(\.record.rowID), perMinute: configuration.reportsPerMin, now: now())
        }
        let admitted = zip(built, admissions).filter { $0.1 == .admitted }.map(\.0)
        if let limited = zip(built, admissions).first(where: { $0.1 == .rateLimited })?.0.record {
            summary.rateLimited = true
            logger.info("local rate limit (\(configuration.reportsPerMin)/min) reached: \(limited.reportID) stays \(limited.state.rawValue)")
        }
        guard !admitted.isEmpty else { return !summary.rateLimited }
        faults.hit(.duringSubmit)
        for item in admitted { logger.debug("submitting \(item.record.reportID) to \(url.redacted)") }
        let results = transport.post(
            admitted.map(\.body), to: url.url, inFlight: Self.requestsInFlight, timeoutMs: configuration.submission.timeoutMs)
        let outcomes = zip(admitted, results)
        let limits = sentry == nil ? [] : results.compactMap { result -> TimeInterval? in
            if case .response(_, let after?) = result { return after }
            return nil
        }
        if let longest = limits.max() { SentryRateLimits.limit(url.url.absoluteString, for: longest, now: now()) }
        try storing { () throws(StorageError) in
            try repository.settling { () throws(StorageError) in
                for (item, result) in outcomes where !item.hasCopies {
                    try settle(item.record, attempts: item.record.attempts + 1, result: result, into: &summary)
                }
            }
            for (item, result) in outcomes where item.hasCopies {
                try settle(item.record, attempts: item.record.attempts + 1, result: result, into: &summary)
            }
        }
        // A Sentry server's limit holds the rest; the host is stopping: no further attempt in this pass.
        if !limits.isEmpty { summary.rateLimited = true }
        return !summary.rateLimited && !results.contains(.cancelled)
    }

    /// A record of a window with its request body.
    private struct Attempt {
        let record: ReportRecord
        let body: RequestBody
        /// Whether the record has attachment copies (its outcome is settled on its own).
        let hasCopies: Bool
    }

    /// Each record of `window` read whole, with its request body built. The bodies are built
    /// before admission: a local file problem costs no attempt. A row another process changed
    /// or damaged is skipped.
    private func bodies(for window: [Repository.Summary], sentry: SentryDSN?, into summary: inout Summary) throws(HostError) -> [Attempt] {
        var built: [Attempt] = []
        for item in window {
            guard let record = try storing({ () throws(StorageError) in try repository.record(item.rowID) }) else { continue }
            let file = repository.folder.appendingPathComponent("outgoing-\(record.rowID).multipart", isDirectory: false)
            do {
                built.append(try body(record, file: file, sentry: sentry))
            } catch {
                system.removeItem(file.path)
                logger.error("report \(record.reportID) not sent: cannot build the request (\(error)); it stays \(record.state.rawValue)")
                summary.notBuilt += 1
            }
        }
        return built
    }

    /// The DSN reports go to as Sentry envelopes (SPEC S-1); nil: Backtrace's multipart.
    var sentry: SentryDSN? {
        configuration.submission.dsn.flatMap { try? SentryDSN($0, allowInsecure: configuration.submission.allowInsecure) }
    }

    /// The multipart body (a Sentry envelope with a DSN): in memory without attachment copies,
    /// else written to `file` with each copy streamed into it. A copy that went missing is left
    /// out with a diagnostic in the report (D-3: it does not block the payload).
    private func body(_ record: ReportRecord, file: URL, sentry: SentryDSN?) throws(StorageError) -> Attempt {
        var document = record.document
        // What the document says of each copy was stored with it: no copy is read or hashed
        // here, and each streams from its file through one bounded buffer.
        let files = try repository.attachmentFiles(of: record.rowID)
        // A copy counts as present when it is a regular file within the attachment limit.
        let present = files.filter { copy in
            guard case .success(let file) = system.openRegular(copy.file.path) else { return false }
            system.close(file.fd)
            return file.size <= Int64(ReportContent.attachmentMaxBytes)
        }
        for missing in files where !present.contains(where: { $0.file == missing.file }) {
            document.internalLog.append(InternalLogEntry(
                level: .warn, handler: "host",
                message: "attachment copy \(missing.attachment.name) is missing, unreadable, not a regular file or over 3 MB: omitted"))
        }
        document.content.attachments = present.map(\.attachment)
        if let sentry {
            return try envelope(record, document: document, copies: present.map { ($0.attachment.filename, $0.file) }, file: file,
                                dsn: sentry, hasCopies: !files.isEmpty)
        }
        let multipart = MultipartBody()
        let json = BacktraceReport.json(document, crash: record.crash, sendChanges: configuration.privacy.sendChanges)
        let inline = BacktraceReport.breadcrumbsPart(document).map { [$0] } ?? []
        guard !present.isEmpty else {
            return Attempt(
                record: record, body: RequestBody(contentType: multipart.contentType, bytes: multipart.bytes(json: json, inline: inline)),
                hasCopies: !files.isEmpty)
        }
        try multipart.write(
            json: json, inline: inline, attachments: present.map { ($0.attachment.name, $0.attachment.filename, $0.file) }, to: file,
            system: system)
        return Attempt(record: record, body: RequestBody(contentType: multipart.contentType, file: file), hasCopies: true)
    }

    /// The Sentry envelope of a record (SPEC S-2): in memory, or written to `file` with its copies.
    private func envelope(
        _ record: ReportRecord, document: ReportDocument, copies: [(filename: String, file: URL)], file: URL, dsn: SentryDSN,
        hasCopies: Bool
    ) throws(StorageError) -> Attempt {
        let release = configuration.release ?? document.content.attributes["version"]
        let event = SentryEvent.json(document, crash: record.crash, release: release, sendChanges: configuration.privacy.sendChanges)
        let id = SentryEvent.eventID(document.id)
        // A crash or an abnormal exit ends its session so (SPEC B-2, counted as Sentry does).
        let attributes = document.content.attributes
        let ended = [Trigger.crash: "crashed", .abnormalExit: "abnormal"][document.trigger].flatMap { status in
            attributes["application.session"].flatMap { session in
                SentryEnvelope.sessionItem(session: session, installation: attributes["guid"], at: document.createdAt, status: status,
                                           initial: false, release: release)
            }
        }
        let items = ended.map { [$0] } ?? []
        guard !copies.isEmpty else {
            let bytes = SentryEnvelope.bytes(event: event, eventID: id, dsn: dsn, sentAt: now(), items: items)
            return Attempt(record: record, body: RequestBody(contentType: SentryEnvelope.contentType, bytes: bytes, header: dsn.authHeader),
                           hasCopies: hasCopies)
        }
        try SentryEnvelope.write(event: event, eventID: id, dsn: dsn, sentAt: now(), items: items, attachments: copies, to: file, system: system)
        return Attempt(record: record, body: RequestBody(contentType: SentryEnvelope.contentType, file: file, header: dsn.authHeader),
                       hasCopies: true)
    }

    /// The outcome rules of D-9 and the retry policy of D-5 and D-11.
    private func settle(_ record: ReportRecord, attempts: Int, result: TransportResult, into summary: inout Summary) throws(StorageError) {
        let retryAfter: TimeInterval?
        let reason: String
        switch result {
        case .response(let status, let after) where (200..<300).contains(status):
            faults.hit(.afterAccept)
            try repository.finish(record.rowID, outcome: "accepted (HTTP \(status))", document: record.document)
            logger.info("report \(record.reportID) delivered (HTTP \(status))")
            summary.accepted += 1
            _ = after
            return
        case .response(let status, let after) where [408, 425, 429].contains(status) || (500..<600).contains(status):
            retryAfter = after
            reason = "HTTP \(status)"
        case .response(let status, _):
            try repository.finish(record.rowID, outcome: "rejected (HTTP \(status))", document: record.document)
            logger.warn("report \(record.reportID) rejected by the server (HTTP \(status)): terminal")
            summary.terminal += 1
            return
        case .transportFailure(let text):
            retryAfter = nil
            reason = text
        case .configurationFailure(let text):
            // Never an attempt, never terminal (D-9): held until the configuration changes.
            try repository.holdUnsent(record.rowID, .configuration("submission URL refused by libcurl: \(text)"))
            logger.error("report \(record.reportID) held: the submission URL cannot be used (\(text)); fix \(configuration.submission.endpointKey)")
            summary.held += 1
            return
        case .cancelled:
            // As a submission interrupted by a kill (D-9): the attempt counts, due again now.
            try retain(record, attempts: attempts, reason: "cancelled when the host stopped", retryAfter: nil, dueNow: true, into: &summary)
            return
        }
        try retain(record, attempts: attempts, reason: reason, retryAfter: retryAfter, into: &summary)
    }

    /// A retryable failure: retained for retry, or terminal once `retry.limit` retries failed.
    func retain(
        _ record: ReportRecord, attempts: Int, reason: String, retryAfter: TimeInterval?, dueNow: Bool = false,
        into summary: inout Summary
    ) throws(StorageError) {
        let terminal = try repository.retainOrFinish(
            record, attempts: attempts, reason: reason, retry: configuration.retry, retryAfter: retryAfter, dueNow: dueNow, now: now())
        if terminal { summary.terminal += 1 } else { summary.retained += 1 }
    }

    /// When a later pass may have work: the earliest retry due, or when the admission window
    /// lets an initial report in. nil when nothing waits on time (`launch --watch` sleeps
    /// until then).
    package func nextWake() throws(HostError) -> Date? {
        guard configuration.submission.isSet else { return nil }
        return try storing { () throws(StorageError) -> Date? in
            // The rows a pass would send, read as `deliver` reads them: a damaged row it skips
            // must not make the wake-up due for ever (a watch loop would spin on it).
            let records = try repository.summaries(in: [.awaitingFirstAttempt, .retry])
            var times: [Date] = []
            if configuration.retry.behaviour == .interval {
                times += records.filter { $0.state == .retry }.map(retryDue)
            }
            if records.contains(where: { $0.state == .awaitingFirstAttempt }) {
                times.append(try repository.nextAdmission(perMinute: configuration.reportsPerMin, now: now()) ?? now())
            }
            // Nothing goes to a Sentry server before its limit ends.
            if let endpoint = configuration.submission.endpoint, let until = SentryRateLimits.limited(endpoint, now: now()) {
                return times.min().map { max($0, until) }
            }
            return times.min()
        }
    }

    /// The pause after a pass whose requests could not be built (a local fault, such as a
    /// full disk, that the next pass would meet again).
    package static let localFaultPauseMs = 5_000

    /// When a loop of passes (`launch --watch`, an embedding program's worker) may run the
    /// next one: at `wake`, but never sooner than `localFaultPauseMs` after a pass that could
    /// not build a request, so a full disk is not retried in a busy loop. nil: no time set.
    package static func earliestNextPass(after pass: Summary, wake: Date?, now: Date) -> Date? {
        guard pass.notBuilt > 0 else { return wake }
        let floor = now.addingTimeInterval(Double(localFaultPauseMs) / 1000)
        return wake.map { max($0, floor) } ?? floor
    }

    /// D-9: the repository's step for records found `submitting` at launch, under this
    /// deliverer's retry policy and clock.
    package func settleInterrupted() throws(HostError) {
        try storing { () throws(StorageError) in try repository.settleInterruptedSubmissions(retry: configuration.retry, now: now()) }
    }
}
