import Foundation
@testable import Host
@testable import HostCapture
@testable import HostModel
@testable import HostSupport
@testable import HostDelivery
@testable import HostPlugins
@testable import HostRecovery
@testable import HostStore
import Receiver
import HostTestSupport
import Testing

/// Delivery (SPEC D-4 … D-11) against a real loopback receiver and a real SQLite repository.
@Suite struct DeliveryTests {
    let folder = makeTemporaryDirectory("delivery")
    let repository: Repository
    let log = MemoryDestination()

    init() throws {
        repository = try Repository.open(folder: folder.appendingPathComponent("repo"))
    }

    func receiver(_ script: [LocalReceiver.Response]) throws -> LocalReceiver {
        try LocalReceiver(folder: folder.appendingPathComponent("received-\(UUID().uuidString)"), script: script)
    }

    /// Answers 200 to every request and notes the order the requests were started in, by
    /// report id (the JSON's `uuid`).
    final class StartOrder: SubmissionTransport {
        let ids = Locked<[String]>([])

        func post(_ url: URL, body: RequestBody, timeoutMs: Int) -> TransportResult {
            let bytes: Data
            switch body.content {
            case .bytes(let inMemory): bytes = Data(inMemory)
            case .file(let file): bytes = (try? Data(contentsOf: file)) ?? Data()
            }
            let id = String(decoding: bytes, as: UTF8.self).firstMatch(of: /"uuid":"([0-9a-f-]+)"/).map { String($0.1) } ?? "none"
            ids.withLock { $0.append(id) }
            return .response(status: 200, retryAfter: nil)
        }
    }

    func deliverer(
        _ url: String?, now: Date = Date(), transport: any SubmissionTransport = CurlTransport(),
        _ configure: (inout Configuration) -> Void = { _ in }
    ) -> Deliverer {
        var configuration = Configuration()
        configuration.submission.url = url
        configuration.submission.timeoutMs = 2_000
        configuration.retry.intervalSeconds = 5
        configuration.reportsPerMin = 0
        configure(&configuration)
        return Deliverer(
            repository: repository, configuration: configuration, transport: transport,
            logger: HostLogger(destinations: [log]), now: { now })
    }

    @discardableResult
    func store(_ trigger: Trigger = .logError, summary: String = "s", created: Date = Date(), attachment: Data? = nil,
               state: RecordState = .awaitingFirstAttempt) throws -> ReportRecord {
        var content = ReportContent()
        content.summary = summary
        content.attributes = ["app": "demo"]
        content.labels = ["one"]
        if let attachment { content.attachments = [Attachment(name: "log.txt", filename: "log.txt", data: attachment, source: .extended)] }
        let document = ReportDocument(id: UUID().uuidString.lowercased(), trigger: trigger, content: content, internalLog: [], createdAt: created)
        let rowID = try repository.seedRecord(document, state: state)
        return try #require(try repository.records().first { $0.rowID == rowID })
    }

