import FoundationEssentials
import HostModel
import HostSupport

/// Where a stored report is in its life (SPEC I, `status --json` states).
package enum RecordState: String, Sendable, CaseIterable {
    /// Saved from a crash file that is not yet purged.
    case pendingPurge = "pending_purge"
    /// Saved or journaled; the handler chain has not finished.
    case pendingChain = "pending_chain"
    /// Handled; no admitted attempt yet.
    case awaitingFirstAttempt = "awaiting_first_attempt"
    case submitting
    case retry
    case terminal
    /// Stored, and not sent until its reason clears (`ReportRecord.held`): a configuration
    /// failure found only at delivery (D-9).
    case held

    /// Whether a record in this state still waits to be sent (a first attempt, a retry, held,
    /// or being sent now).
    package var isWaiting: Bool {
        switch self {
        case .awaitingFirstAttempt, .retry, .held, .submitting: true
        case .pendingPurge, .pendingChain, .terminal: false
        }
    }
}

/// Why a record is `held`. Stored as `<kind>: <details>`, so the kind that releases it can
/// find it.
package enum HoldReason: Sendable, Equatable {
    /// The submission configuration failed at delivery; a valid one releases it (D-9).
    case configuration(String)
    /// A slot listed in `plugins.required` did not run fully; a launch whose required slots
    /// can all run runs the chain again (SPEC I-7).
    case required(String)

    var stored: String {
        switch self {
        case .configuration(let details): "configuration: \(details)"
        case .required(let details): "\(Self.requiredKind) \(details)"
        }
    }

    static let requiredKind = "required:"
}

/// One stored report.
package struct ReportRecord: Sendable {
    package var rowID: Int64
    package var document: ReportDocument
    package var state: RecordState
    package var attempts: Int
    package var nextAttemptAt: Date?
    /// The crash payload (signal, threads, modules) of a native report.
    package var crash: JSONValue?
    /// The original crash file, until it is purged.
    package var crashFile: String?
    package var session: String?
    /// A dialog report the user has not sent yet (dropped if the host dies, SPEC H-13).
    package var dialogPending: Bool
    package var outcome: String?
    package var bytes: Int
    /// When the record last changed state (for a retry kept under behaviour `none`: when its
    /// attempt failed).
    package var updatedAt: Date
    /// Why a `held` record is held.
    package var held: String?

    package var reportID: String { document.id }
    package var trigger: Trigger { document.trigger }
}

/// Row ids in a query.
extension Repository {
    /// Row ids given as one value (`list`), for `IN \(listed)`: one statement whatever their
    /// number, and only their rows read.
    static let listed = "(SELECT value FROM json_each(?))"

    /// `rowIDs` as the JSON array `listed` reads.
    static func list(_ rowIDs: [Int64]) -> SQLValue { .text("[" + rowIDs.map(String.init).joined(separator: ",") + "]") }
}
