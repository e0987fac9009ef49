import FoundationEssentials
import HostSupport

/// Time limits (SPEC H-8 … H-11, A-2). Defaults equal the SPEC's numbers.
public struct Limits: Sendable, Equatable {
    public var callbackTimeoutMs = 30_000
    public var recoveredReturnMs = 3_000
    public var reportBudgetMs = 60_000
    public var attachmentsDecisionMs = 10_000
    /// nil: equal to `reportBudgetMs`.
    public var completionWindowMs: Int?

    public init() {}

    public var effectiveCompletionWindowMs: Int { completionWindowMs ?? reportBudgetMs }

    /// The largest time limit a configuration may set: one day.
    public static let maxMilliseconds = 86_400_000
}

/// Where reports are submitted (SPEC D-9): a Backtrace submission URL, or a Sentry DSN (SPEC
/// S-1); never both.
public struct Submission: Sendable, Equatable {
    public var url: String?
    public var dsn: String?
    public var timeoutMs = 15_000
    public var allowInsecure = false
    public init() {}

    /// Whether reports have somewhere to go.
    public var isSet: Bool { url != nil || dsn != nil }
}

/// Retry policy (SPEC D-5, D-6, D-11).
public struct RetryPolicy: Sendable, Equatable {
    public enum Behaviour: String, Sendable { case interval, none }
    public enum Order: String, Sendable { case queue, stack }
    public var behaviour = Behaviour.interval
    public var intervalSeconds = 5
    public var limit = 3
    public var order = Order.queue
    public init() {}
}

/// Storage targets (SPEC D-12); 0 disables each.
public struct StorageLimits: Sendable, Equatable {
    public var maxRecordCount = 0
    public var maxDatabaseSizeMB = 0
    public init() {}
}

/// What leaves the machine besides the report itself.
public struct Privacy: Sendable, Equatable {
    /// Whether the change trail is sent as `annotations["reporthost.changes"]` (SPEC T-1).
    public var sendChanges = true
    public init() {}
}

/// The session history (SPEC B-2): how much is kept, and the window `status` rates.
public struct SessionHistory: Sendable, Equatable {
    /// The most sessions kept (the oldest ended ones go first).
    public var maxCount = 1_000
    /// Sessions that ended longer ago than this are forgotten.
    public var maxAgeDays = 90
    /// `status` rates the sessions that started in the last this many days.
    public var windowDays = 30
    public init() {}
}

/// Crash-free metrics sent to the server (SPEC B-2, optional): Backtrace's unique events
/// (one a session, `guid`) and summed events (`Application Launches`).
public struct Metrics: Sendable, Equatable {
    public var enabled = false
    /// Where the events go; nil: the submission URL's server, at Backtrace's
    /// `/api/unique-events/submit` and `/api/summed-events/submit`.
    public var url: String?
    public init() {}
}

/// One logging destination (SPEC D-14).
public struct LoggingDestination: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case console
        case file(path: String)
    }
    public var kind: Kind
    public var level: LogLevel

    public init(kind: Kind, level: LogLevel) {
        self.kind = kind
        self.level = level
    }
}
