import FoundationEssentials
import HostSupport

/// The host's configuration: the JSON file of SPEC I, with its defaults.
public struct Configuration: Sendable, Equatable {
    public var repository = ".reporthost"
    public var plugins: [PluginSlot: String] = [:]
    /// `plugins.required`: the slots that must have run for a report to leave the machine; a
    /// report whose required slot did not run fully is held (SPEC I-7, status `held`).
    public var requiredSlots: Set<PluginSlot> = []
    /// `plugins.options`: a JSON object a slot, handed to the plugin loaded there (SPEC T-3,
    /// `options_json`).
    package var pluginOptions: [PluginSlot: JSONValue] = [:]
    public var attributes: [String: String] = [:]
    public var limits = Limits()
    public var submission = Submission()
    public var retry = RetryPolicy()
    public var reportsPerMin = 30
    public var storage = StorageLimits()
    public var privacy = Privacy()
    /// The program's release, for sessions' crash-free rates (SPEC B-2); nil: the `version`
    /// attribute.
    public var release: String?
    /// `breadcrumbs.max`: how many breadcrumbs each report carries (SPEC B-1), oldest dropped.
    public var breadcrumbsMax = 100
    public var sessions = SessionHistory()
    public var metrics = Metrics()
    public var logging = [LoggingDestination(kind: .console, level: .info)]

    public init() {}

    /// Builds the logger the configuration asks for (SPEC D-14: before the host exists).
    package func makeLogger(overrideLevel: LogLevel? = nil, system: SystemCalls) throws(HostError) -> HostLogger {
        var destinations: [any LogDestination] = []
        for destination in logging {
            let level = overrideLevel ?? destination.level
            switch destination.kind {
            case .console: destinations.append(ConsoleDestination(level: level, system: system))
            case .file(let path): destinations.append(try FileDestination(path: path, level: level, system: system))
            }
        }
        return HostLogger(destinations: destinations)
    }
}

// MARK: - Parsing

extension Configuration {
    /// Checks what the reader cannot check key by key, before anything is opened (SPEC I-2):
    /// a `submission.url` or `submission.dsn` that does not parse, is not http or https, has no
    /// host, or is plain http off loopback without `allowInsecure`; both given (SPEC S-1).
    /// `origin` begins the message.
    public func validate(origin: String = "configuration") throws(HostError) {
        if submission.url != nil && submission.dsn != nil {
            throw .configuration("\(origin): keys 'submission.url' and 'submission.dsn': give one (Backtrace's URL or a Sentry DSN), not both")
        }
        if let dsn = submission.dsn {
            do throws(SubmissionURL.Problem) {
                _ = try SentryDSN(dsn, allowInsecure: submission.allowInsecure)
            } catch {
                throw .configuration("\(origin): key 'submission.dsn': \(error)")
            }
        }
        guard let url = submission.url else { return }
        do throws(SubmissionURL.Problem) {
            _ = try SubmissionURL(url, allowInsecure: submission.allowInsecure)
        } catch {
            throw .configuration("\(origin): key 'submission.url': \(error)")
        }
    }
}

extension Configuration {
    /// Reads and validates a configuration file. Relative paths inside it resolve against
    /// the file's folder (SPEC I-7). Unknown keys and wrong types name the key (exit 2).
    package static func load(path: String, system: SystemCalls) throws(HostError) -> Configuration {
        let url = URL(fileURLWithPath: path)
        let data: Data
        switch BoundedFile.read(url.path, limit: BoundedFile.maxDocumentBytes, followLinks: true, system: system) {
        case .success(let bytes): data = bytes
        case .failure(let failure): throw .configuration("config \(path): cannot read the file (\(failure))")
        }
        let json: JSONValue
        do {
            json = try JSONValue.parse(data)
        } catch {
            throw .configuration("config \(path): \(error)")
        }
        return try parse(json, origin: path, baseDirectory: url.deletingLastPathComponent().path)
    }

