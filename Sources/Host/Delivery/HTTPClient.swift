import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What one submission attempt came to, from the network's side.
public enum TransportResult: Sendable, Equatable {
    /// The server answered with `status`; `retryAfter` when it sent a Retry-After header.
    case response(status: Int, retryAfter: TimeInterval?)
    /// No HTTP answer: refused, reset, timed out, DNS… (retryable, SPEC D-9).
    case transportFailure(String)
}

/// Sends one request. A protocol so delivery can be driven without a network in unit tests;
/// the real one is `URLSessionTransport`.
public protocol SubmissionTransport: Sendable {
    func post(_ url: URL, contentType: String, bodyFile: URL, timeoutMs: Int) -> TransportResult
}

/// HTTP(S) through FoundationNetworking's URLSession: TLS for real Backtrace instances,
/// keep-alive across the reports of one run, and at most two connections per host. Chosen
/// over libcurl because it ships with the toolchain (no extra package) and its error codes
/// tell refused, reset, timeout and DNS apart.
///
/// What a server sends is bounded: the response body is never read (the status and
/// `Retry-After` are all delivery needs: the task is cancelled once the head arrives), and
/// each request has a whole-request deadline (four times `timeoutMs`, at least 5 s), because the session's
/// timeout restarts on every byte (a server trickling its answer would hold the host, and
/// its repository lock, forever). Redirects are not followed (a 3xx is an answer, D-9), so
/// a server cannot send a report on to a host the submission policy would refuse.
///
/// # Thread safety
/// The session's delegate keeps each task's outcome behind a `Locked`.
public final class URLSessionTransport: SubmissionTransport {
    private let configuration: URLSessionConfiguration

    /// - Parameter timeoutMs: the idle timeout (`submission.timeoutMs`). FoundationNetworking
    ///   on Linux applies the session's timeout, not the request's, to upload tasks.
    public init(timeoutMs: Int = 15_000) {
        configuration = URLSessionConfiguration.ephemeral
        // FoundationNetworking keeps whole seconds only (1500 ms would become 1 s, 500 ms a
        // timer that fires at once): round up.
        configuration.timeoutIntervalForRequest = Self.wholeSeconds(timeoutMs)
        configuration.httpMaximumConnectionsPerHost = 2
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
    }

    /// One session per request: a task cancelled at its head may go on draining a body the
    /// server never stops sending on its session's queue (FoundationNetworking), and the next
    /// request must not wait behind it. Keep-alive is lost; a crash reporter sends rarely.
    public func post(_ url: URL, contentType: String, bodyFile: URL, timeoutMs: Int) -> TransportResult {
        var request = URLRequest(url: url, timeoutInterval: Self.wholeSeconds(timeoutMs))
        request.httpMethod = "POST"
        request.setValue(contentType, forHTTPHeaderField: "Content-Type")
        let delegate = SessionDelegate()
        let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        defer { session.invalidateAndCancel() }
        let result = WaitableState<TransportResult?>(nil)
        let task = session.uploadTask(with: request, fromFile: bodyFile)
        delegate.register(task.taskIdentifier) { outcome in result.update { $0 = $0 ?? outcome } }
        defer {
            delegate.unregister(task.taskIdentifier)
            task.cancel()
        }
        task.resume()
        let clock = SystemClock()
        let totalMs = Self.wholeRequestMilliseconds(timeoutMs)
        let outcome = result.wait(
            until: clock.now().advanced(byMilliseconds: totalMs), clock: clock, for: { $0 != nil }, then: { value, _ in value })
        guard let outcome else {
            task.cancel()
            return .transportFailure("timed out (no whole answer within \(totalMs) ms)")
        }
        return outcome
    }

    /// `timeoutMs` as whole seconds, rounded up, at least 1.
    static func wholeSeconds(_ timeoutMs: Int) -> TimeInterval { max(1, (Double(timeoutMs) / 1000).rounded(.up)) }

    /// The whole-request deadline for an idle timeout of `timeoutMs`: four times it (a
    /// minute by default, room for a 9 MB upload on a slow link), and never under 5 s.
    static func wholeRequestMilliseconds(_ timeoutMs: Int) -> Int { max(5_000, min(timeoutMs, Limits.maxMilliseconds) * 4) }

    /// The longest `Retry-After` honoured (30 days, the longest retry interval): a server
    /// cannot park a report, or a date computation, beyond it.
    static let maxRetryAfterSeconds: TimeInterval = 2_592_000

    /// Seconds from a Retry-After value: delta-seconds or an HTTP date, clamped to 0 ...
    /// `maxRetryAfterSeconds`; nil when absent or unreadable (`inf`, `nan`, garbage).
    static func retryAfter(_ value: String?) -> TimeInterval? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty, value.count <= 64 else { return nil }
        if let seconds = Double(value) {
            guard seconds.isFinite else { return nil }
            return min(max(0, seconds), maxRetryAfterSeconds)
        }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: value).map { min(max(0, $0.timeIntervalSinceNow), maxRetryAfterSeconds) }
    }

    /// Turns each task's head (or its error) into a `TransportResult`, and cancels the task
    /// once the head is known: the body is never read.
    ///
    /// # Thread safety
    /// `@unchecked Sendable`: the only state is the `Locked` table of waiters.
    final class SessionDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
        private let waiters = Locked<[Int: @Sendable (TransportResult) -> Void]>([:])

        func register(_ task: Int, _ deliver: @escaping @Sendable (TransportResult) -> Void) {
            waiters.withLock { $0[task] = deliver }
        }

        func unregister(_ task: Int) { _ = waiters.withLock { $0.removeValue(forKey: task) } }

        private func deliver(_ task: Int, _ result: TransportResult) {
            waiters.withLock { $0[task] }?(result)
        }

        func urlSession(
            _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
            completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
        ) {
            if let http = response as? HTTPURLResponse {
                let retryAfter = URLSessionTransport.retryAfter(http.value(forHTTPHeaderField: "Retry-After"))
                deliver(dataTask.taskIdentifier, .response(status: http.statusCode, retryAfter: retryAfter))
            }
            completionHandler(.cancel)
        }

        func urlSession(
            _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
            newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void
        ) {
            completionHandler(nil)
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
            if let http = task.response as? HTTPURLResponse {
                let retryAfter = URLSessionTransport.retryAfter(http.value(forHTTPHeaderField: "Retry-After"))
                deliver(task.taskIdentifier, .response(status: http.statusCode, retryAfter: retryAfter))
            } else {
                deliver(task.taskIdentifier, .transportFailure(URLSessionTransport.describe(error)))
            }
        }
    }

    static func describe(_ error: (any Error)?) -> String {
        guard let error = error as? URLError else { return error.map { "\($0)" } ?? "no response" }
        switch error.code {
        case .timedOut: return "timed out"
        case .cannotConnectToHost: return "connection refused"
        case .networkConnectionLost: return "connection reset"
        case .cannotFindHost, .dnsLookupFailed: return "host not found (DNS)"
        case .notConnectedToInternet: return "no network"
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate: return "TLS failure"
        default: return "network error \(error.code.rawValue)"
        }
    }
}

/// For passes that only settle records and never send.
struct NoTransport: SubmissionTransport {
    func post(_ url: URL, contentType: String, bodyFile: URL, timeoutMs: Int) -> TransportResult {
        .transportFailure("no transport")
    }
}
