import HostModel
import HostSupport
import HostCapture

/// The fields a user sees and may edit in the dialog (SPEC H-5 step 3).
public struct DialogFields: Sendable, Equatable {
    public var summary: String?
    public var description: String?
    public var labels: [String]
    /// 0 for none, else 1...5.
    public var severity: Int32

    public init(summary: String?, description: String?, labels: [String], severity: Int32) {
        self.summary = summary
        self.description = description
        self.labels = labels
        self.severity = severity
    }
}

/// What the user decided.
public enum DialogDecision: Sendable, Equatable {
    case send(DialogFields)
    /// Nothing further runs, nothing is stored and nothing is sent.
    case cancel
}

/// Shows a dialog report to its user: a terminal dialog, or a script standing in for one.
public protocol DialogPresenter: Sendable {
    func present(_ fields: DialogFields) -> DialogDecision
}