    /// Validates a parsed configuration; `origin` names it in errors.
    package static func parse(_ json: JSONValue, origin: String, baseDirectory: String) throws(HostError) -> Configuration {
        let reader = ConfigReader(origin: origin)
        var config = Configuration()
        let root = try reader.object(json, at: "")
        try reader.allow(root, at: "", keys: [
            "repository", "plugins", "attributes", "limits", "submission", "retry", "reportsPerMin", "storage", "privacy", "logging",
            "release", "breadcrumbs", "sessions", "metrics",
        ])
        let resolve = { (p: String) in Paths.absolute(p, relativeTo: baseDirectory) }

        if let value = root["repository"] { config.repository = resolve(try reader.string(value, at: "repository")) }
        if let value = root["plugins"] { try readPlugins(value, into: &config, reader, resolve: resolve) }
        if let value = root["attributes"] { try readAttributes(value, into: &config, reader) }
        if let value = root["limits"] { try readLimits(value, into: &config, reader) }
        if let value = root["submission"] { try readSubmission(value, into: &config, reader, origin: origin) }
        if let value = root["retry"] { try readRetry(value, into: &config, reader, origin: origin) }
        if let v = root["reportsPerMin"] { config.reportsPerMin = try reader.int(v, at: "reportsPerMin", min: 0, max: 1_000_000) }
        if let value = root["storage"] { try readStorage(value, into: &config, reader) }
        if let value = root["privacy"] { try readPrivacy(value, into: &config, reader) }
        config.release = try reader.optionalString(root["release"], at: "release")
        if let value = root["breadcrumbs"] { try readBreadcrumbs(value, into: &config, reader) }
        if let value = root["sessions"] { try readSessions(value, into: &config, reader) }
        if let value = root["metrics"] { try readMetrics(value, into: &config, reader, origin: origin) }
        if let value = root["logging"] { try readLogging(value, into: &config, reader, origin: origin, resolve: resolve) }
        return config
    }

    /// `plugins`: a path a slot, `required` and `options`.
    private static func readPlugins(
        _ value: JSONValue, into config: inout Configuration, _ reader: ConfigReader, resolve: (String) -> String
    ) throws(HostError) {
        let plugins = try reader.object(value, at: "plugins")
        let slotNames = PluginSlot.allCases.map(\.rawValue)
        try reader.allow(plugins, at: "plugins", keys: slotNames + ["required", "options"])
        for slot in PluginSlot.allCases {
            if let path = try reader.optionalString(plugins[slot.rawValue], at: "plugins.\(slot.rawValue)") {
                config.plugins[slot] = resolve(path)
            }
        }
        if let value = plugins["required"] {
            guard let entries = value.arrayValue else { throw reader.wrongType(value, at: "plugins.required", expected: "an array") }
            for (index, entry) in entries.enumerated() {
                config.requiredSlots.insert(
                    try reader.choice(entry, at: "plugins.required[\(index)]", PluginSlot.init(rawValue:), slotNames))
            }
        }
        if let value = plugins["options"] {
            let options = try reader.object(value, at: "plugins.options")
            try reader.allow(options, at: "plugins.options", keys: slotNames)
            for slot in PluginSlot.allCases {
                guard let given = options[slot.rawValue] else { continue }
                _ = try reader.object(given, at: "plugins.options.\(slot.rawValue)")
                config.pluginOptions[slot] = given
            }
        }
    }

    /// `attributes`: scalar values, as text.
    private static func readAttributes(_ value: JSONValue, into config: inout Configuration, _ reader: ConfigReader) throws(HostError) {
        for (key, item) in try reader.object(value, at: "attributes").pairs {
            config.attributes[key] = try reader.scalar(item, at: "attributes.\(key)")
        }
    }

    /// `limits`: the time limits.
    private static func readLimits(_ value: JSONValue, into config: inout Configuration, _ reader: ConfigReader) throws(HostError) {
        let limits = try reader.object(value, at: "limits")
        try reader.allow(limits, at: "limits", keys: [
            "callbackTimeoutMs", "recoveredReturnMs", "reportBudgetMs", "attachmentsDecisionMs", "completionWindowMs",
        ])
        let l = "limits."
        if let v = limits["callbackTimeoutMs"] { config.limits.callbackTimeoutMs = try reader.int(v, at: l + "callbackTimeoutMs", min: 1, max: Limits.maxMilliseconds) }
        if let v = limits["recoveredReturnMs"] { config.limits.recoveredReturnMs = try reader.int(v, at: l + "recoveredReturnMs", min: 1, max: Limits.maxMilliseconds) }
        if let v = limits["reportBudgetMs"] { config.limits.reportBudgetMs = try reader.int(v, at: l + "reportBudgetMs", min: 1, max: Limits.maxMilliseconds) }
        if let v = limits["attachmentsDecisionMs"] {
            config.limits.attachmentsDecisionMs = try reader.int(v, at: l + "attachmentsDecisionMs", min: 1, max: Limits.maxMilliseconds)
        }
        if let v = limits["completionWindowMs"], !v.isNull {
            config.limits.completionWindowMs = try reader.int(v, at: l + "completionWindowMs", min: 1, max: Limits.maxMilliseconds)
        }
    }

