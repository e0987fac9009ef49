import FoundationEssentials
import HostModel
import HostSupport
import HostStore

/// Sends the waiting metric events (SPEC B-2, `metrics.enabled`) to Backtrace's events
/// endpoints (with a Sentry DSN, each session's start as a session update: SPEC S-2): `<scheme>://<host>[:port]/api/unique-events/submit` and
/// `…/api/summed-events/submit`, with the query of `metrics.url` (else of the submission URL,
/// its token included). A 2xx or a refusal for good (4xx but 408, 425 and 429) ends an event;
/// anything else counts an attempt, and an event is dropped after
/// `Repository.metricAttemptsMax`.
extension Deliverer {
    /// The endpoint events of `kind` go to, nil when neither URL parses.
    static func metricsEndpoint(_ kind: String, configuration: Configuration) -> URL? {
        guard let base = (configuration.metrics.url ?? configuration.submission.url).flatMap(URL.init(string:)),
            let scheme = base.scheme, let host = base.host
        else { return nil }
        let port = base.port.map { ":\($0)" } ?? ""
        let query = base.query.map { "?\($0)" } ?? ""
        let bracketed = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return URL(string: "\(scheme)://\(bracketed)\(port)/api/\(kind)/submit\(query)")
    }

    /// A session's start (`unique-events`) as a Sentry session update to the DSN's endpoint;
    /// nil for the other events, and for a session without a release.
    static func sessionUpdate(_ event: Repository.MetricEvent, dsn: SentryDSN, now: Date) -> (URL, RequestBody)? {
        guard event.kind == "unique-events", let unique = (try? JSONValue.parse(event.body))?["unique_events"]?.arrayValue?.first,
              let session = unique["attributes"]?["application.session"]?.stringValue,
              let item = SentryEnvelope.sessionItem(
                  session: session, installation: unique["attributes"]?["guid"]?.stringValue,
                  at: Date(timeIntervalSince1970: TimeInterval(unique["timestamp"]?.intValue ?? 0)), status: "ok", initial: true,
                  release: unique["attributes"]?["application.version"]?.stringValue)
        else { return nil }
        let bytes = SentryEnvelope.bytes(items: [item], dsn: dsn, sentAt: now)
        return (dsn.endpoint.url, RequestBody(contentType: SentryEnvelope.contentType, bytes: bytes, header: dsn.authHeader))
    }

    /// One pass over the waiting events; how many the server took.
    func sendMetrics() throws(HostError) -> Int {
        guard configuration.metrics.enabled else { return 0 }
        var sent = 0
        for event in try storing({ () throws(StorageError) in try repository.pendingMetricEvents() }) {
            let url: URL, body: RequestBody
            if let dsn = sentry {
                guard let made = Self.sessionUpdate(event, dsn: dsn, now: now()) else {
                    // Nothing Sentry counts (a summed event, a session without a release): done.
                    try storing { () throws(StorageError) in try repository.metricEventDone(event.id) }
                    continue
                }
                (url, body) = made
            } else {
                guard let endpoint = Self.metricsEndpoint(event.kind, configuration: configuration) else { return sent }
                (url, body) = (endpoint, RequestBody(contentType: "application/json", bytes: Array(event.body.utf8)))
            }
            let result = transport.post(url, body: body, timeoutMs: configuration.submission.timeoutMs)
            let final: Bool
            switch result {
            case .response(let status, _) where (200..<300).contains(status):
                final = true
                sent += 1
            case .response(let status, _) where (400..<500).contains(status) && ![408, 425, 429].contains(status):
                logger.warn("metrics: the server refused a \(event.kind) event (HTTP \(status)): dropped")
                final = true
            default:
                final = false
            }
            try storing { () throws(StorageError) in
                if final {
                    try repository.metricEventDone(event.id)
                } else if try repository.metricEventFailed(event.id) {
                    logger.warn("metrics: a \(event.kind) event failed \(Repository.metricAttemptsMax) times: dropped")
                }
            }
            if !final { break }  // the server is not answering: the rest wait for the next pass
        }
        if sent > 0 { logger.debug("metrics: \(sent) event(s) sent") }
        return sent
    }
}