    func record(_ id: Int64) throws -> ReportRecord { try #require(try repository.records().first { $0.rowID == id }) }

    @Test("D-9: 2xx is terminal: the row stays with its outcome; payload and attachment copies are deleted")
    func accepted() throws {
        let server = try receiver([.status(200)])
        let stored = try store(attachment: Data("attached bytes".utf8))
        let summary = try deliverer(server.url).deliver(retries: false)
        #expect(summary.accepted == 1)
        let after = try record(stored.rowID)
        #expect(after.state == .terminal)
        #expect(after.outcome == "accepted (HTTP 200)")
        #expect(after.attempts == 1)
        #expect(after.document.content.summary == nil)
        #expect(try repository.attachments(of: stored.rowID).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: repository.attachmentsFolder.appendingPathComponent(String(stored.rowID)).path))
        // The wire format.
        let got = try #require(server.received.first)
        #expect(got.uuid == stored.reportID)
        #expect(got.attachments["log.txt"] == Data("attached bytes".utf8))
        #expect(got.query == "format=json&token=local-token")
        server.stop()
    }

    @Test("D-6, D-9: a pass keeps its connections open between reports, with at most four requests in flight, natives first")
    func keptConnections() throws {
        let server = try receiver([.status(200)])
        for index in 0..<12 { try store(summary: "error \(index)", created: Date(timeIntervalSinceNow: Double(index - 100))) }
        let crashes = try (0..<3).map { index in try store(.crash, summary: "crash \(index)", created: Date(timeIntervalSinceNow: Double(index - 50))) }
        let summary = try deliverer(server.url).deliver(retries: false)
        #expect(summary.accepted == 15)
        let counts = server.connectionCounts
        // One connection per request in flight, reused; a connection per report before.
        #expect(counts.accepted <= Deliverer.requestsInFlight, "\(counts.accepted) connections for 15 reports")
        #expect(counts.mostAtOnce <= Deliverer.requestsInFlight)
        // Natives go first (D-6): the first three received are the crashes, whatever order they finished in.
        #expect(Set(server.received.prefix(3).map(\.uuid)) == Set(crashes.map(\.reportID)))
        #expect(try repository.records().allSatisfy { $0.state == .terminal })
        server.stop()
    }

    @Test("I-7: records are found by state through an index, and listed from their columns as they read whole")
    func summariesThroughTheIndex() throws {
        try store(.crash, summary: "crash", created: Date(timeIntervalSinceNow: -10))
        let retried = try store(summary: "retried", state: .retry)
        try repository.retryLater(retried.rowID, reason: "HTTP 503", at: Date(timeIntervalSinceNow: 60))
        try repository.database.query("INSERT INTO reports(report_id, trigger, state, created_at, document, updated_at) VALUES('x', 'log_error', 'retry', 0, '{not json', 0)")
        let plan = try repository.database.query(
            "EXPLAIN QUERY PLAN SELECT rowid FROM reports WHERE state IN ('retry', 'awaiting_first_attempt') AND \(Repository.readable) ORDER BY created_at")
        #expect(plan.contains { row in row.contains { $0.string?.contains("INDEX readable_by_state") == true } }, "\(plan)")
        // It is the one index on state (each index is a page more for every write): the lookups
        // of whole records by state (the records a launch settles) go through it too, named
        // with INDEXED BY, which SQLite refuses rather than scan when the index does not apply.
        let onState = try repository.database.query("SELECT name FROM sqlite_master WHERE type = 'index' AND sql LIKE '%state%'")
        #expect(onState.map { $0[0].string } == ["readable_by_state"])
        #expect(try repository.records(in: [.retry]).map(\.rowID) == [retried.rowID])
        // The listing's index holds readable rows only: the damaged one is not in it.
        let indexed = try repository.database.query("SELECT COUNT(*) FROM reports INDEXED BY readable_by_state WHERE \(Repository.readable)")
        #expect(indexed.first?.first?.int == 2)
        let summaries = try repository.summaries()
        let records = try repository.records()
        #expect(summaries.count == 2 && records.count == 2, "the damaged row is in neither")
        for (summary, record) in zip(summaries, records) {
            #expect(summary.rowID == record.rowID && summary.reportID == record.reportID && summary.trigger == record.trigger)
            #expect(summary.state == record.state && summary.attempts == record.attempts && summary.bytes == record.bytes)
            #expect(summary.nextAttemptAt == record.nextAttemptAt && summary.outcome == record.outcome)
            #expect(ReportDocument.timestamp(summary.createdAt) == ReportDocument.timestamp(record.document.createdAt))
        }
        #expect(try repository.summaries(in: [.retry]).map(\.rowID) == [retried.rowID])
        #expect(try repository.unreadableRecords().map(\.reason) == ["record 3 holds an unreadable document"])
        // A document damaged in place leaves the index too, and is found.
        try repository.database.query("UPDATE reports SET document = '[]' WHERE rowid = ?", [.integer(retried.rowID)])
        #expect(try repository.summaries().count == 1)
        let unreadable = try repository.unreadableRecords()
        #expect(unreadable.map(\.rowID) == [retried.rowID, 3], "\(unreadable)")
        // Checking a row against the index's predicate (twice per update) builds no temporary table.
        let update = try repository.database.query("EXPLAIN UPDATE reports SET state = 'submitting' WHERE rowid = 1")
        #expect(!update.contains { row in row.contains { $0.string == "OpenEphemeral" } }, "\(update)")
    }

    @Test("I-7: a schema 9 repository (an index on state, and the readable index under an IN list of triggers) opens at schema 10 with one index on state, its records found as before")
    func schemaNineMigrates() throws {
        let stored = try store(summary: "kept")
        let triggers = Trigger.allCases.map { "'\($0.name)'" }.joined(separator: ", ")
        let older = Repository.readable.replacingOccurrences(
            of: Trigger.allCases.map { "trigger = '\($0.name)'" }.joined(separator: " OR "), with: "trigger IN (\(triggers))")
        #expect(older != Repository.readable)
        try repository.database.execute("""
            DROP INDEX readable_by_state; CREATE INDEX readable_by_state ON reports(state, created_at) WHERE \(older);
            CREATE INDEX reports_by_state ON reports(state, created_at); PRAGMA user_version = 9;
            """)
        let reopened = try Repository.open(folder: folder.appendingPathComponent("repo"))
        #expect(try reopened.database.query("PRAGMA user_version").first?.first?.int == Int64(Repository.schemaVersion))
        let definition = try reopened.database.query("SELECT sql FROM sqlite_master WHERE name = 'readable_by_state'").first?.first?.string
        #expect(definition?.contains("trigger IN") == false && definition?.contains("trigger = 'crash'") == true, "\(definition ?? "none")")
        #expect(try reopened.database.query("SELECT name FROM sqlite_master WHERE name = 'reports_by_state'").isEmpty, "schema 8's index is dropped")
        #expect(try reopened.summaries().map(\.reportID) == [stored.reportID])
        #expect(try reopened.records(in: [.awaitingFirstAttempt]).map(\.reportID) == [stored.reportID])
    }

    @Test("I: the wire format has Backtrace's fields and types; attributes are scalars; crash reports carry threads")
    func wireFormat() throws {
        let server = try receiver([.status(200)])
        try store(.logException, summary: "boom")
        try store(.abnormalExit, summary: "gone")
        _ = try deliverer(server.url).deliver(retries: false)
        #expect(server.received.count == 2)
        for got in server.received {
            let report = got.report
            #expect(report["uuid"]?.stringValue == got.uuid && got.uuid == got.uuid.lowercased())
            #expect(report["timestamp"]?.intValue != nil)
            #expect(report["lang"] == .string("swift") && report["agent"] == .string("reporthost"))
            #expect(report["langVersion"]?.stringValue?.isEmpty == false && report["agentVersion"]?.stringValue?.isEmpty == false)
            #expect(report["attributes"]?.objectValue?.allSatisfy { $0.1.stringValue != nil } == true)
            #expect(report["annotations"]?.objectValue != nil)
            #expect(report["classifiers"] == .array([.string("one")]))
            if report["attributes"]?["reporthost.trigger"] == .string("abnormal_exit") {
                let main = try #require(report["mainThread"]?.stringValue)
                #expect(report["threads"]?[main] != nil)
            } else {
                #expect(report["threads"] == nil)
                #expect(report["attributes"]?["error.message"] == .string("boom"))
            }
        }
        server.stop()
    }

    @Test("D-9: 408, 425, 429 and 5xx are retained for retry, not before Retry-After")
    func retryableStatuses() throws {
        for code in [408, 425, 429, 500, 503] {
            let server = try receiver([.status(code)])
            let now = Date(timeIntervalSince1970: 1_800_000_000)
            let stored = try store()
            // An interval of 0 s shows Retry-After (the receiver sends 1 s on 429 and 503) winning.
            _ = try deliverer(server.url, now: now) { $0.retry.intervalSeconds = 0 }.deliver(retries: false)
            let after = try record(stored.rowID)
            #expect(after.state == .retry, "\(code)")
            #expect(after.attempts == 1)
            #expect(after.outcome == "HTTP \(code)")
            let expected = [429, 503].contains(code) ? now.addingTimeInterval(1) : now
            #expect(abs((after.nextAttemptAt ?? .distantPast).timeIntervalSince(expected)) < 0.01, "\(code)")
            server.stop()
        }
    }

    @Test("D-9: Retry-After is read as seconds or as an HTTP date in any of its three forms (English names, never the locale); anything else is ignored")
    func retryAfterValues() {
        let date = Date(timeIntervalSince1970: 784_111_777)  // Sun, 06 Nov 1994 08:49:37 GMT
        for form in ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"] {
            #expect(CurlTransport.httpDate(form) == date, "\(form)")
        }
        #expect(CurlTransport.httpDate("Thu, 01 Jan 2037 00:00:00 GMT") == Date(timeIntervalSince1970: 2_114_380_800))
        for unreadable in ["Sun, 06 Nov 1994 08:49:37 CET", "Sun, 06 Noo 1994 08:49:37 GMT", "Sun, 32 Nov 1994 08:49:37 GMT",
                           "Sun, 06 Nov 1994 24:49:37 GMT", "Sun, 06 Nov 1994 08:49 GMT", "06 Nov 1994", "", "So, 06 Nov 1994 08:49:37"] {
            #expect(CurlTransport.httpDate(unreadable) == nil, "\(unreadable)")
        }
        #expect(CurlTransport.retryAfter(" 120 ") == 120)
        #expect(CurlTransport.retryAfter("Sun, 06 Nov 1994 08:49:37 GMT") == 0)  // past: now
        let soon = CurlTransport.retryAfter("Thu, 01 Jan 2037 00:00:00 GMT")
        #expect(soon == CurlTransport.maxRetryAfterSeconds)  // clamped to 30 days
        #expect(CurlTransport.retryAfter("soon") == nil && CurlTransport.retryAfter(nil) == nil)
    }

