import FoundationEssentials
import Glibc
import HTTPPost
import HostModel
import HostSupport
import HostStore

/// What one submission attempt came to, from the network's side.
package enum TransportResult: Sendable, Equatable {
    /// The server answered with `status`; `retryAfter` when it sent a Retry-After header.
    case response(status: Int, retryAfter: TimeInterval?)
    /// No HTTP answer: refused, reset, timed out, DNS… (retryable, SPEC D-9).
    case transportFailure(String)
    /// No attempt could carry the request whatever the network does: the configuration is at
    /// fault (a URL libcurl refuses). Held with the reason, never an attempt (D-9).
    case configurationFailure(String)
    /// Ended by the host itself (it is stopping): settled as an interrupted submission, due
    /// again at once; the pass stops.
    case cancelled
}

/// Sends requests. A protocol so delivery can be driven without a network in unit tests;
/// the real one is `CurlTransport`.
package protocol SubmissionTransport: Sendable {
    func post(_ url: URL, body: RequestBody, timeoutMs: Int) -> TransportResult
    /// POSTs each body to `url`, started in order, at most `inFlight` at once; the results
    /// in the same order. By default one after the other through `post`.
    func post(_ bodies: [RequestBody], to url: URL, inFlight: Int, timeoutMs: Int) -> [TransportResult]
}

/// One request body: its type and its bytes, in memory or in a file.
package struct RequestBody: Sendable {
    package enum Content: Sendable, Equatable {
        case bytes([UInt8])
        case file(URL)
    }

    package var contentType: String
    package var content: Content
    /// One more header line sent with it (Sentry's `X-Sentry-Auth`), or nil.
    package var header: String?

    package init(contentType: String, file: URL, header: String? = nil) {
        self.contentType = contentType
        self.content = .file(file)
        self.header = header
    }

    package init(contentType: String, bytes: [UInt8], header: String? = nil) {
        self.contentType = contentType
        self.content = .bytes(bytes)
        self.header = header
    }
}

extension SubmissionTransport {
    package func post(_ bodies: [RequestBody], to url: URL, inFlight: Int, timeoutMs: Int) -> [TransportResult] {
        bodies.map { post(url, body: $0, timeoutMs: timeoutMs) }
    }
}

