import FoundationEssentials
import HostSupport

/// Sentry's `X-Sentry-Rate-Limits` (SPEC S-3): `<seconds>:<categories>:<scope>[:<reason>]`,
/// comma-separated; categories `;`-separated, none meaning all. A report's event is of the
/// categories `error` and `default`: while either is limited, no report goes to that endpoint
/// from this process (the ones a limit stopped are due again when it ends).
package enum SentryRateLimits {
    /// How long the categories a report's event belongs to are limited, from a header's value;
    /// nil when they are not (or the value is unreadable).
    package static func eventLimit(_ value: String) -> TimeInterval? {
        var longest: TimeInterval?
        for entry in value.split(separator: ",") {
            let parts = entry.split(separator: ":", omittingEmptySubsequences: false).map { String($0).trimmed }
            guard parts.count >= 2, let seconds = Double(parts[0]), seconds.isFinite, seconds >= 0 else { continue }
            let categories = parts[1].split(separator: ";").map(String.init)
            guard categories.isEmpty || categories.contains("error") || categories.contains("default") else { continue }
            longest = max(longest ?? 0, min(seconds, CurlTransport.maxRetryAfterSeconds))
        }
        return longest
    }

    /// Until when each endpoint is limited, in this process.
    private static let until = Locked([String: Date]())

    package static func limit(_ endpoint: String, for seconds: TimeInterval, now: Date) {
        until.withLock { table in table[endpoint] = max(table[endpoint] ?? now, now.addingTimeInterval(seconds)) }
    }

    /// When `endpoint` may be sent to again; nil when it is not limited now.
    package static func limited(_ endpoint: String, now: Date) -> Date? {
        until.withLock { table in table[endpoint].flatMap { $0 > now ? $0 : nil } }
    }
}