    @Test("D-9: other non-2xx (400, 401, 403, 404, 413) are terminal, excluded from replay and cleaned up")
    func terminalStatuses() throws {
        for code in [400, 401, 403, 404, 413] {
            let server = try receiver([.status(code)])
            let stored = try store()
            _ = try deliverer(server.url).deliver(retries: true)
            let after = try record(stored.rowID)
            #expect(after.state == .terminal && after.outcome == "rejected (HTTP \(code))", "\(code)")
            _ = try deliverer(server.url).deliver(retries: true)
            #expect(server.received.count == 1, "\(code) was replayed")
            server.stop()
        }
    }

    @Test("D-9: connection refused, reset and timeout are retryable transport failures")
    func transportFailures() throws {
        let closed = try receiver([.status(200)])
        let refusedURL = closed.url
        closed.stop()
        let reset = try receiver([.reset])
        let stall = try receiver([.stall])
        for (url, expected) in [(refusedURL, "connection refused"), (reset.url, ""), (stall.url, "timed out")] {
            let stored = try store()
            _ = try deliverer(url) { $0.submission.timeoutMs = 300 }.deliver(retries: false)
            let after = try record(stored.rowID)
            #expect(after.state == .retry, "\(url): \(after.outcome ?? "")")
            #expect(after.attempts == 1)
            if !expected.isEmpty { #expect(after.outcome == expected, "\(url): \(after.outcome ?? "")") }
        }
        reset.stop()
        stall.stop()
    }

    @Test("D-9: a configuration failure found at delivery holds the report with its reason, never terminal; a fixed configuration releases it; no URL means no attempt")
    func configurationFailures() throws {
        let server = try receiver([.status(200)])
        var held: [ReportRecord] = []
        for url in ["not a url", "ftp://127.0.0.1/post", "http://example.invalid/post?format=json&token=t", "htps://127.0.0.1/post"] {
            let stored = try store(attachment: Data("kept".utf8))
            let summary = try deliverer(url).deliver(retries: false)
            let after = try record(stored.rowID)
            #expect(after.state == .held, "\(url)")
            #expect(after.held?.hasPrefix("configuration: ") == true, "\(url): \(after.held ?? "nil")")
            #expect(after.attempts == 0)
            #expect(after.document.content.summary == "s", "the payload is kept")
            #expect(try repository.attachments(of: stored.rowID).count == 1, "the attachment copy is kept")
            #expect(summary.held >= 1 && summary.terminal == 0)
            held.append(after)
        }
        #expect(server.received.isEmpty)
        // A valid configuration releases every held report, and it is delivered.
        let summary = try deliverer(server.url).deliver(retries: false)
        #expect(summary.accepted == held.count)
        for record in held { #expect(try self.record(record.rowID).state == .terminal) }
        #expect(Set(server.received.map(\.uuid)) == Set(held.map(\.reportID)))
        let waiting = try store()
        _ = try deliverer(nil).deliver(retries: true)
        #expect(try record(waiting.rowID).state == .awaitingFirstAttempt)
        // allowInsecure lifts the loopback-only rule for plain http (the request then fails as a
        // transport error instead: nothing listens there).
        #expect(throws: Never.self) { try SubmissionURL("http://example.invalid/post", allowInsecure: true) }
        #expect(throws: SubmissionURL.Problem.insecure(host: "example.invalid")) { try SubmissionURL("http://example.invalid/post", allowInsecure: false) }
        server.stop()
    }

    @Test("I-2: loopback is a dotted quad in 127.0.0.0/8, [::1] or localhost (any case, trailing dot); nothing else may use plain http")
    func loopbackMeansLoopback() throws {
        for url in ["http://127.0.0.1:9/post", "http://127.255.3.4/post", "http://[::1]:8080/post", "http://LocalHost/post", "http://localhost./post"] {
            #expect(throws: Never.self, "\(url)") { try SubmissionURL(url, allowInsecure: false) }
        }
        for url in ["http://127.evil.example/post", "http://127.0.0.1.nip.io/post", "http://127.0.0.256/post", "http://127.1/post",
                    "http://localhost.example/post", "http://0x7f.0.0.1/post"] {
            #expect(throws: SubmissionURL.Problem.self, "\(url)") { try SubmissionURL(url, allowInsecure: false) }
        }
        #expect(throws: SubmissionURL.Problem.badPort(0)) { try SubmissionURL("http://127.0.0.1:0/post", allowInsecure: false) }
    }

    @Test("D-5, D-11: reports kept under behaviour none are due at failure time + interval once the behaviour is interval again")
    func noneStrandsNothing() throws {
        let server = try receiver([.status(503), .status(200)])
        let stored = try store()
        let failed = Date()
        _ = try deliverer(server.url, now: failed) { $0.retry.behaviour = .none }.deliver(retries: true)
        let kept = try record(stored.rowID)
        #expect(kept.state == .retry && kept.nextAttemptAt == nil)
        let early = deliverer(server.url, now: kept.updatedAt.addingTimeInterval(4)) { $0.retry.intervalSeconds = 5 }
        _ = try early.deliver(retries: true)
        #expect(server.received.count == 1, "not due before the failure time plus the interval")
        #expect(try early.nextWake() == kept.updatedAt.addingTimeInterval(5), "a watch loop wakes for it")
        _ = try deliverer(server.url, now: kept.updatedAt.addingTimeInterval(5)) { $0.retry.intervalSeconds = 5 }.deliver(retries: true)
        #expect(server.received.count == 2)
        #expect(try record(stored.rowID).state == .terminal)
        server.stop()
    }

    @Test("D-5: every new record gets an initial attempt even with retry behaviour none; then no automatic retry")
    func behaviourNone() throws {
        let server = try receiver([.status(503), .status(200)])
        let stored = try store()
        _ = try deliverer(server.url) { $0.retry.behaviour = .none }.deliver(retries: true)
        let after = try record(stored.rowID)
        #expect(after.state == .retry && after.nextAttemptAt == nil && after.attempts == 1)
        _ = try deliverer(server.url, now: Date().addingTimeInterval(3600)) { $0.retry.behaviour = .none }.deliver(retries: true)
        #expect(server.received.count == 1)
        server.stop()
    }

    @Test("D-8: a 429 consumes the initial attempt; another attempt needs ordinary retries")
    func status429() throws {
        let server = try receiver([.status(429), .status(200)])
        let stored = try store()
        let now = Date()
        _ = try deliverer(server.url, now: now) { $0.retry.intervalSeconds = 0 }.deliver(retries: false)
        #expect(try record(stored.rowID).attempts == 1)
        _ = try deliverer(server.url, now: now.addingTimeInterval(2)) { $0.retry.intervalSeconds = 0 }.deliver(retries: true)
        #expect(try record(stored.rowID).state == .terminal)
        #expect(server.received.map(\.uuid) == [stored.reportID, stored.reportID])  // D-4: one id on every attempt
        server.stop()
    }

    @Test("D-11: after `limit` failed retries (limit + 1 attempts) the record becomes terminal; the next attempt is the failure's time plus the interval")
    func retryLimit() throws {
        let server = try receiver([.status(500)])
        let stored = try store()
        var now = Date(timeIntervalSince1970: 1_800_000_000)
        for attempt in 1...3 {
            _ = try deliverer(server.url, now: now) { $0.retry.limit = 2; $0.retry.intervalSeconds = 7 }.deliver(retries: true)
            let after = try record(stored.rowID)
            #expect(after.attempts == attempt)
            if attempt < 3 {
                #expect(after.state == .retry)
                #expect(after.nextAttemptAt == now.addingTimeInterval(7))
                // Not due yet: nothing is sent.
                _ = try deliverer(server.url, now: now.addingTimeInterval(6)) { $0.retry.limit = 2 }.deliver(retries: true)
                #expect(server.received.count == attempt)
            } else {
                #expect(after.state == .terminal)
                #expect(after.outcome == "retries exhausted after 3 attempts: HTTP 500")
            }
            now = now.addingTimeInterval(7)
        }
        server.stop()
    }
}