/// HTTP(S) through libcurl (Debian's libcurl4, OpenSSL for TLS), on the delivering thread
/// (`Sources/HTTPPost`). Chosen over FoundationNetworking's URLSession, which wraps the same
/// libcurl but ends the process (`try!`) on some of its error codes: a misbehaving server
/// must not take the crash reporter down.
///
/// One libcurl client per transport: its connections stay open between requests and passes
/// (keep-alive), and a batch has up to `inFlight` requests on the wire at once.
///
/// What a server sends is bounded: only the status line and `Retry-After` are kept (in fixed
/// buffers); a body is read (and dropped) only when the head announces 16 KB or less, and for
/// at most a second after the head, else the transfer ends with the head; each request has a
/// whole-request deadline (four times `timeoutMs`, at least 5 s), because the idle limit
/// restarts on every byte (a server trickling its answer would hold the host, and its
/// repository lock, for ever). Redirects are not followed (a 3xx is an answer, D-9), so a
/// server cannot send a report on to a host the submission policy would refuse; only http
/// and https are spoken.
///
/// # Thread safety
/// The client is used by one call at a time (a lock); `cancellation` is an atomic flag.
package struct CurlTransport: SubmissionTransport {
    /// Set from another thread, it ends a request in flight within about a second.
    package let cancellation: Cancellation?
    private let client = CurlClient()

    package init(cancellation: Cancellation? = nil) { self.cancellation = cancellation }

    /// - Parameter timeoutMs: the idle limit (`submission.timeoutMs`): for connecting, and for
    ///   any stretch with no byte moving (libcurl counts that in whole seconds: rounded up).
    package func post(_ url: URL, body: RequestBody, timeoutMs: Int) -> TransportResult {
        post([body], to: url, inFlight: 1, timeoutMs: timeoutMs)[0]
    }

    package func post(_ bodies: [RequestBody], to url: URL, inFlight: Int, timeoutMs: Int) -> [TransportResult] {
        // A loopback server is reached directly: a proxy from the environment would see its
        // token in clear and could answer 200 for a server that does not exist.
        let direct: Int32 = SubmissionURL.isLoopback(url.host ?? "") ? 1 : 0
        var results = [rh_http_result](repeating: rh_http_result(), count: bodies.count)
        var returns = [Int32](repeating: -1, count: bodies.count)
        let posted = client.withClient { handle in
            // Every string and in-memory body, one after the other in one buffer that lives
            // until the call returns; the C structures point into it.
            var buffer: [UInt8] = []
            func append(_ bytes: some Sequence<UInt8>) -> Int {
                defer { buffer.append(contentsOf: bytes) }
                return buffer.count
            }
            let spans = bodies.map { body -> (type: Int, header: Int?, path: Int?, bytes: Range<Int>?) in
                let type = append(body.contentType.utf8 + [0])
                let header = body.header.map { append($0.utf8 + [0]) }
                switch body.content {
                case .file(let file): return (type, header, append(file.path.utf8 + [0]), nil)
                case .bytes(let bytes):
                    let start = append(bytes)
                    return (type, header, nil, start..<buffer.count)
                }
            }
            buffer.withUnsafeBytes { raw in
                // Never empty: every body has its type and a NUL.
                let base = raw.baseAddress!
                func text(_ offset: Int) -> UnsafePointer<CChar> { (base + offset).assumingMemoryBound(to: CChar.self) }
                let requests = spans.map { span in
                    rh_http_body(
                        content_type: text(span.type), header: span.header.map(text), body_path: span.path.map(text),
                        bytes: span.bytes.map { base + $0.lowerBound }, length: span.bytes?.count ?? 0)
                }
                rh_http_client_post(
                    handle, url.absoluteString, requests, requests.count, max(1, inFlight), min(timeoutMs, Limits.maxMilliseconds),
                    Self.wholeRequestMilliseconds(timeoutMs), direct, cancellation?.flag, &results, &returns)
            }
        }
        guard posted else {
            let failure = rh_http_load_failure().map { String(cString: $0) } ?? "libcurl could not start"
            return bodies.map { _ in .transportFailure(failure) }
        }
        return zip(results, returns).map { result, status in
            var result = result
            if status == RH_HTTP_CANCELLED { return .cancelled }
            if status == RH_HTTP_CONFIGURATION { return .configurationFailure(String(fixedCBuffer: &result.failure)) }
            guard status == 0 else { return .transportFailure(String(fixedCBuffer: &result.failure)) }
            // Sentry's rate limits for a report's categories count as a Retry-After (SPEC S-3).
            let after = Self.retryAfter(String(fixedCBuffer: &result.retry_after))
            let limited = SentryRateLimits.eventLimit(String(fixedCBuffer: &result.rate_limits))
            return .response(status: Int(result.status), retryAfter: limited.map { max($0, after ?? 0) } ?? after)
        }
    }

    /// The whole-request deadline for an idle timeout of `timeoutMs`: four times it (a
    /// minute by default, room for a 9 MB upload on a slow link), and never under 5 s.
    static func wholeRequestMilliseconds(_ timeoutMs: Int) -> Int { max(5_000, min(timeoutMs, Limits.maxMilliseconds) * 4) }

    /// The longest `Retry-After` honoured (30 days, the longest retry interval): a server
    /// cannot park a report, or a date computation, beyond it.
    static let maxRetryAfterSeconds: TimeInterval = 2_592_000

    /// Seconds from a Retry-After value: delta-seconds or an HTTP date, clamped to 0 ...
    /// `maxRetryAfterSeconds`; nil when absent or unreadable (`inf`, `nan`, garbage).
    static func retryAfter(_ value: String?) -> TimeInterval? {
        guard let value = value?.trimmed, !value.isEmpty, value.count <= 64 else { return nil }
        if let seconds = Double(value) {
            guard seconds.isFinite else { return nil }
            return min(max(0, seconds), maxRetryAfterSeconds)
        }
        return httpDate(value).map { min(max(0, $0.timeIntervalSinceNow), maxRetryAfterSeconds) }
    }

    private static let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// An HTTP date (RFC 9110 5.6.7) in GMT: `Sun, 06 Nov 1994 08:49:37 GMT`, or the obsolete
    /// forms a recipient must still read, `Sunday, 06-Nov-94 08:49:37 GMT` and
    /// `Sun Nov  6 08:49:37 1994`. Read in fixed English names, whatever the process's locale.
    static func httpDate(_ text: String) -> Date? {
        let words = text.split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init)
        let day, month, year, time: String
        switch words.count {
        case 6 where words[5] == "GMT": (day, month, year, time) = (words[1], words[2], words[3], words[4])
        case 4 where words[3] == "GMT":
            let parts = words[1].split(separator: "-").map(String.init)
            guard parts.count == 3, let short = Int(parts[2]), parts[2].count == 2 else { return nil }
            (day, month, time) = (parts[0], parts[1], words[2])
            year = String(short < 70 ? 2000 + short : 1900 + short)
        case 5: (day, month, year, time) = (words[2], words[1], words[4], words[3])
        default: return nil
        }
        let clock = time.split(separator: ":").compactMap { Int32($0) }
        guard let day = Int32(day), (1...31).contains(day), let month = monthNames.firstIndex(of: month),
            let year = Int32(year), (1970...9999).contains(year), clock.count == 3, (0...23).contains(clock[0]),
            (0...59).contains(clock[1]), (0...60).contains(clock[2])
        else { return nil }
        var parts = tm()
        (parts.tm_year, parts.tm_mon, parts.tm_mday) = (year - 1900, Int32(month), day)
        (parts.tm_hour, parts.tm_min, parts.tm_sec) = (clock[0], clock[1], clock[2])
        return Date(timeIntervalSince1970: TimeInterval(timegm(&parts)))
    }
}

