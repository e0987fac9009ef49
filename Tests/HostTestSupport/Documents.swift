import Foundation
import HostModel

extension ReportDocument {
    /// A document made now under a fresh id, with `summary` its only content: a record for a
    /// test of the repository.
    package static func summarised(_ summary: String, trigger: Trigger = .logError) -> ReportDocument {
        var content = ReportContent()
        content.summary = summary
        return ReportDocument(id: UUID().uuidString.lowercased(), trigger: trigger, content: content, internalLog: [], createdAt: Date())
    }
}
