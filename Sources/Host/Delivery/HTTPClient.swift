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
/// keep-alive across the reports of one run, a request timeout, and at most two connections
/// per host. Chosen over libcurl because it ships with the toolchain (no extra package) and
/// its error codes tell refused, reset, timeout and DNS apart.
public final class URLSessionTransport: SubmissionTransport {
    private let session: URLSession

    /// - Parameter timeoutMs: the request timeout (`submission.timeoutMs`). FoundationNetworking
    ///   on Linux applies the session's timeout, not the request's, to upload tasks.
    public init(timeoutMs: Int = 15_000) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = Double(timeoutMs) / 1000
        configuration.httpMaximumConnectionsPerHost = 2
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        session = URLSession(configuration: configuration)
    }

    public func post(_ url: URL, contentType: String, bodyFile: URL, timeoutMs: Int) -> TransportResult {
        var request = URLRequest(url: url, timeoutInterval: Double(timeoutMs) / 1000)
        request.httpMethod = "POST"
        request.setValue(contentType, forHTTPHeaderField: "Content-Type")
        let result = WaitableState<TransportResult?>(nil)
        let task = session.uploadTask(with: request, fromFile: bodyFile) { _, response, error in
            let outcome: TransportResult
            if let http = response as? HTTPURLResponse {
                outcome = .response(status: http.statusCode, retryAfter: Self.retryAfter(http.value(forHTTPHeaderField: "Retry-After")))
            } else {
                outcome = .transportFailure(Self.describe(error))
            }
            result.update { $0 = outcome }
        }
        task.resume()
        return result.wait(until: nil, clock: SystemClock(), for: { $0 != nil }, then: { value, _ in value! })
    }

    /// Seconds from a Retry-After value: delta-seconds or an HTTP date.
    static func retryAfter(_ value: String?) -> TimeInterval? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if let seconds = Double(value) { return max(0, seconds) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: value).map { max(0, $0.timeIntervalSinceNow) }
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
