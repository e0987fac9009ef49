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

/// Delivery (continued): order, the shared rate window, wakes, interrupted attempts and what the log masks.
extension DeliveryTests {
    @Test("D-6: initial native reports are started oldest first, ahead of others; retry.order orders ordinary retries")
    func ordering() throws {
        let base = Date(timeIntervalSince1970: 1_700_000_000)
        let liveOld = try store(.logError, created: base)
        let crashNew = try store(.crash, created: base.addingTimeInterval(20))
        let crashOld = try store(.crash, created: base.addingTimeInterval(10))
        let initial = StartOrder()
        _ = try deliverer("http://127.0.0.1:9/post?format=json&token=t", transport: initial).deliver(retries: false)
        #expect(initial.ids.withLock { $0 } == [crashOld.reportID, crashNew.reportID, liveOld.reportID])
        // Over the network, up to 4 at once: the natives are all answered before another starts.
        let server = try receiver([.status(200)])
        let natives = try (0..<2).map { try store(.crash, created: base.addingTimeInterval(Double(30 + $0))) }
        try store(.logError, created: base)
        _ = try deliverer(server.url).deliver(retries: false)
        #expect(Set(server.received.prefix(2).map(\.uuid)) == Set(natives.map(\.reportID)))
        server.stop()

        for (order, expectNewestFirst) in [(RetryPolicy.Order.queue, false), (.stack, true)] {
            let retries = StartOrder()
            let first = try store(created: base.addingTimeInterval(100), state: .retry)
            let second = try store(created: base.addingTimeInterval(200), state: .retry)
            try repository.retryLater(first.rowID, reason: "x", at: base)
            try repository.retryLater(second.rowID, reason: "x", at: base)
            _ = try deliverer("http://127.0.0.1:9/post?format=json&token=t", transport: retries) { $0.retry.order = order }
                .deliver(retries: true)
            let expected = expectNewestFirst ? [second.reportID, first.reportID] : [first.reportID, second.reportID]
            #expect(retries.ids.withLock { $0 } == expected, "\(order)")
        }
    }

    @Test("D-6: a backlog larger than a page is sent whole, in order, natives first, each report once; retries due at the pass's start only")
    func pagedBacklog() throws {
        let base = Date(timeIntervalSince1970: 1_700_000_000)
        let count = Deliverer.pageSize * 2 + 5
        // Several records share a creation time: the page boundary must not skip or repeat one.
        let others = try (0..<count).map { try store(.logError, created: base.addingTimeInterval(Double($0 / 3))) }
        let natives = try (0..<(Deliverer.pageSize + 3)).map { try store(.crash, created: base.addingTimeInterval(Double(1_000 + $0 / 2))) }
        let failing = try store(.logError, created: base.addingTimeInterval(-1), state: .retry)
        try repository.retryLater(failing.rowID, reason: "x", at: base)
        // Every request answered 503 with no Retry-After and an interval of 0: a report that fails is due again at once.
        final class Busy: SubmissionTransport {
            let order = StartOrder()
            func post(_ url: URL, body: RequestBody, timeoutMs: Int) -> TransportResult {
                _ = order.post(url, body: body, timeoutMs: timeoutMs)
                return .response(status: 503, retryAfter: nil)
            }
        }
        let busy = Busy()
        _ = try deliverer("http://127.0.0.1:9/post?format=json&token=t", transport: busy) { $0.retry.intervalSeconds = 0 }
            .deliver(retries: true)
        let rows = busy.order.ids.withLock { $0 }
        let expected = natives.map(\.reportID) + others.map(\.reportID) + [failing.reportID]
        #expect(rows == expected, "\(rows.count) requests for \(expected.count) reports")
    }

    @Test("D-7: reportsPerMin is a shared window kept in the repository; a local rejection builds no request and costs no attempt")
    func localRateLimit() throws {
        let server = try receiver([.status(503)])
        let records = try (0..<3).map { try store(created: Date(timeIntervalSince1970: 1_700_000_000 + Double($0))) }
        let now = Date()
        let first = try deliverer(server.url, now: now) { $0.reportsPerMin = 2 }.deliver(retries: false)
        #expect(first.rateLimited)
        #expect(server.received.count == 2)
        #expect(try record(records[2].rowID).state == .awaitingFirstAttempt)
        #expect(try record(records[2].rowID).attempts == 0)
        // Another process on the same repository shares the window.
        let other = try Repository.open(folder: repository.folder)
        let sharing = Deliverer(
            repository: other, configuration: { var c = Configuration(); c.submission.url = server.url; c.reportsPerMin = 2; return c }(),
            transport: CurlTransport(), logger: .silent, now: { now.addingTimeInterval(30) })
        #expect(try sharing.deliver(retries: false).rateLimited)
        #expect(server.received.count == 2)
        #expect(try repository.nextAdmission(perMinute: 2, now: now) != nil)
        // When the window allows, the initial report gets its attempt (deferred admission).
        _ = try deliverer(server.url, now: now.addingTimeInterval(61)) { $0.reportsPerMin = 2; $0.retry.behaviour = .none }.deliver(retries: false)
        #expect(server.received.count == 3)
        server.stop()
    }

