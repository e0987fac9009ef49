import Foundation
import Host
import HostSupport
import HostTestSupport
import Receiver
import Testing

/// SPEC T-2: the inbox's JSON API, its pages' headers, its event stream and chaos, against a
/// real receiver on loopback.
@Suite struct InboxTests {
    let folder = makeTemporaryDirectory("reporthost-inbox")

    func makeReceiver(chaos: Chaos? = nil, script: [LocalReceiver.Response] = [.status(200)]) throws -> LocalReceiver {
        try LocalReceiver(folder: folder.appendingPathComponent("got-\(UUID().uuidString)"), script: script, inbox: true, chaos: chaos)
    }

    /// A Backtrace submission: the JSON report and attachments, as multipart/form-data.
    static func submission(
        uuid: String = UUID().uuidString.lowercased(), summary: String, type: String = "Error", attributes: [String: String] = [:],
        labels: [String] = [], attachments: [String: Data] = [:]
    ) -> (uuid: String, body: Data, contentType: String) {
        let fields = ["error.message": summary, "error.type": type].merging(attributes) { a, _ in a }
        let report = JSONValue.object([
            ("uuid", .string(uuid)), ("timestamp", .int(1_800_000_000)), ("lang", .string("c")),
            ("attributes", .object(fields.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })),
            ("annotations", .object([])), ("classifiers", .array(labels.map(JSONValue.string))),
        ])
        let boundary = "inbox-test-boundary"
        var body = Data()
        func part(_ name: String, _ data: Data) {
            body += Data("--\(boundary)\r\nContent-Disposition: form-data; name=\"\(name)\"; filename=\"\(name)\"\r\n\r\n".utf8)
            body += data + Data("\r\n".utf8)
        }
        part("upload_file", Data(report.serialized().utf8))
        for (name, data) in attachments { part("attachment_\(name)", data) }
        body += Data("--\(boundary)--\r\n".utf8)
        return (uuid, body, "multipart/form-data; boundary=\(boundary)")
    }

    @discardableResult
    /// A submission posted, its answer awaited up to 30 s: a 1 MB report stored by the debug
    /// build while the whole suite runs took longer than the exchange's usual 5 s (CI).
    func post(_ receiver: LocalReceiver, _ submission: (uuid: String, body: Data, contentType: String)) throws -> HTTPAnswer {
        try httpRequest(
            port: receiver.port, "/post?format=json&token=0123456789abcdef0123", method: "POST", headers: ["Content-Type": submission.contentType],
            body: submission.body, timeoutMs: 30_000)
    }

    func json(_ receiver: LocalReceiver, _ target: String) throws -> JSONValue {
        let answer = try httpRequest(port: receiver.port, target)
        #expect(answer.status == 200, "\(target): \(answer.status) \(answer.text)")
        return try JSONValue.parse(answer.body)
    }

    @Test("T-2 API: GET /api/reports lists id, type, summary, received_at and attachments, newest first, a page at a time")
    func list() throws {
        let receiver = try makeReceiver()
        defer { receiver.stop() }
        let sent = (0..<5).map { Self.submission(summary: "report \($0)", attachments: $0 == 4 ? ["a.txt": Data("a".utf8)] : [:]) }
        for submission in sent { try post(receiver, submission) }
        let all = try json(receiver, "/api/reports")
        let reports = try #require(all["reports"]?.arrayValue)
        #expect(reports.compactMap { $0["id"]?.stringValue } == sent.reversed().map(\.uuid))
        #expect(reports.first?["summary"]?.stringValue == "report 4")
        #expect(reports.first?["type"]?.stringValue == "Error")
        #expect(reports.first?["attachments"]?.intValue == 1)
        #expect(reports.first?["received_at"]?.stringValue.flatMap(ReportDocument.parseTimestamp) != nil)
        let page = try json(receiver, "/api/reports?limit=2&offset=1")
        #expect(page["reports"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == [sent[3].uuid, sent[2].uuid])
        #expect(page["total"]?.intValue == 5)
    }

    @Test("T-2 API: a report comes back as received, an attachment byte for byte; DELETE /api/reports removes every one (204)")
    func reportAttachmentDelete() throws {
        let receiver = try makeReceiver()
        defer { receiver.stop() }
        var random = SplitMix64(seed: 7)
        let bytes = Data((0..<100_000).map { _ in UInt8(truncatingIfNeeded: random.next()) })
        let submission = Self.submission(summary: "with a binary attachment", attachments: ["blob.bin": bytes])
        try post(receiver, submission)
        let report = try json(receiver, "/api/reports/\(submission.uuid)")
        #expect(report == receiver.received.first?.report)
        let attachment = try httpRequest(port: receiver.port, "/api/reports/\(submission.uuid)/attachments/blob.bin")
        #expect(attachment.status == 200)
        #expect(attachment.body == bytes)
        #expect(attachment.headers["content-disposition"] == "attachment; filename=\"blob.bin\"")
        #expect(try httpRequest(port: receiver.port, "/api/reports/\(submission.uuid)/attachments/..%2Fx").status == 404)
        let deleted = try httpRequest(port: receiver.port, "/api/reports", method: "DELETE")
        #expect(deleted.status == 204)
        #expect(try json(receiver, "/api/reports")["reports"]?.arrayValue?.isEmpty == true)
        #expect(try httpRequest(port: receiver.port, "/api/reports/\(submission.uuid)").status == 404)
        #expect(!FileManager.default.fileExists(atPath: receiver.folder.appendingPathComponent("\(submission.uuid).json").path))
    }

    @Test("T-2 API: filters by type, attribute (key or key=value), label and text")
    func filters() throws {
        let receiver = try makeReceiver()
        defer { receiver.stop() }
        let crash = Self.submission(summary: "SEGV in parser", type: "Crash", attributes: ["release": "2.3.0"], labels: ["native"])
        let error = Self.submission(summary: "sync failed", attributes: ["release": "2.4.0"], labels: ["sync"])
        try post(receiver, crash)
        try post(receiver, error)
        func ids(_ query: String) throws -> [String] {
            try json(receiver, "/api/reports?\(query)")["reports"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
        }
        #expect(try ids("type=crash") == [crash.uuid])
        #expect(try ids("attribute=release%3D2.4.0") == [error.uuid])
        #expect(try ids("attribute=release") == [error.uuid, crash.uuid])
        #expect(try ids("label=native") == [crash.uuid])
        #expect(try ids("q=PARSER") == [crash.uuid])
        #expect(try ids("q=nothing+like+this").isEmpty)
    }

    @Test("T-2 API: every filter with hostile values answers 200, 400 or 431, never a trap (`attribute==` ended the receiver)")
    func hostileFilters() throws {
        let receiver = try makeReceiver()
        defer { receiver.stop() }
        try post(receiver, Self.submission(summary: "kept", attributes: ["k": "v"]))
        let values = [
            "", "=", "==", "%3D", "%3D%3D", "%3Dv", "k%3D", "k%3D%3D", "%00", "%FF", "%", "%zz", "%E2%80%AE", "-1", "99999999999999999999",
            "+", String(repeating: "a%3D", count: 20_000),
        ]
        for name in ["type", "attribute", "label", "q", "limit", "offset"] {
            for value in values {
                let answer = try httpRequest(port: receiver.port, "/api/reports?\(name)=\(value)")
                // 431: a request head past the receiver's bound, refused as such.
                #expect([200, 400, 431].contains(answer.status), "\(name)=\(value.prefix(40)): \(answer.status)")
            }
        }
        // Still answering; `=` is an empty key (no report has one), `k=` asks for an empty value.
        #expect(try json(receiver, "/api/reports?attribute=%3D")["reports"]?.arrayValue?.count == 0)
        #expect(try json(receiver, "/api/reports?attribute=k%3D")["reports"]?.arrayValue?.count == 0)
        #expect(try json(receiver, "/api/reports?attribute=k%3Dv")["reports"]?.arrayValue?.count == 1)
        #expect(try json(receiver, "/api/reports?attribute=k")["reports"]?.arrayValue?.count == 1)
    }

    @Test("S-4: a submission or a metric event whose Origin names another site is refused (403) and stored nowhere; a loopback page may post")
    func foreignOriginRefused() throws {
        let receiver = try makeReceiver()
        defer { receiver.stop() }
        let submission = Self.submission(summary: "from a web page")
        let token = "/post?format=json&token=0123456789abcdef0123"
        for origin in ["https://evil.example", "null", "http://127.0.0.1.evil.example", "file://", "http://localhost.example:8080"] {
            let posted = try httpRequest(
                port: receiver.port, token, method: "POST", headers: ["Content-Type": submission.contentType, "Origin": origin], body: submission.body)
            #expect(posted.status == 403, "\(origin): \(posted.status)")
            let event = try httpRequest(
                port: receiver.port, "/api/unique-events/submit", method: "POST",
                headers: ["Content-Type": "application/json", "Origin": origin], body: Data(#"{"unique_events": []}"#.utf8))
            #expect(event.status == 403, "\(origin): \(event.status)")
        }
        #expect(receiver.received.isEmpty && receiver.metricEvents.isEmpty)
        #expect(try json(receiver, "/api/reports")["reports"]?.arrayValue?.isEmpty == true)
        for origin in ["http://localhost:5173", "http://127.0.0.1:8000", "https://[::1]:4443"] {
            let posted = try httpRequest(
                port: receiver.port, token, method: "POST", headers: ["Content-Type": submission.contentType, "Origin": origin], body: submission.body)
            #expect(posted.status == 200, "\(origin): \(posted.status)")
        }
        let plain = try post(receiver, Self.submission(summary: "from a program"))  // no Origin: not a browser
        #expect(plain.status == 200)
    }

    @Test("T-2 API: GET /api/requests lists each submission with its status, its token masked")
    func requests() throws {
        let receiver = try makeReceiver(script: [.status(503), .status(200)])
        defer { receiver.stop() }
        let submission = Self.submission(summary: "sent twice")
        #expect(try post(receiver, submission).headers["retry-after"] == "1")
        try post(receiver, submission)
        let requests = try #require(try json(receiver, "/api/requests")["requests"]?.arrayValue)
        #expect(requests.compactMap { $0["status"]?.intValue } == [503, 200])
        #expect(requests.allSatisfy { $0["method"]?.stringValue == "POST" && $0["chaos"]?.boolValue == false })
        #expect(requests.allSatisfy { $0["report"]?.stringValue == submission.uuid })
        let path = try #require(requests.first?["path"]?.stringValue)
        #expect(path.hasPrefix("/post?") && !path.contains("0123456789abcdef"), "\(path)")
    }

    @Test("T-2 pages: served from the binary with a Content-Security-Policy that forbids inline scripts and handlers")
    func pageHeaders() throws {
        let receiver = try makeReceiver()
        defer { receiver.stop() }
        for target in ["/", "/requests", "/reports/\(UUID().uuidString.lowercased())", "/static/inbox.js", "/static/inbox.css"] {
            let answer = try httpRequest(port: receiver.port, target)
            #expect(answer.status == 200, "\(target)")
            let policy = answer.headers["content-security-policy"] ?? ""
            #expect(policy.contains("script-src 'self'") && !policy.contains("unsafe-inline"), "\(target): \(policy)")
            #expect(answer.headers["x-content-type-options"] == "nosniff")
        }
        let page = try httpRequest(port: receiver.port, "/").text
        #expect(page.contains("<script src=\"/static/inbox.js\""))
        #expect(!page.contains("http://") && !page.contains("https://"), "the page loads nothing from outside")
        // The script makes elements from text only: no HTML parsing of report values.
        let script = try httpRequest(port: receiver.port, "/static/inbox.js").text
        for sink in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("] {
            #expect(!script.contains(sink), "inbox.js uses \(sink)")
        }
    }

    @Test("T-2: only loopback names are answered: a page that rebinds its DNS name to 127.0.0.1 reads nothing")
    func loopbackHostOnly() throws {
        let receiver = try makeReceiver()
        defer { receiver.stop() }
        try post(receiver, Self.submission(summary: "private"))
        #expect(try httpRequest(port: receiver.port, "/api/reports", host: "evil.example:\(receiver.port)").status == 403)
        #expect(try httpRequest(port: receiver.port, "/api/reports", host: "127.0.0.1.nip.io:\(receiver.port)").status == 403)
        #expect(try httpRequest(port: receiver.port, "/api/reports", host: "localhost:\(receiver.port)").status == 200)
        #expect(try httpRequest(port: receiver.port, "/api/reports", host: "[::1]:\(receiver.port)").status == 200)
    }

    @Test("T-2: the event stream sends each report as it arrives")
    func events() throws {
        let receiver = try makeReceiver()
        defer { receiver.stop() }
        let stream = try #require(connectToLoopback(port: receiver.port, timeoutMs: 10_000))
        defer { close(stream) }
        let request = "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:\(receiver.port)\r\n\r\n"
        #expect(send(stream, request, request.utf8.count, Int32(MSG_NOSIGNAL)) == request.utf8.count)
        var seen = ""
        func read(until marker: String) {
            var chunk = [UInt8](repeating: 0, count: 4_096)
            while !seen.contains(marker) {
                let count = recv(stream, &chunk, chunk.count, 0)
                guard count > 0 else { return }
                seen += String(decoding: chunk[..<count], as: UTF8.self)
            }
        }
        read(until: "retry: 1000")
        #expect(seen.contains("Content-Type: text/event-stream"))
        let submission = Self.submission(summary: "live")
        try post(receiver, submission)
        read(until: "\"summary\":\"live\"")
        #expect(seen.contains("event: report\ndata: {\"id\":\"\(submission.uuid)\""), "\(seen)")
    }

    /// `count` event streams on `receiver`, each answered; the caller closes them.
    func openStreams(_ receiver: LocalReceiver, count: Int) throws -> [Int32] {
        var streams: [Int32] = []
        for _ in 0..<count {
            let stream = try #require(connectToLoopback(port: receiver.port, timeoutMs: 10_000))
            streams.append(stream)
            let request = "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:\(receiver.port)\r\n\r\n"
            _ = send(stream, request, request.utf8.count, Int32(MSG_NOSIGNAL))
            var chunk = [UInt8](repeating: 0, count: 512)
            #expect(recv(stream, &chunk, chunk.count, 0) > 0, "each stream is answered")
        }
        return streams
    }

    @Test("T-2: event streams never lock the inbox out: past the connection limit the oldest stream is closed for a new client")
    func streamsGiveWay() throws {
        var limits = LocalReceiver.Limits()
        limits.maxConnections = 4
        limits.shedIdleAfterMs = 0
        let receiver = try LocalReceiver(folder: folder.appendingPathComponent("streams"), limits: limits, inbox: true)
        defer { receiver.stop() }
        let streams = try openStreams(receiver, count: 6)
        defer { streams.forEach { close($0) } }
        #expect(try httpRequest(port: receiver.port, "/api/reports").status == 200)
        // The first stream was closed to make room: it reads the end of the stream.
        var chunk = [UInt8](repeating: 0, count: 512)
        #expect(recv(streams[0], &chunk, chunk.count, 0) == 0)
    }

    @Test("T-2: streams have a quota below the connection limit: 40 streams that reconnect at once never hold a submitter out")
    func streamQuota() throws {
        // Streams younger than `shedIdleAfterMs` could not be shed: 32 of them filled every slot.
        let receiver = try makeReceiver()
        defer { receiver.stop() }
        #expect(receiver.limits.maxStreams < receiver.limits.maxConnections)
        let streams = try openStreams(receiver, count: 40)
        defer { streams.forEach { close($0) } }
        let statuses = try (0..<20).map { index in try post(receiver, Self.submission(summary: "honest \(index)")).status }
        #expect(statuses.allSatisfy { $0 == 200 }, "\(statuses)")
        // The 32 oldest streams were closed for newer ones: they read the end of the stream.
        var chunk = [UInt8](repeating: 0, count: 4_096)
        for (index, stream) in streams.prefix(32).enumerated() {
            var count = 1
            while count > 0 { count = recv(stream, &chunk, chunk.count, 0) }
            #expect(count == 0, "stream \(index) was closed, not timed out")
        }
        #expect(receiver.openConnections <= receiver.limits.maxStreams, "only the newest streams are served")
    }

    @Test("T-2: an entry keeps each field cut to its bound (a character never split); the stored report stays whole")
    func entriesBounded() throws {
        let receiver = try makeReceiver()
        defer { receiver.stop() }
        let long = String(repeating: "é", count: 2_000)
        let attributes = Dictionary(uniqueKeysWithValues: (0..<200).map { ("key\($0)", long) })
        let submission = Self.submission(summary: "s" + long, attributes: attributes, labels: (0..<100).map { "label-\($0)-" + long })
        #expect(try post(receiver, submission).status == 200)
        let entry = try #require(try json(receiver, "/api/reports")["reports"]?.arrayValue?.first)
        let summary = try #require(entry["summary"]?.stringValue)
        #expect(summary.utf8.count <= 1_024 && summary.utf8.count > 1_000 && summary.hasPrefix("sé"))
        #expect(entry["labels"]?.arrayValue?.count == 0, "a label longer than the labels' bound is not kept")
        // Attribute values are cut, and only the first few kept: an attribute filter sees them.
        #expect(try json(receiver, "/api/reports?attribute=key0")["total"]?.intValue == 1)
        #expect(try json(receiver, "/api/reports?attribute=key199")["total"]?.intValue == 0)
        let stored = try JSONValue.parse(try httpRequest(port: receiver.port, "/api/reports/\(submission.uuid)").body)
        #expect(stored["attributes"]?["key199"]?.stringValue == long)
    }

    @Test("T-2 chaos: answers drawn by seed (the same seed, the same answers), 429 and 503 with Retry-After, marked in the request list, nothing stored")
    func chaos() throws {
        func answers(seed: UInt64) throws -> (statuses: [Int], receiver: LocalReceiver) {
            let receiver = try makeReceiver(chaos: try Chaos("429:0.2,503:0.1,413:0.05,500:0.05", seed: seed))
            var statuses: [Int] = []
            for index in 0..<200 {
                let answer = try post(receiver, Self.submission(summary: "n\(index)"))
                statuses.append(answer.status)
                if answer.status == 429 || answer.status == 503 { #expect(answer.headers["retry-after"] == "1") }
            }
            return (statuses, receiver)
        }
        let (first, receiver) = try answers(seed: 42)
        defer { receiver.stop() }
        let (again, other) = try answers(seed: 42)
        other.stop()
        #expect(first == again)
        let (different, third) = try answers(seed: 43)
        third.stop()
        #expect(first != different)
        let counts = Dictionary(first.map { ($0, 1) }, uniquingKeysWith: +)
        #expect(Set(counts.keys) == [200, 429, 503, 413, 500])
        // 40% faults in all: far from none and from all of 200.
        #expect((50...110).contains(200 - (counts[200] ?? 0)), "\(counts)")
        let requests = try #require(try json(receiver, "/api/requests")["requests"]?.arrayValue)
        #expect(requests.map { $0["chaos"]?.boolValue == true } == first.map { $0 != 200 })
        #expect(try json(receiver, "/api/reports")["total"]?.intValue == counts[200])
    }

    @Test("T-2 chaos: slow answers as usual, late: stored, 200, marked chaos; reset stores nothing")
    func slowAndReset() throws {
        let slow = try makeReceiver(chaos: try Chaos("slow:1", seed: 0))
        defer { slow.stop() }
        let submission = Self.submission(summary: "late")
        #expect(try post(slow, submission).status == 200)
        #expect(try json(slow, "/api/reports")["reports"]?.arrayValue?.first?["id"]?.stringValue == submission.uuid)
        #expect(try json(slow, "/api/requests")["requests"]?.arrayValue?.first?["chaos"]?.boolValue == true)
        let reset = try makeReceiver(chaos: try Chaos("reset:1", seed: 0))
        defer { reset.stop() }
        #expect(throws: HTTPExchangeFailed.self) { try post(reset, Self.submission(summary: "lost")) }
        #expect(try json(reset, "/api/reports")["total"]?.intValue == 0)
        #expect(try json(reset, "/api/requests")["requests"]?.arrayValue?.first?["answer"]?.stringValue == "reset")
    }

    @Test("T-2 chaos: a spec that is not CODE:P, an unknown fault, a probability outside [0, 1] or a sum over 1 is refused, naming it")
    func chaosSpecErrors() {
        for (text, named) in [("429", "'429' is not CODE:P"), ("418:0.1", "'418' is not a chaos fault"), ("503:1.5", "probability '1.5'"),
            ("503:0.6,429:0.6", "add up to 1.2")]
        {
            #expect(throws: Chaos.SpecError.self) { try Chaos(text, seed: 0) }
            do {
                _ = try Chaos(text, seed: 0)
            } catch {
                #expect(error.description.contains(named), "\(error.description)")
            }
        }
    }

    @Test("T-2: reports already in the folder are listed when the inbox starts")
    func listsStoredReports() throws {
        let shared = folder.appendingPathComponent("shared")
        let first = try LocalReceiver(folder: shared, inbox: true)
        let submission = Self.submission(summary: "from an earlier run")
        try post(first, submission)
        first.stop()
        let second = try LocalReceiver(folder: shared, inbox: true)
        defer { second.stop() }
        #expect(try json(second, "/api/reports")["reports"]?.arrayValue?.first?["id"]?.stringValue == submission.uuid)
    }
}
