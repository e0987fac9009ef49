import Foundation
@testable import Host
@testable import HostDelivery
@testable import HostModel
@testable import HostStore
@testable import HostSupport
import HostTestSupport
import Receiver
import Testing

/// The Sentry protocol out (SPEC S-1 … S-3), against the real loopback receiver (which takes
/// envelopes, S-4) and a raw server for Sentry's rate-limit header.
extension DeliveryTests {
    func dsnDeliverer(_ dsn: String, now: Date = Date(), intervalSeconds: Int = 5) -> Deliverer {
        deliverer(nil, now: now) {
            $0.submission.dsn = dsn
            $0.retry.intervalSeconds = intervalSeconds
        }
    }

    @Test("S-1: a DSN sends envelopes to /api/<project>/envelope/ with X-Sentry-Auth; the key is masked in the log; url and dsn together are refused, naming both")
    func dsnEndpoint() throws {
        let dsn = try SentryDSN("https://0123456789abcdef@sentry.example.org/prefix/42", allowInsecure: false)
        #expect(dsn.endpoint.url.absoluteString == "https://sentry.example.org/prefix/api/42/envelope/")
        #expect(dsn.authHeader.hasPrefix("X-Sentry-Auth: Sentry sentry_key=0123456789abcdef, sentry_version=7, sentry_client=reporthost/"))
        #expect(dsn.redacted == "https://***@sentry.example.org/prefix/42")
        for bad in ["https://sentry.example.org/42", "https://key@sentry.example.org/", "http://key@sentry.example.org/42"] {
            #expect(throws: SubmissionURL.Problem.self, "\(bad)") { try SentryDSN(bad, allowInsecure: false) }
        }
        var both = Configuration()
        both.submission.url = "https://submit.backtrace.io/u/t/json"
        both.submission.dsn = "https://k@sentry.example.org/1"
        #expect(throws: HostError.self) { try both.validate() }
        do { try both.validate() } catch { #expect(error.description.contains("'submission.url' and 'submission.dsn'"), "\(error)") }

        let server = try receiver([.status(200)])
        try store(summary: "checkout failed")
        let key = "feedfacecafebeef"
        let summary = try dsnDeliverer("http://\(key)@127.0.0.1:\(server.port)/7").deliver(retries: false)
        #expect(summary.accepted == 1)
        let received = try #require(server.received.first)
        #expect(received.report["attributes"]?["error.message"]?.stringValue == "checkout failed")
        let lines = log.lines.joined(separator: "\n")
        #expect(!lines.contains(key) && !lines.isEmpty, "the key is never logged: \(lines)")
        server.stop()
    }

    @Test("S-2: a crash's event has the signal, a signalhandler mechanism, frames outermost first, threads and debug images with the build id")
    func crashEvent() throws {
        var content = ReportContent()
        content.summary = "SIGSEGV at 0x0"
        content.attributes = ["version": "1.4.2", "region": "eu"]
        let document = ReportDocument(id: "0F8FAD5B-D9CB-469F-A165-70867728950E", trigger: .crash, content: content, internalLog: [],
                                      createdAt: Date(timeIntervalSince1970: 1_800_000_000))
        let frame = { (address: String, function: String) -> JSONValue in
            .object([("address", .string(address)), ("module", .string("/usr/bin/app")), ("function", .string(function)),
                     ("build_id", .string("b5381a457906d279073822a5ceb24c4bfef94ddb"))])
        }
        let crash = JSONValue.object([
            ("signal", .int(11)), ("signal_name", .string("SEGV")), ("code", .int(1)), ("code_name", .string("SEGV_MAPERR")),
            ("threads", .object([("77", .object([("name", .string("crashed")), ("frames", .array([frame("0x1010", "crash_here"), frame("0x1020", "main")]))])),
                                 ("78", .object([("name", .string("worker")), ("frames", .array([frame("0x1030", "wait")]))]))])),
            ("main_thread", .string("77")),
            ("modules", .array([.object([("path", .string("/usr/bin/app")), ("start", .string("0x1000")), ("end", .string("0x5000")),
                                         ("build_id", .string("b5381a457906d279073822a5ceb24c4bfef94ddb"))])])),
        ])
        let event = SentryEvent.json(document, crash: crash, release: "1.4.2", sendChanges: true)
        #expect(event["event_id"]?.stringValue == "0f8fad5bd9cb469fa16570867728950e")
        #expect(event["level"]?.stringValue == "fatal" && event["release"]?.stringValue == "1.4.2" && event["platform"]?.stringValue == "native")
        #expect(event["tags"]?["region"]?.stringValue == "eu")
        let exception = try #require(event["exception"]?["values"]?.arrayValue?.first)
        #expect(exception["type"]?.stringValue == "SIGSEGV")
        #expect(exception["mechanism"]?["type"]?.stringValue == "signalhandler")
        #expect(exception["mechanism"]?["meta"]?["signal"]?["number"]?.intValue == 11)
        #expect(exception["mechanism"]?["meta"]?["signal"]?["code"]?.intValue == 1)
        let functions = exception["stacktrace"]?["frames"]?.arrayValue?.compactMap { $0["function"]?.stringValue }
        #expect(functions == ["main", "crash_here"], "outermost first")
        let threads = try #require(event["threads"]?["values"]?.arrayValue)
        #expect(threads.count == 2 && threads.first { $0["id"]?.intValue == 77 }?["crashed"]?.boolValue == true)
        #expect(threads.first { $0["id"]?.intValue == 78 }?["stacktrace"]?["frames"]?.arrayValue?.first?["function"]?.stringValue == "wait")
        let image = try #require(event["debug_meta"]?["images"]?.arrayValue?.first)
        #expect(image["code_id"]?.stringValue == "b5381a457906d279073822a5ceb24c4bfef94ddb")
        // The first 16 bytes, the first three fields byte-swapped (Sentry's symbolicator).
        #expect(image["debug_id"]?.stringValue == "451a38b5-0679-79d2-0738-22a5ceb24c4b")
        #expect(image["image_addr"]?.stringValue == "0x1000" && image["image_size"]?.intValue == 0x4000)
        #expect(event["contexts"]?["reporthost"]?["trigger"]?.stringValue == "crash")
    }

    @Test("S-3: X-Sentry-Rate-Limits for a report's categories holds every later report to that endpoint until it ends; other categories do not")
    func rateLimits() throws {
        #expect(SentryRateLimits.eventLimit("60:error;transaction:key, 2700:default:organization") == 2700)
        #expect(SentryRateLimits.eventLimit("30::organization") == 30)
        #expect(SentryRateLimits.eventLimit("120:transaction;session:key") == nil)
        #expect(SentryRateLimits.eventLimit("soon:error:key") == nil)

        let server = try RawHTTPServer(.respond("HTTP/1.1 200 OK\r\nX-Sentry-Rate-Limits: 60:error:organization\r\nContent-Length: 0\r\n\r\n"))
        defer { server.stop() }
        let now = Date()
        try store(summary: "the first")
        let dsn = "http://k@127.0.0.1:\(server.port)/3"
        let first = try dsnDeliverer(dsn, now: now).deliver(retries: true)
        #expect(first.accepted == 1 && first.rateLimited, "\(first)")
        // Reports raised later wait for the limit's end, in this pass and the next.
        for index in 0..<2 { try store(summary: "later \(index)") }
        let second = try dsnDeliverer(dsn, now: now.addingTimeInterval(30)).deliver(retries: true)
        #expect(second.accepted == 0 && second.rateLimited)
        #expect(server.requests == 1, "nothing more was sent inside the limit")
        let wake = try #require(try dsnDeliverer(dsn, now: now.addingTimeInterval(30)).nextWake())
        #expect(wake >= now.addingTimeInterval(59), "the next pass waits for the limit: \(wake)")
    }

    /// Keeps every body it is given and answers 200.
    final class Bodies: SubmissionTransport {
        let sent = Locked<[String]>([])

        func post(_ url: URL, body: RequestBody, timeoutMs: Int) -> TransportResult {
            if case .bytes(let bytes) = body.content { sent.withLock { $0.append(String(decoding: bytes, as: UTF8.self)) } }
            return .response(status: 200, retryAfter: nil)
        }
    }

    @Test("S-2, B-2: a session's start goes as a Sentry session update (init, ok, its release); a crash's envelope ends its session as crashed")
    func sessions() throws {
        let transport = Bodies()
        try repository.queueMetricEvents(SessionMetrics.events(application: "shop", release: "2.0", session: "5E1D0000-0000-4000-8000-000000000001",
                                                              guid: "00000000-0000-4000-8000-00000000000a", at: Date(timeIntervalSince1970: 1_800_000_000)))
        var content = ReportContent()
        content.summary = "SIGSEGV"
        content.attributes = ["application.session": "5E1D0000-0000-4000-8000-000000000001"]
        try repository.seedRecord(ReportDocument(id: UUID().uuidString, trigger: .crash, content: content, internalLog: [], createdAt: Date()),
                                  state: .awaitingFirstAttempt)
        let deliverer = deliverer(nil, transport: transport) {
            $0.submission.dsn = "http://k@127.0.0.1:9/1"
            $0.metrics.enabled = true
            $0.release = "2.0"
        }
        _ = try deliverer.deliver(retries: false)
        let sent = transport.sent.withLock { $0 }
        #expect(sent.count == 2, "the crash's envelope and the session's start: \(sent)")
        let start = try #require(sent.first { !$0.contains(#""type":"event""#) })
        #expect(start.contains(#""type":"session""#) && start.contains(#""init":true"#) && start.contains(#""status":"ok""#)
                && start.contains(#""release":"2.0""#) && start.contains("5e1d0000-0000-4000-8000-000000000001"), "\(start)")
        let crash = try #require(sent.first { $0.contains(#""type":"event""#) })
        #expect(crash.contains(#""type":"session""#) && crash.contains(#""status":"crashed""#) && crash.contains(#""init":false"#), "\(crash)")
    }

    @Test("S-3: at the envelope path, 429 and 5xx are retained (not before Retry-After), 413 and other 4xx are terminal")
    func envelopeOutcomes() throws {
        for (code, state) in [(429, RecordState.retry), (503, .retry), (500, .retry), (413, .terminal), (400, .terminal)] {
            let server = try receiver([.status(code)])
            let now = Date(timeIntervalSince1970: 1_800_000_000)
            let stored = try store()
            // An interval of 0 s shows Retry-After (the receiver sends 1 s on 429 and 503) winning.
            _ = try dsnDeliverer("http://k\(code)@127.0.0.1:\(server.port)/\(code)", now: now, intervalSeconds: 0).deliver(retries: false)
            let after = try record(stored.rowID)
            #expect(after.state == state, "\(code)")
            if state == .retry, [429, 503].contains(code) {
                #expect(abs((after.nextAttemptAt ?? .distantPast).timeIntervalSince(now.addingTimeInterval(1))) < 0.01, "\(code)")
            }
            server.stop()
        }
    }

    @Test("S-2: each attachment goes as an attachment item of the envelope, streamed from its copy, and arrives whole")
    func attachmentItems() throws {
        let server = try receiver([.status(200)])
        defer { server.stop() }
        let bytes = Data((0..<70_000).map { UInt8($0 % 251) })
        try store(summary: "with a log", attachment: bytes)
        let summary = try dsnDeliverer("http://k@127.0.0.1:\(server.port)/5").deliver(retries: false)
        #expect(summary.accepted == 1)
        let received = try #require(server.received.first)
        #expect(received.attachments["log.txt"] == bytes, "\(received.attachments.keys.sorted())")
    }
}
