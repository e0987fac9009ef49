import Foundation

/// What a caller asks for when raising a report; becomes the report's content before the
/// first callback.
public struct ReportRequest: Sendable {
    public struct ExtendedAttachment: Sendable {
        public var name: String
        public var filename: String
        public var data: Data
        public init(name: String, filename: String, data: Data) {
            self.name = name
            self.filename = filename
            self.data = data
        }
    }

    public var trigger: Trigger
    public var summary: String?
    public var description: String?
    public var email: String?
    /// 1...5 or nil for none (callers validate the range).
    public var severity: Int32?
    public var labels: [String] = []
    /// `--attribute K=V`: the highest precedence (SPEC R-4).
    public var attributes: [String: String] = [:]
    /// `--attach FILE`: the `extended` source (SPEC R-7).
    public var attachments: [ExtendedAttachment] = []
    public var isTerminating = false

    public init(trigger: Trigger) { self.trigger = trigger }
}

/// Runs the handler chain of one report in the order of SPEC H-6: wrapper.before,
/// user.before, wrapper.after, user.after; then bundles.
struct Chain {
    let runner: CallbackRunner
    let clock: any HostClock
    let logger: HostLogger

    func run(report: LiveReport, handlers: [HandlerSlot: Handler], mode: ChainMode) throws(HostError) -> ReportDocument {
        let budgetDeadline = clock.now().advanced(byMilliseconds: runner.limits.reportBudgetMs)
        var leftovers: [CallbackRunner.Leftover] = []
        for step in [HandlerStep.before, .after] {
            for slot in HandlerSlot.allCases {
                guard let handler = handlers[slot], handler.implements(step) else { continue }
                guard clock.now() < budgetDeadline else {
                    report.note(
                        .warn, handler: "host",
                        "\(handler.name).on_\(step.rawValue)_report_created skipped: the report's \(runner.limits.reportBudgetMs) ms budget was spent")
                    continue
                }
                logger.debug("report \(report.id): \(slot.rawValue) \(handler.name).on_\(step.rawValue)_report_created")
                if let leftover = try runner.run(
                    handler, in: slot, step: step, report: report, mode: mode, budgetDeadline: budgetDeadline)
                {
                    leftovers.append(leftover)
                }
            }
        }
        let document = report.bundle()
        for case let slot? in leftovers.map(\.closureSlot) { runner.closures.release(slot) }
        return document
    }
}
