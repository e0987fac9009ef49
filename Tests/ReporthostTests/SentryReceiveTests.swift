import Foundation
import Glibc
import Host
import HostSupport
import HostTestSupport
import Testing

/// SPEC S-4: `reporthost receive` takes what Sentry SDKs send, and the inbox lists it.
@Suite struct SentryReceiveTests {
    let fixture = CommandFixture("sentry-receive")

    /// Runs `code` with the project's venv python (sentry-sdk, brotli); its stdout.
    func python(_ code: String, _ arguments: [String]) throws -> String {
        try #require(FileManager.default.isExecutableFile(atPath: Products.python.path), "run scripts/test: it installs sentry-sdk into .build/venv")
        let ran = try ChildProcess.run(Products.python.path, ["-c", code] + arguments)
        #expect(ran.status == 0, "\(ran.stderr)")
        return ran.stdout
    }

    func listed(_ port: UInt16) throws -> [JSONValue] {
        try JSONValue.parse(try httpRequest(port: port, "/api/reports").body)["reports"]?.arrayValue ?? []
    }

    @Test("S-4: the official sentry-sdk (PyPI) sends an exception to `reporthost receive` with its DSN pointed there; the inbox lists it as `type: value`")
    func sentrySDK() async throws {
        try await offPool { [self] in
            let (receiver, port) = try fixture.receive(["--inbox"])
            defer {
                kill(receiver.pid, SIGTERM)
                receiver.wait()
            }
            _ = try python("""
                import sys, sentry_sdk
                sentry_sdk.init(dsn=sys.argv[1], release="shop@2.0")
                sentry_sdk.set_tag("region", "eu")
                try:
                    1 / 0
                except ZeroDivisionError:
                    sentry_sdk.capture_exception()
                sentry_sdk.flush(10)
                """, ["http://0123456789abcdef0123456789abcdef@127.0.0.1:\(port)/1"])
            let entry = try #require(try listed(port).first, "\(receiver.log)")
            #expect(entry["summary"]?.stringValue == "ZeroDivisionError: division by zero")
            #expect(entry["type"]?.stringValue == "Exception")
            let report = try JSONValue.parse(try httpRequest(port: port, "/api/reports/\(entry["id"]?.stringValue ?? "")").body)
            #expect(report["attributes"]?["region"]?.stringValue == "eu" && report["attributes"]?["release"]?.stringValue == "shop@2.0",
                    "\(report)")
        }
    }

    @Test("S-4: an envelope gzip, deflate or br compressed is inflated; one that is not what its Content-Encoding says is 400; another site's page is refused 403; a sessions-only envelope stores nothing")
    func encodings() async throws {
        try await offPool { [self] in
            let (receiver, port) = try fixture.receive(["--inbox"])
            defer {
                kill(receiver.pid, SIGTERM)
                receiver.wait()
            }
            let statuses = try python("""
                import brotli, json, sys, urllib.request, uuid, zlib, gzip
                url = f"http://127.0.0.1:{sys.argv[1]}/api/1/envelope/"
                def envelope(text):
                    event = json.dumps({"event_id": uuid.uuid4().hex, "message": text, "level": "error"}).encode()
                    return b'{"dsn": "http://k@127.0.0.1/1"}\\n' + json.dumps({"type": "event", "length": len(event)}).encode() + b"\\n" + event + b"\\n"
                def post(body, encoding=None, origin=None):
                    headers = {"Content-Type": "application/x-sentry-envelope", "X-Sentry-Auth": "Sentry sentry_key=k, sentry_version=7"}
                    if encoding: headers["Content-Encoding"] = encoding
                    if origin: headers["Origin"] = origin
                    try:
                        with urllib.request.urlopen(urllib.request.Request(url, data=body, headers=headers), timeout=10) as answer:
                            return answer.status
                    except urllib.error.HTTPError as error:
                        return error.code
                sessions = b'{}\\n{"type": "session"}\\n{"sid": "x", "status": "ok"}\\n'
                print(json.dumps([post(envelope("plain")), post(gzip.compress(envelope("gzip")), "gzip"),
                                  post(zlib.compress(envelope("deflate")), "deflate"), post(brotli.compress(envelope("br")), "br"),
                                  post(b"not gzip at all", "gzip"), post(envelope("elsewhere"), origin="https://evil.example"),
                                  post(envelope("local page"), origin="http://localhost:5173"), post(sessions)]))
                """, [String(port)])
            let answered = try JSONValue.parse(statuses).arrayValue?.compactMap(\.intValue)
            #expect(answered == [200, 200, 200, 200, 400, 403, 200, 200], "\(statuses)")
            let summaries = Set(try listed(port).compactMap { $0["summary"]?.stringValue })
            #expect(summaries == ["plain", "gzip", "deflate", "br", "local page"], "\(summaries)")
        }
    }
}