    /// `submission`: where reports go, validated at once.
    private static func readSubmission(
        _ value: JSONValue, into config: inout Configuration, _ reader: ConfigReader, origin: String
    ) throws(HostError) {
        let submission = try reader.object(value, at: "submission")
        try reader.allow(submission, at: "submission", keys: ["url", "dsn", "timeoutMs", "allowInsecure"])
        config.submission.url = try reader.optionalString(submission["url"], at: "submission.url")
        config.submission.dsn = try reader.optionalString(submission["dsn"], at: "submission.dsn")
        if let v = submission["timeoutMs"] { config.submission.timeoutMs = try reader.int(v, at: "submission.timeoutMs", min: 1, max: Limits.maxMilliseconds) }
        if let v = submission["allowInsecure"] { config.submission.allowInsecure = try reader.bool(v, at: "submission.allowInsecure") }
        try config.validate(origin: "config \(origin)")
    }

    /// `retry`: the retry policy.
    private static func readRetry(
        _ value: JSONValue, into config: inout Configuration, _ reader: ConfigReader, origin: String
    ) throws(HostError) {
        let retry = try reader.object(value, at: "retry")
        try reader.allow(retry, at: "retry", keys: ["behaviour", "intervalSeconds", "limit", "order"])
        if let v = retry["behaviour"] {
            config.retry.behaviour = try reader.choice(v, at: "retry.behaviour", RetryPolicy.Behaviour.init(rawValue:), ["interval", "none"])
        }
        if let v = retry["intervalSeconds"] { config.retry.intervalSeconds = try reader.int(v, at: "retry.intervalSeconds", min: 0, max: 2_592_000) }
        if let v = retry["limit"] {
            config.retry.limit = try reader.int(v, at: "retry.limit", min: 0, max: 1_000)
            if config.retry.limit == 0 {
                throw .configuration("config \(origin): key 'retry.limit': 0 is not allowed; use retry.behaviour \"none\" to disable retries")
            }
        }
        if let v = retry["order"] {
            config.retry.order = try reader.choice(v, at: "retry.order", RetryPolicy.Order.init(rawValue:), ["queue", "stack"])
        }
    }

    /// `storage`: the storage targets.
    private static func readStorage(_ value: JSONValue, into config: inout Configuration, _ reader: ConfigReader) throws(HostError) {
        let storage = try reader.object(value, at: "storage")
        try reader.allow(storage, at: "storage", keys: ["maxRecordCount", "maxDatabaseSizeMB"])
        if let v = storage["maxRecordCount"] { config.storage.maxRecordCount = try reader.int(v, at: "storage.maxRecordCount", min: 0, max: 1_000_000_000) }
        if let v = storage["maxDatabaseSizeMB"] {
            config.storage.maxDatabaseSizeMB = try reader.int(v, at: "storage.maxDatabaseSizeMB", min: 0, max: 1_048_576)
        }
    }

    /// `privacy`: what leaves the machine besides the report.
    private static func readPrivacy(_ value: JSONValue, into config: inout Configuration, _ reader: ConfigReader) throws(HostError) {
        let privacy = try reader.object(value, at: "privacy")
        try reader.allow(privacy, at: "privacy", keys: ["sendChanges"])
        if let v = privacy["sendChanges"] { config.privacy.sendChanges = try reader.bool(v, at: "privacy.sendChanges") }
    }

    /// `breadcrumbs`: how many each report carries.
    private static func readBreadcrumbs(_ value: JSONValue, into config: inout Configuration, _ reader: ConfigReader) throws(HostError) {
        let breadcrumbs = try reader.object(value, at: "breadcrumbs")
        try reader.allow(breadcrumbs, at: "breadcrumbs", keys: ["max"])
        if let v = breadcrumbs["max"] { config.breadcrumbsMax = try reader.int(v, at: "breadcrumbs.max", min: 0, max: 10_000) }
    }

    /// `sessions`: the session history.
    private static func readSessions(_ value: JSONValue, into config: inout Configuration, _ reader: ConfigReader) throws(HostError) {
        let sessions = try reader.object(value, at: "sessions")
        try reader.allow(sessions, at: "sessions", keys: ["maxCount", "maxAgeDays", "windowDays"])
        if let v = sessions["maxCount"] { config.sessions.maxCount = try reader.int(v, at: "sessions.maxCount", min: 1, max: 1_000_000) }
        if let v = sessions["maxAgeDays"] { config.sessions.maxAgeDays = try reader.int(v, at: "sessions.maxAgeDays", min: 1, max: 3_650) }
        if let v = sessions["windowDays"] { config.sessions.windowDays = try reader.int(v, at: "sessions.windowDays", min: 1, max: 3_650) }
    }

