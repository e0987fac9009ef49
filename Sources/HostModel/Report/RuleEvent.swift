import HostSupport
/// A rule a handler or delegate broke, or a call the host gave up on: one typed fact (SPEC
/// H-14). The report's internal log is written from it (its `message`, under the handler's
/// name), the host's observer receives it (`PipelineEvent.broke`), and the conformance checks
/// match on its `kind`, never on the wording of the message.
package struct RuleEvent: Sendable, Equatable {
    package enum Kind: String, Sendable, CaseIterable {
        /// A callback's completion called after the first (H-7).
        case secondCompletion
        /// A callback's completion called after the host stopped waiting for it (H-7).
        case lateCompletion
        /// The asynchronous attachments decision called after the first.
        case secondDecision
        /// The decision called after the host stopped waiting for it.
        case lateDecision
        /// A call the host did not start: the main thread could not start it in time, the
        /// report's budget was spent, or the host is stopping (H-8, H-10, H-15).
        case skipped
        /// A running-app callback that did not complete within its limit (H-8).
        case notCompleted
        /// A method that did not return within its limit (H-9, H-11, R-8); given up on.
        case notReturned
        /// A running-app callback that completed but whose method did not return in time.
        case returnedLate
        /// The asynchronous attachments decision did not come within its limit.
        case notDecided
        /// A callback not called because its plugin was replaced and destroyed first.
        case notCalled
        /// A report function called through a closed handle.
        case useAfterClose
        /// A report function called through a handle whose report is bundled and gone.
        case useAfterBundle
        /// A NULL or non-UTF-8 argument refused, or elements of a list dropped.
        case refusedArgument
        /// An attachment dropped: empty, over 3 MB, or past its source's budget.
        case droppedAttachment
        /// Changes held back for a completion that never came before bundling (H-9), or past
        /// the most a held handle keeps.
        case droppedChanges
        /// A value past the host's size limits: a text cut, or labels or attributes past their
        /// count refused (`ReportContent.textMaxBytes`, `labelsMax`, `attributesMax`).
        case overLimit
    }

    package let kind: Kind
    /// The call (`<plugin>.<method>`) or report function the event is about.
    package let subject: String
    /// The internal-log text.
    package let message: String

    package init(_ kind: Kind, subject: String, message: String) {
        self.kind = kind
        self.subject = subject
        self.message = message
    }

    // MARK: The events, each with its one wording

    package static func secondCompletion(_ call: String) -> RuleEvent {
        RuleEvent(.secondCompletion, subject: call, message: "\(call): completion called again; ignored")
    }

    package static func lateCompletion(_ call: String) -> RuleEvent {
        RuleEvent(.lateCompletion, subject: call, message: "\(call): completion called after the host stopped waiting; ignored")
    }

    package static func secondDecision(_ call: String) -> RuleEvent {
        RuleEvent(.secondDecision, subject: call, message: "\(call): decision called again; ignored")
    }

    package static func lateDecision(_ call: String) -> RuleEvent {
        RuleEvent(.lateDecision, subject: call, message: "\(call): decision called after the host stopped waiting; ignored")
    }

    package static func skipped(_ call: String, _ why: String) -> RuleEvent {
        RuleEvent(.skipped, subject: call, message: "\(call) skipped: \(why)")
    }

    /// A call that did not finish `within` its limit; `outcome` says what the host did then.
    package static func timedOut(_ call: String, awaited kind: Kind, within: String, outcome: String? = nil) -> RuleEvent {
        let verb =
            switch kind {
            case .notCompleted: "complete"
            case .notDecided: "decide"
            default: "return"
            }
        let then = outcome.map { ": \($0)" } ?? ""
        return RuleEvent(kind, subject: call, message: "\(call) did not \(verb) \(within)\(then); its later changes are ignored")
    }

    package static func returnedLate(_ call: String, within: String) -> RuleEvent {
        RuleEvent(.returnedLate, subject: call, message: "\(call) completed but its method did not return \(within)")
    }

    package static func notCalled(_ call: String) -> RuleEvent {
        RuleEvent(.notCalled, subject: call, message: "\(call) not called: the plugin was replaced and destroyed before the call")
    }

    package static func useAfterClose(_ operation: String) -> RuleEvent {
        RuleEvent(.useAfterClose, subject: operation, message: "\(operation) through a closed handle was ignored")
    }

    package static func useAfterBundle(_ operation: String) -> RuleEvent {
        RuleEvent(.useAfterBundle, subject: operation, message: "\(operation) through a handle whose report is gone was ignored")
    }

    package static func refusedArgument(_ operation: String, _ what: String) -> RuleEvent {
        RuleEvent(.refusedArgument, subject: operation, message: "\(operation): \(what) (NULL or not valid UTF-8)")
    }

    package static func droppedAttachment(_ name: String, because reason: String) -> RuleEvent {
        RuleEvent(.droppedAttachment, subject: name, message: "attachment '\(name)' dropped: it \(reason)")
    }

    package static func textCut(_ operation: String) -> RuleEvent {
        RuleEvent(.overLimit, subject: operation, message: "\(operation): a text over the \(ReportContent.textMaxBytes)-byte limit was cut to it")
    }

    package static func countRefused(_ operation: String, _ what: String, limit: Int) -> RuleEvent {
        RuleEvent(.overLimit, subject: operation, message: "\(operation) refused: it would make more than \(limit) \(what)")
    }

    package static func heldChangesFull(_ limit: Int, bytes: Int) -> RuleEvent {
        RuleEvent(
            .droppedChanges, subject: "\(limit)",
            message: "changes made after the method returned are dropped past the first \(limit) (or \(bytes) bytes)")
    }

    package static func droppedChanges(_ count: Int) -> RuleEvent {
        RuleEvent(
            .droppedChanges, subject: "\(count)",
            message: "\(count) change(s) made after the method returned were dropped: no completion before bundling")
    }
}

/// Where a report's rule events go besides its internal log: the handler's name and the event.
package typealias RuleEventSink = @Sendable (_ handler: String, _ event: RuleEvent) -> Void
