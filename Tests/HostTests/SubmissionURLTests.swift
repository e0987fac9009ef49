import Foundation
import HostTestSupport
import Testing

@testable import Host
@testable import HostCapture
@testable import HostModel
@testable import HostSupport
@testable import HostDelivery
@testable import HostPlugins
@testable import HostRecovery
@testable import HostStore

/// One URL parser for checking and sending (SPEC D-9, I-2): what libcurl would refuse is a
/// configuration error, and a transfer's "this configuration cannot work" holds the report.
@Suite struct SubmissionURLTests {
    @Test("D-9: a port past 65535, a space in the host, an unclosed IPv6 bracket are configuration errors naming libcurl's reason")
    func formsLibcurlRefuses() {
        for (text, reason) in [
            ("http://127.0.0.1:443000/post", "Port number"), ("http://127.0.0.1:99999/post", "Port number"),
            ("https://exa mple.com/post", "hostname"), ("https://[bad/post", "IPv6"),
        ] {
            do {
                _ = try LibcurlURL.check(text, allowInsecure: false)
                Issue.record("\(text) was accepted")
            } catch {
                #expect(error.description.contains("is malformed") && error.description.contains(reason), "\(text): \(error)")
            }
        }
    }

    @Test("I-2: `report` with a URL libcurl refuses exits 2 naming the key and the reason, before anything is opened")
    func commandRefusesBeforeOpening() throws {
        let folder = makeTemporaryDirectory("url-cli")
        let config = folder.appendingPathComponent("c.json")
        try #"{"submission": {"url": "http://127.0.0.1:443000/post?format=json&token=t"}}"#.write(to: config, atomically: true, encoding: .utf8)
        let result = try ChildProcess.reporthost(["report", "bug", "--config", config.path], directory: folder)
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stderr.contains("key 'submission.url'") && result.stderr.contains("Port number"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent(".reporthost").path))
    }

    /// A C program that asks libcurl itself: a real POST to each URL read from stdin, every
    /// connection redirected to a closed loopback port (`CURLOPT_CONNECT_TO`, no DNS, no
    /// proxy), printing the transfer's `CURLcode`.
    static let verdictProgram = """
        #include <curl/curl.h>
        #include <stdio.h>
        #include <string.h>
        int main(void) {
            curl_global_init(CURL_GLOBAL_DEFAULT);
            struct curl_slist *redirect = curl_slist_append(NULL, "::127.0.0.1:1");
            char line[4096];
            while (fgets(line, sizeof line, stdin)) {
                line[strcspn(line, "\\n")] = 0;
                CURL *curl = curl_easy_init();
                curl_easy_setopt(curl, CURLOPT_URL, line);
                curl_easy_setopt(curl, CURLOPT_CONNECT_TO, redirect);
                curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
                curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "x");
                curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
                curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 3000L);
                printf("%d\\n", (int)curl_easy_perform(curl));
                curl_easy_cleanup(curl);
            }
            return 0;
        }
        """

    /// URLs made by mutating valid loopback ones: characters inserted, replaced and removed
    /// from an alphabet of URL punctuation, digits, spaces, control and non-ASCII characters.
    static func mutatedURLs(count: Int, seed: UInt64) -> [String] {
        var random = SplitMix64(seed: seed)
        let bases = [
            "http://127.0.0.1:8080/post?format=json&token=abc", "https://localhost/post?format=json&token=t",
            "http://[::1]:9000/u/tok/json", "https://user:pw@127.0.0.2:443/a/b/json", "http://localhost.:80/p#frag",
        ]
        let alphabet = Array(":/[]@%?#.&=-_~+ 0123456789abcdefABCDEF\t\\|^`{}<>\"'\u{7f}\u{e9}\u{2028}")
        return (0..<count).map { _ in
            var text = Array(bases[Int(random.next() % UInt64(bases.count))])
            for _ in 0...(random.next() % 3) {
                let at = Int(random.next() % UInt64(text.count + 1))
                let character = alphabet[Int(random.next() % UInt64(alphabet.count))]
                switch random.next() % 3 {
                case 0: text.insert(character, at: at)
                case 1 where at < text.count: text[at] = character
                default: if at < text.count { text.remove(at: at) }
                }
            }
            // Digits after a colon make ports of every size.
            if random.next() % 4 == 0 { text = Array(String(text).replacing(":9000", with: ":\(random.next() % 200_000)")) }
            return String(text).replacing("\n", with: "")
        }
    }

    @Test("D-9: a fuzz of 2,000 URLs: every URL the check accepts, libcurl's own transfer accepts too")
    func agreesWithLibcurl() throws {
        let folder = makeTemporaryDirectory("url-verdict")
        let source = folder.appendingPathComponent("verdict.c")
        try Self.verdictProgram.write(to: source, atomically: true, encoding: .utf8)
        let program = folder.appendingPathComponent("verdict")
        try Fixtures.compile([source.path, "-o", program.path, "-lcurl"])
        let urls = Self.mutatedURLs(count: 2_000, seed: 30)
        let result = try ChildProcess.run(program.path, [], input: Data((urls.joined(separator: "\n") + "\n").utf8))
        let codes = result.stdout.split(separator: "\n").map { Int($0) ?? -1 }
        try #require(codes.count == urls.count, "\(result.stderr)")
        var accepted = 0
        var refusedByBoth = 0
        for (url, code) in zip(urls, codes) {
            let ours = (try? LibcurlURL.check(url, allowInsecure: true)) != nil
            // 1 unsupported protocol, 3 malformed: libcurl will not try; anything else tried to connect.
            let libcurlRefuses = code == 1 || code == 3
            if ours {
                accepted += 1
                #expect(!libcurlRefuses, "accepted \(url.debugDescription), which libcurl refuses (CURLcode \(code))")
            } else if libcurlRefuses {
                refusedByBoth += 1
            }
        }
        // The fuzz reaches both sides of the line.
        #expect(accepted > 200 && refusedByBoth > 200, "accepted \(accepted), refused by both \(refusedByBoth)")
    }

    /// Sends every request to a URL the check would have refused, as a transfer-time
    /// configuration failure would come.
    struct RefusedURLTransport: SubmissionTransport {
        func post(_ url: URL, body: RequestBody, timeoutMs: Int) -> TransportResult {
            CurlTransport().post(URL(string: "http://127.0.0.1:99999/post")!, body: body, timeoutMs: timeoutMs)
        }
    }

    @Test("D-9: a transfer libcurl refuses for its URL holds the report with libcurl's reason; it is never an attempt, never terminal")
    func transferRefusedForItsURL() throws {
        let repository = try Repository.open(folder: makeTemporaryDirectory("url-held"))
        var content = ReportContent()
        content.summary = "kept"
        content.attachments = [Attachment(name: "log.txt", filename: "log.txt", data: Data("copy".utf8), source: .extended)]
        let document = ReportDocument(id: UUID().uuidString.lowercased(), trigger: .crash, content: content, internalLog: [], createdAt: Date())
        let rowID = try repository.seedRecord(document, state: .awaitingFirstAttempt)
        var configuration = Configuration()
        configuration.submission.url = "http://127.0.0.1:9/post"
        configuration.retry.limit = 1
        let log = MemoryDestination()
        let deliverer = Deliverer(
            repository: repository, configuration: configuration, transport: RefusedURLTransport(), logger: HostLogger(destinations: [log]))
        for _ in 0..<3 { _ = try deliverer.deliver(retries: true) }
        let record = try #require(try repository.records().first { $0.rowID == rowID })
        #expect(record.state == .held, "\(log.lines)")
        #expect(record.attempts == 0)
        #expect(record.held?.contains("bad/illegal format") == true, "\(record.held ?? "nil")")
        #expect(try repository.attachments(of: rowID).count == 1, "the attachment copy is kept")
    }
}
