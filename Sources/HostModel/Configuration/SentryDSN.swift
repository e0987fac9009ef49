import FoundationEssentials
import HostSupport

/// A checked Sentry DSN (SPEC S-1): `<scheme>://<key>@<host>[:port][/<path>]/<project>`.
/// Reports go to its envelope endpoint, `<scheme>://<host>[:port][/<path>]/api/<project>/envelope/`,
/// with `X-Sentry-Auth` naming the key. Printed only through `redacted`: the key is masked.
package struct SentryDSN: Sendable, Equatable {
    /// The DSN as given (it goes in each envelope's header).
    package let text: String
    package let key: String
    package let project: String
    /// Where envelopes are posted.
    package let endpoint: SubmissionURL

    package init(_ text: String, allowInsecure: Bool) throws(SubmissionURL.Problem) {
        guard var components = URLComponents(string: text), let key = components.user, !key.isEmpty else {
            throw .malformed(SubmissionURL.redact(text), reason: "a DSN names its key before the host: https://<key>@<host>/<project>")
        }
        var segments = components.percentEncodedPath.split(separator: "/").map(String.init)
        guard let project = segments.popLast(), !project.isEmpty, project.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) })
        else {
            throw .malformed(SubmissionURL.redact(text), reason: "a DSN ends with its project: https://<key>@<host>/<project>")
        }
        components.user = nil
        components.password = nil
        components.percentEncodedPath = "/" + (segments + ["api", project, "envelope", ""]).joined(separator: "/")
        guard let endpoint = components.string else { throw .malformed(SubmissionURL.redact(text), reason: nil) }
        self.text = text
        self.key = key
        self.project = project
        self.endpoint = try SubmissionURL(endpoint, allowInsecure: allowInsecure)
    }

    /// The header every envelope carries (SPEC S-1).
    package var authHeader: String {
        "X-Sentry-Auth: Sentry sentry_key=\(key), sentry_version=7, sentry_client=reporthost/\(HostVersion.current)"
    }

    /// The DSN with its key masked: `https://***@host/1`.
    package var redacted: String { SubmissionURL.redact(text) }
}

extension Submission {
    /// Where requests go: `url`, or the DSN's envelope endpoint; nil when neither is set (or
    /// the DSN does not parse: `Configuration.validate` says why).
    public var endpoint: String? {
        url ?? dsn.flatMap { try? SentryDSN($0, allowInsecure: allowInsecure) }?.endpoint.url.absoluteString
    }

    /// The key that names the destination, for messages.
    public var endpointKey: String { url == nil && dsn != nil ? "submission.dsn" : "submission.url" }
}