/// The libcurl client of a `CurlTransport` (its open connections), made on first use, freed
/// with the transport.
///
/// # Thread safety
/// A lock: one batch at a time.
private final class CurlClient: @unchecked Sendable {
    private let handle = Locked<OpaquePointer?>(nil)

    /// Runs `body` with the client; false when libcurl cannot be used (`rh_http_load_failure`).
    func withClient(_ body: (OpaquePointer) -> Void) -> Bool {
        handle.withLock { handle in
            if handle == nil { handle = rh_http_client_new() }
            guard let handle else { return false }
            body(handle)
            return true
        }
    }

    deinit { handle.withLock { rh_http_client_free($0) } }
}

/// A flag that ends requests in flight (`CurlTransport`): set once, never cleared.
///
/// # Thread safety
/// The flag is read and written with atomics (the C side reads it on libcurl's thread).
package final class Cancellation: @unchecked Sendable {
    let flag = UnsafeMutablePointer<Int32>.allocate(capacity: 1)

    package init() { flag.initialize(to: 0) }

    deinit { flag.deallocate() }

    /// Ends the requests in flight and refuses later ones ("cancelled").
    package func cancel() { rh_cancel_set(flag) }
}

/// libcurl's own reading of a URL (`rh_http_parse_url`): what a transfer would refuse is
/// refused when the configuration is read.
package enum LibcurlURL {
    package enum Verdict: Equatable {
        case parsed(scheme: String, host: String)
        case refused(String)
        /// libcurl cannot be loaded: delivery fails for that reason, retryably, anyway.
        case unavailable
    }

    /// `SubmissionURL`'s check, then libcurl's on what the user wrote and on what is sent
    /// (Foundation may have percent-encoded the text), so a URL a transfer would refuse (a
    /// port over 65535, a space in the host, `[bad`) is a configuration error before
    /// anything is opened, never a failed attempt. Loopback is decided on the host libcurl
    /// connects to as well.
    package static func check(_ text: String, allowInsecure: Bool) throws(SubmissionURL.Problem) -> SubmissionURL {
        if case .refused(let reason) = parse(text) { throw .malformed(SubmissionURL.redact(text), reason: reason) }
        let checked = try SubmissionURL(text, allowInsecure: allowInsecure)
        let scheme = checked.url.scheme?.lowercased() ?? ""
        switch parse(checked.url.absoluteString) {
        case .refused(let reason): throw .malformed(SubmissionURL.redact(text), reason: reason)
        case .parsed(let parsedScheme, _) where parsedScheme != scheme: throw .unsupportedScheme(parsedScheme)
        case .parsed(_, let host) where scheme == "http" && !allowInsecure && !SubmissionURL.isLoopback(host): throw .insecure(host: host)
        case .parsed, .unavailable: return checked
        }
    }

    static func parse(_ text: String) -> Verdict {
        var scheme = [CChar](repeating: 0, count: 32)
        var host = [CChar](repeating: 0, count: 1_024)
        var why = [CChar](repeating: 0, count: 256)
        let parsed = rh_http_parse_url(text, &scheme, scheme.count, &host, host.count, &why, why.count)
        switch parsed {
        case 1: return .parsed(scheme: string(scheme), host: string(host))
        case 0: return .refused(string(why))
        default: return .unavailable
        }
    }

    private static func string(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