    @Test("D-8: the next wake is the earliest retry due, or now while a report awaits its first attempt; terminal rows are not read")
    func nextWake() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let url = "http://127.0.0.1:9/post?format=json&token=t"
        #expect(try deliverer(url, now: now).nextWake() == nil, "nothing stored: nothing to wake for")
        let later = try store()
        let sooner = try store()
        try repository.retryLater(later.rowID, reason: "HTTP 503", at: now.addingTimeInterval(600))
        try repository.retryLater(sooner.rowID, reason: "HTTP 503", at: now.addingTimeInterval(60))
        let retry = try #require(try deliverer(url, now: now).nextWake())
        #expect(abs(retry.timeIntervalSince(now.addingTimeInterval(60))) < 0.01)
        #expect(try deliverer(url, now: now) { $0.retry.behaviour = .none }.nextWake() == nil, "no retries under behaviour none")
        try store()
        #expect(try deliverer(url, now: now).nextWake() == now, "an initial attempt is due now")
        // A terminal row changes nothing.
        let finished = try store()
        try repository.finish(finished.rowID, outcome: "accepted (HTTP 200)")
        #expect(try deliverer(url, now: now).nextWake() == now)
    }

    @Test("D-13: a damaged row that delivery skips never makes the next wake due (a watch loop would spin on it)")
    func nextWakeSkipsDamagedRows() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let damaged = try store()
        try repository.retryLater(damaged.rowID, reason: "HTTP 503", at: now.addingTimeInterval(-60))
        let result = try ChildProcess.run("/usr/bin/env", [
            "python3", "-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(\"UPDATE reports SET document='{' WHERE rowid=\" + sys.argv[2]); c.commit()",
            repository.databasePath, String(damaged.rowID),
        ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try repository.unreadableRecords().map(\.rowID) == [damaged.rowID])
        #expect(try deliverer("http://127.0.0.1:9/post?format=json&token=t", now: now).nextWake() == nil)
    }

    @Test("D-9: cancelled submissions (the host is stopping) count as interrupted ones, due again at once, and end the pass")
    func cancelledSubmission() throws {
        let stalled = try receiver([.stall])
        defer { stalled.stop() }
        // The first window is admitted together (its requests go out four at a time); the records after it wait.
        let window = try (0..<Deliverer.windowSize).map { _ in try store() }
        let second = try store()
        let cancellation = Cancellation()
        cancellation.cancel()
        var configuration = Configuration()
        configuration.submission.url = stalled.url
        configuration.submission.timeoutMs = 20_000
        configuration.reportsPerMin = 0
        let now = Date()
        let deliverer = Deliverer(
            repository: repository, configuration: configuration, transport: CurlTransport(cancellation: cancellation),
            logger: HostLogger(destinations: [log]), now: { now })
        _ = try deliverer.deliver(retries: false)
        for first in window {
            let cancelled = try record(first.rowID)
            #expect(cancelled.state == .retry && cancelled.attempts == 1 && cancelled.outcome == "cancelled when the host stopped")
            #expect(cancelled.nextAttemptAt.map { abs($0.timeIntervalSince(now)) < 0.01 } == true, "due again at once")
        }
        let untouched = try record(second.rowID)
        #expect(untouched.state == .awaitingFirstAttempt && untouched.attempts == 0, "the pass stopped")
    }

    @Test("D-9: a record found submitting at launch counts that attempt as a retryable failure, due now")
    func interruptedSubmission() throws {
        let stored = try store()
        #expect(try repository.admit(stored.rowID, perMinute: 0, now: Date()) == .admitted)
        #expect(try record(stored.rowID).state == .submitting)
        // Past the middle of a millisecond: a due time stored rounded up would be later than now.
        let now = Date(timeIntervalSince1970: 1_800_000_000.0007)
        try deliverer("http://127.0.0.1:9/post", now: now).settleInterrupted()
        let after = try record(stored.rowID)
        #expect(after.state == .retry && after.attempts == 1)
        #expect(abs((after.nextAttemptAt ?? .distantPast).timeIntervalSince(now)) < 0.01)
        #expect(after.outcome == "interrupted during submission")
        // Due now means due to the very next pass, at the same instant.
        let server = try receiver([.status(200)])
        let summary = try deliverer(server.url, now: now).deliver(retries: true)
        #expect(summary.accepted == 1 && server.received.map(\.uuid) == [stored.reportID])
        server.stop()
    }

    @Test("D-14: no log line contains the submission token or attachment contents")
    func redactedLogs() throws {
        let server = try receiver([.status(503)])
        let url = server.url.replacingOccurrences(of: "local-token", with: "TOPSECRET-TOKEN")
        try store(attachment: Data("ATTACHMENT-CONTENT".utf8))
        log.write("(start)")
        _ = try deliverer(url) { $0.logging = [] }.deliver(retries: false)
        #expect(log.lines.count > 1)
        #expect(log.lines.contains { $0.contains("submitting") })
        #expect(!log.lines.contains { $0.contains("TOPSECRET-TOKEN") || $0.contains("ATTACHMENT-CONTENT") })
        #expect(SubmissionURL.redact("https://submit.backtrace.io/universe/abc123/json") == "https://submit.backtrace.io/universe/***/json")
        server.stop()
    }

    @Test("D-14: one function masks every URL the host prints: userinfo, every query value (names kept), Backtrace's path token and token-like path segments")
    func urlRedaction() {
        let hex = String(repeating: "0123456789abcdef", count: 4)
        let cases: [(String, String)] = [
            ("https://h.example/post?format=json&token=T0K3N", "https://h.example/post?format=***&token=***"),
            ("https://h.example/post?api_key=AK1&access_token=AT2&sig=S3", "https://h.example/post?api_key=***&access_token=***&sig=***"),
            ("https://user:pw@h.example/post", "https://***@h.example/post"),
            ("https://submit.backtrace.io/universe/\(hex)/json", "https://submit.backtrace.io/universe/***/json"),
            ("https://h.example/api/\(hex)/submit", "https://h.example/api/***/submit"),
            ("https://h.example/reports/submit-v2", "https://h.example/reports/submit-v2"),
            // A trailing slash, a token of letters only, a token behind an encoded slash.
            ("https://submit.backtrace.io/universe/abc123/json/", "https://submit.backtrace.io/universe/***/json/"),
            ("https://h.example/api/abcdefghijklmnopqrstuvwxyzABCDEF/submit", "https://h.example/api/***/submit"),
            ("https://h.example/api%2F\(hex)%2Fsubmit", "https://h.example/api%2F***%2Fsubmit"),
            ("https://h.example/api%2f\(hex)/x", "https://h.example/api%2F***/x"),
        ]
        for (url, expected) in cases {
            let shown = SubmissionURL.redact(url)
            #expect(shown == expected, "\(url)")
            for secret in ["T0K3N", "AK1", "AT2", "S3", "pw", hex, "abcdefghijklmnopqrstuvwxyzABCDEF", "abc123"] where !expected.contains(secret) {
                #expect(!shown.contains(secret), "\(secret) in \(shown)")
            }
        }
        #expect(SubmissionURL.redact("not a url with spaces") == "<unparseable URL>")
    }

    @Test("wire format: module paths leave the machine with the home folder as ~; nothing else is rewritten")
    func homeFolderAsTilde() {
        #expect(LocalPaths.forServer("/home/ana/app/libx.so", home: "/home/ana") == "~/app/libx.so")
        #expect(LocalPaths.forServer("/home/ana", home: "/home/ana/") == "~")
        #expect(LocalPaths.forServer("/home/anabel/libx.so", home: "/home/ana") == "/home/anabel/libx.so")
        #expect(LocalPaths.forServer("/usr/lib/libc.so.6", home: "/home/ana") == "/usr/lib/libc.so.6")
        #expect(LocalPaths.forServer("/x/libx.so", home: "/") == "/x/libx.so", "a home of / rewrites nothing")
    }

    @Test("wire format: a file is named by its last path component, as Foundation's URL names it")
    func fileNames() {
        let paths = [
            "/usr/lib/libc.so.6", "libx.so", "/crashes/a.crash/", "/a//b//", "/", "//", "a/b", "/tmp/with space/f%20g.txt",
            "/tmp/caf\u{E9}/\u{1F600}.log", "/x/\u{301}combining", "./rel/../name", ".hidden", "/a/.",
        ]
        for path in paths {
            #expect(LocalPaths.fileName(path) == URL(fileURLWithPath: path).lastPathComponent, "\(path)")
        }
        #expect(LocalPaths.fileName("/usr/lib/libc.so.6") == "libc.so.6")
    }
}
