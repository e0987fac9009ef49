import FoundationEssentials
import PluginAPI
import HostModel
import HostSupport
import HostCapture

/// An attachment a delegate offers in its asynchronous decision.
public struct OfferedAttachment: Sendable, Equatable {
    public var name: String
    public var filename: String
    public var data: Data
    /// The size a plugin offered when it was over the limit and its bytes were not copied.
    public var declaredSize: UInt?

    public init(name: String, filename: String, data: Data) {
        self.name = name
        self.filename = filename
        self.data = data
    }
}

/// Which methods an in-process delegate implements.
package struct DelegateMethods: OptionSet, Sendable {
    package let rawValue: Int
    package init(rawValue: Int) { self.rawValue = rawValue }

    package static let addFields = DelegateMethods(rawValue: 1)
    package static let checkFields = DelegateMethods(rawValue: 2)
    package static let attachments = DelegateMethods(rawValue: 4)
    package static let attachmentsAsync = DelegateMethods(rawValue: 8)
}

/// The optional second interface, in Swift (SPEC A): fields hooks for dialog reports and an
/// attachments hook in a synchronous or an asynchronous form.
///
/// The host holds an in-process delegate weakly (SPEC A-5): once its owner releases it, it
/// is no longer called.
package protocol ReportDelegate: AnyObject, Sendable {
    var name: String { get }
    /// The methods below that this delegate implements; the others are never called.
    var implements: DelegateMethods { get }
    /// Dialog reports only (SPEC H-5 step 2): summary, description and labels were cleared.
    func addFields(_ report: ReportHandle)
    /// Dialog reports only (SPEC H-5 step 5).
    func checkFields(_ report: ReportHandle)
    /// Synchronous: add attachments with `report.addAttachment` during the call (SPEC A-1).
    func attachments(_ report: ReportHandle)
    /// Asynchronous: call `decide` once within the decision limit; nil means none (SPEC A-2).
    func attachments(_ report: ReportHandle, decide: @escaping @Sendable ([OfferedAttachment]?) -> Void)
}

extension ReportDelegate {
    package func addFields(_ report: ReportHandle) {}
    package func checkFields(_ report: ReportHandle) {}
    package func attachments(_ report: ReportHandle) {}
    package func attachments(_ report: ReportHandle, decide: @escaping @Sendable ([OfferedAttachment]?) -> Void) { decide(nil) }
}

/// What sits in the delegate slot: a plugin's `rh_delegate` (alive as long as its slot) or a
/// weakly held Swift delegate.
package enum Delegate: Sendable {
    case plugin(LoadedPlugin)
    case swift(WeakDelegate)

    /// A weak reference to an in-process delegate.
    package final class WeakDelegate: Sendable {
        private let reference: Locked<Reference>
        private struct Reference { weak var delegate: (any ReportDelegate)? }

        package init(_ delegate: any ReportDelegate) { reference = Locked(Reference(delegate: delegate)) }
        package var delegate: (any ReportDelegate)? { reference.withLock { $0.delegate } }
    }

    package static func weak(_ delegate: any ReportDelegate) -> Delegate { .swift(WeakDelegate(delegate)) }

    /// The delegate's name for the internal log, or nil once a Swift delegate is gone.
    var name: String? {
        switch self {
        case .plugin(let plugin): plugin.name
        case .swift(let box): box.delegate?.name
        }
    }

    /// What it implements now (nothing once a Swift delegate is gone).
    var methods: DelegateMethods {
        switch self {
        case .plugin(let plugin):
            guard let d = plugin.delegate else { return [] }
            var methods: DelegateMethods = []
            if d.add_fields_before_report_created != nil { methods.insert(.addFields) }
            if d.check_fields_after_report_created != nil { methods.insert(.checkFields) }
            if d.attachments_for_report != nil { methods.insert(.attachments) }
            if d.attachments_for_report_async != nil { methods.insert(.attachmentsAsync) }
            return methods
        case .swift(let box):
            return box.delegate?.implements ?? []
        }
    }

    func addFields(_ handle: ReportHandle) {
        switch self {
        case .plugin(let p): _ = p.call(.addFields) { p.delegate?.add_fields_before_report_created?(p.handler.context, HostAPITable.pointer(handle)) }
        case .swift(let box): box.delegate?.addFields(handle)
        }
    }

    func checkFields(_ handle: ReportHandle) {
        switch self {
        case .plugin(let p): _ = p.call(.checkFields) { p.delegate?.check_fields_after_report_created?(p.handler.context, HostAPITable.pointer(handle)) }
        case .swift(let box): box.delegate?.checkFields(handle)
        }
    }

    func attachments(_ handle: ReportHandle) {
        switch self {
        case .plugin(let p): _ = p.call(.attachments) { p.delegate?.attachments_for_report?(p.handler.context, HostAPITable.pointer(handle)) }
        case .swift(let box): box.delegate?.attachments(handle)
        }
    }

    func attachmentsAsync(
        _ handle: ReportHandle, decision: rh_attachments_decision?, swiftDecision: @escaping @Sendable ([OfferedAttachment]?) -> Void
    ) {
        switch self {
        case .plugin(let p): _ = p.call(.attachmentsAsync) { p.delegate?.attachments_for_report_async?(p.handler.context, HostAPITable.pointer(handle), decision) }
        case .swift(let box): box.delegate?.attachments(handle, decide: swiftDecision)
        }
    }

    var needsClosure: Bool { if case .plugin = self { true } else { false } }
}

/// The most items of one decision the host reads (three can be kept, R-7; the rest are
/// noted as dropped, so reading thousands would only fill the internal log).
let maxOfferedAttachments = 16

/// Copies the items of an `rh_attachments_decision` call (during the call, as the ABI says).
/// Items with a NULL or non-UTF-8 name are skipped; an item whose size is over the limit is
/// passed on without its bytes (dropped and noted, never copied); at most
/// `maxOfferedAttachments` items are read.
func offeredAttachments(_ arguments: CallbackCompletion.Arguments?) -> [OfferedAttachment]? {
    guard let arguments,
        let items = arguments[0]?.load(as: UnsafePointer<rh_attachment>?.self),
        let count = arguments[1]?.load(as: Int.self), count > 0
    else { return nil }
    return (0..<min(count, maxOfferedAttachments)).compactMap { index in
        let item = items[index]
        guard let name = HostAPITable.string(item.name) else { return nil }
        let filename = HostAPITable.string(item.filename) ?? name
        let size = UInt(bitPattern: item.size)
        guard size <= UInt(ReportContent.attachmentMaxBytes) else {
            var offered = OfferedAttachment(name: name, filename: filename, data: Data())
            offered.declaredSize = size
            return offered
        }
        let data = item.data.map { Data(bytes: $0, count: item.size) } ?? Data()
        return OfferedAttachment(name: name, filename: filename, data: data)
    }
}
