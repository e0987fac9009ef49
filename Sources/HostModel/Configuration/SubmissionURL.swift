import FoundationEssentials
import HostSupport

/// A checked submission URL (SPEC D-9): Backtrace's
/// `https://submit.backtrace.io/<universe>/<token>/json` or
/// `<scheme>://<host>[:port]/post?format=json&token=<token>`. Its token and format stay in
/// the query string or path as given.
public struct SubmissionURL: Sendable, Equatable {
    public let url: URL

    /// Why a URL cannot be used: a configuration error when the configuration is read (SPEC
    /// I-2), and a reason to hold (never to finalise) a report when found only at delivery.
    public enum Problem: Error, Equatable, Sendable, CustomStringConvertible {
        /// The URL (redacted) and, when libcurl refused it, libcurl's reason.
        case malformed(String, reason: String?)
        case unsupportedScheme(String)
        case insecure(host: String)
        /// A port no server listens on (0): the backlog would end terminal, one refused
        /// connection at a time.
        case badPort(Int)

        public var description: String {
            switch self {
            case .malformed(let text, let reason): "submission URL \(text) is malformed\(reason.map { " (libcurl: \($0))" } ?? "")"
            case .unsupportedScheme(let scheme): "submission URL scheme '\(scheme)' is not supported (use https, or http to loopback)"
            case .badPort(let port): "submission URL port \(port) is not a port a server listens on"
            case .insecure(let host):
                "plain http to \(host) refused: only loopback may use http unless submission.allowInsecure is true"
            }
        }
    }

    /// The structural check: a URL with a host, https (or http to loopback unless
    /// `allowInsecure`). What the library that sends it would refuse is the delivery layer's
    /// check (`LibcurlURL.check`), made before anything opens.
    public init(_ text: String, allowInsecure: Bool) throws(Problem) {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else {
            throw .malformed(SubmissionURL.redact(text), reason: nil)
        }
        guard scheme == "https" || scheme == "http" else { throw .unsupportedScheme(scheme) }
        // Past 65535 libcurl refuses it, with its own reason (`LibcurlURL.check`); 0 it takes.
        if url.port == 0 { throw .badPort(0) }
        if scheme == "http" && !allowInsecure && !SubmissionURL.isLoopback(host) { throw .insecure(host: host) }
        self.url = url
    }

    /// Loopback as SPEC I-2 defines it: a dotted-quad IPv4 literal in 127.0.0.0/8, `[::1]`, or
    /// `localhost` in any case with an optional trailing dot. Nothing else (`127.evil.example`,
    /// `127.0.0.1.nip.io`) is loopback: those are names DNS answers for.
    package static func isLoopback(_ host: String) -> Bool {
        let lowered = host.lowercased()
        if lowered == "localhost" || lowered == "localhost." || host == "::1" || host == "[::1]" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "127" else { return false }
        return parts.allSatisfy { part in
            (1...3).contains(part.utf8.count) && part.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
                && (Int(part) ?? 256) <= 255
        }
    }

    /// The URL with its secrets hidden, for logs and any other output (SPEC D-14).
    public var redacted: String { SubmissionURL.redact(url.absoluteString) }

    /// The one function that masks a URL wherever one is printed: userinfo becomes `***@`,
    /// every query value `***` (the names stay: they say what was set), the token segment of
    /// Backtrace's path form (`/<universe>/<token>/json`, a trailing slash or not) and any path
    /// segment that looks like a token (16 characters or more of letters, digits, `-`, `_`,
    /// `.` or `~`, letters alone too) `***`. Segments are cut at `/` and at `%2F`, so an encoded
    /// slash hides no token. Something that does not parse as a URL is not printed at all.
    public static func redact(_ text: String) -> String {
        guard var components = URLComponents(string: text), components.scheme != nil, components.host != nil else {
            return "<unparseable URL>"
        }
        if components.user != nil || components.password != nil {
            components.user = "***"
            components.password = nil
        }
        components.queryItems = components.queryItems?.map { item in
            URLQueryItem(name: item.name, value: item.value == nil ? nil : "***")
        }
        var segments = components.percentEncodedPath.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        let named = segments.last == "" ? segments.dropLast() : segments[...]
        if named.count == 4, named.last == "json" { segments[2] = "***" }
        segments = segments.map(maskingTokens(inEncoded:))
        components.percentEncodedPath = segments.joined(separator: "/")
        return components.string ?? "<unparseable URL>"
    }

    /// A percent-encoded path segment with every token-like piece between encoded slashes
    /// (`%2F`, `%2f`) masked.
    static func maskingTokens(inEncoded segment: String) -> String {
        segment.replacing("%2f", with: "%2F").split(separator: "%2F", omittingEmptySubsequences: false).map { piece in
            looksLikeToken(PercentEncoding.decoded(piece)) ? "***" : String(piece)
        }.joined(separator: "%2F")
    }

    static func looksLikeToken(_ segment: String) -> Bool {
        segment.utf8.count >= 16 && segment.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.~".contains($0)) }
    }
}
