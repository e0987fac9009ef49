import FoundationEssentials
import HostSupport

/// Who changes a report through a handle: names the handler for the internal log and the
/// change trail, the slot and step it runs in, and the attachment budget it draws on (SPEC
/// one callback invocation is one source, all delegate calls of a report share the
/// `delegate` source).
package struct Contributor: Sendable, Hashable {
    package var handler: String
    /// `wrapper`, `handler`, `delegate`, or `host` for the host's own changes.
    package var slot: String
    /// `wrapper.before`, `handler.after`, `delegate.add_fields`, … (SPEC T-1).
    package var step: String
    package var source: AttachmentSource
    package var budgetKey: String
    /// Whether the caller was built for ABI 1.1, which has `RH_TRIGGER_APP_HANG` (SPEC B-4): a
    /// 1.0 plugin is shown a hang as `RH_TRIGGER_LOG_ERROR`.
    package var knowsAppHang = true

    package init(handler: String, slot: String, step: String, source: AttachmentSource, budgetKey: String) {
        self.handler = handler
        self.slot = slot
        self.step = step
        self.source = source
        self.budgetKey = budgetKey
    }

    package static let extended = Contributor(handler: "host", slot: "host", step: "extended", source: .extended, budgetKey: "extended")

    /// A delegate call: `step` is its short name (`add_fields`, `check_fields`, `attachments`).
    package static func delegate(_ name: String, step: String) -> Contributor {
        Contributor(handler: name, slot: "delegate", step: "delegate.\(step)", source: .delegate, budgetKey: "delegate")
    }
}