    /// `metrics`: crash-free metrics, the URL validated as the submission's.
    private static func readMetrics(
        _ value: JSONValue, into config: inout Configuration, _ reader: ConfigReader, origin: String
    ) throws(HostError) {
        let metrics = try reader.object(value, at: "metrics")
        try reader.allow(metrics, at: "metrics", keys: ["enabled", "url"])
        if let v = metrics["enabled"] { config.metrics.enabled = try reader.bool(v, at: "metrics.enabled") }
        config.metrics.url = try reader.optionalString(metrics["url"], at: "metrics.url")
        if let url = config.metrics.url {
            do throws(SubmissionURL.Problem) {
                _ = try SubmissionURL(url, allowInsecure: config.submission.allowInsecure)
            } catch {
                throw .configuration("config \(origin): key 'metrics.url': \(error)")
            }
        }
    }

    /// `logging`: the logging destinations.
    private static func readLogging(
        _ value: JSONValue, into config: inout Configuration, _ reader: ConfigReader, origin: String, resolve: (String) -> String
    ) throws(HostError) {
        guard let entries = value.arrayValue else { throw reader.wrongType(value, at: "logging", expected: "an array") }
        config.logging = try entries.enumerated().map { (index, entry) throws(HostError) in
            let at = "logging[\(index)]"
            let object = try reader.object(entry, at: at)
            try reader.allow(object, at: at, keys: ["type", "level", "path"])
            let level = try reader.choice(object["level"] ?? JSONValue.string("info"), at: at + ".level", LogLevel.init(name:), ["debug", "info", "warn", "error"])
            switch try reader.string(object["type"] ?? .null, at: at + ".type") {
            case "console":
                return LoggingDestination(kind: .console, level: level)
            case "file":
                let path = try reader.string(object["path"] ?? .null, at: at + ".path")
                return LoggingDestination(kind: .file(path: resolve(path)), level: level)
            case let other:
                throw .configuration("config \(origin): key '\(at).type': unknown destination \"\(other)\" (expected \"console\" or \"file\")")
            }
        }
    }
}

/// A JSON object's members, looked up by key.
private struct JSONFields {
    let pairs: [(String, JSONValue)]
    subscript(key: String) -> JSONValue? { pairs.first { $0.0 == key }?.1 }
}

/// Typed reads of configuration values; every error names the file and the key.
private struct ConfigReader {
    let origin: String

    func wrongType(_ value: JSONValue, at key: String, expected: String) -> HostError {
        .configuration("config \(origin): key '\(key.isEmpty ? "(top level)" : key)': expected \(expected), got \(value.typeName)")
    }

    func object(_ value: JSONValue, at key: String) throws(HostError) -> JSONFields {
        guard let object = value.objectValue else { throw wrongType(value, at: key, expected: "an object") }
        return JSONFields(pairs: object)
    }

    func allow(_ object: JSONFields, at key: String, keys: [String]) throws(HostError) {
        for (name, _) in object.pairs where !keys.contains(name) {
            let full = key.isEmpty ? name : "\(key).\(name)"
            throw .configuration("config \(origin): unknown key '\(full)' (allowed here: \(keys.joined(separator: ", ")))")
        }
    }

    func string(_ value: JSONValue, at key: String) throws(HostError) -> String {
        guard let string = value.stringValue else { throw wrongType(value, at: key, expected: "a string") }
        return string
    }

    func optionalString(_ value: JSONValue?, at key: String) throws(HostError) -> String? {
        guard let value, !value.isNull else { return nil }
        return try string(value, at: key)
    }

    func bool(_ value: JSONValue, at key: String) throws(HostError) -> Bool {
        guard let bool = value.boolValue else { throw wrongType(value, at: key, expected: "true or false") }
        return bool
    }

    /// An integer from `min` to `max`: the ranges keep deadline and size arithmetic far from
    /// overflow (a limit of a day in milliseconds, say), so no value can trap the host later.
    func int(_ value: JSONValue, at key: String, min: Int, max: Int) throws(HostError) -> Int {
        guard let int = value.intValue else { throw wrongType(value, at: key, expected: "an integer") }
        guard int >= min else { throw .configuration("config \(origin): key '\(key)': \(int) is below the minimum \(min)") }
        guard int <= max else { throw .configuration("config \(origin): key '\(key)': \(int) is above the maximum \(max)") }
        return int
    }

    /// A string, number or boolean attribute value, as text.
    func scalar(_ value: JSONValue, at key: String) throws(HostError) -> String {
        switch value {
        case .string(let s): return s
        case .bool(let b): return b ? "true" : "false"
        case .number: return value.serialized()
        default: throw wrongType(value, at: key, expected: "a string, number or boolean")
        }
    }

    func choice<T>(_ value: JSONValue, at key: String, _ make: (String) -> T?, _ allowed: [String]) throws(HostError) -> T {
        let text = try string(value, at: key)
        guard let choice = make(text) else {
            throw .configuration("config \(origin): key '\(key)': \"\(text)\" is not one of \(allowed.joined(separator: ", "))")
        }
        return choice
    }
}
