import FoundationEssentials
import Glibc
import Host

/// The scrubbing checks (`check --scrub`, SPEC I-8): one per field a plugin can change. Each
/// plants generated personal data of every kind (`PersonalData`, from the seed) and decoys
/// in its field, raises the report through the plugin, and reads what left: a planted value
/// that survived fails the check, naming it and the seed; a decoy destroyed is a warning.
/// The reporter's own `email` field and attribute keys are not the plugin's to scrub.
extension Catalogue {
    package static let scrubChecks: [ConformanceCheck] = ScrubField.allCases.map { field in
        ConformanceCheck(name: "scrub-\(field.rawValue)", summary: field.summary, slots: handlerSlots) { context in
            let data = PersonalData(seed: context.seed)
            let (host, _, _) = try context.host()
            defer { host.stop() }
            guard let document = try host.raise(field.request(planting: data)) else { return (.failed, "no document") }
            return field.verdict(data, after: field.text(of: document), seed: context.seed)
        }
    }
}

/// A field the scrubbing checks plant personal data in.
enum ScrubField: String, CaseIterable {
    case summary, description, attributes, labels, attachments

    var summary: String {
        switch self {
        case .summary: "no e-mail address, card, IP address, phone number or secret survives in the summary"
        case .description: "no e-mail address, card, IP address, phone number or secret survives in the description"
        case .attributes: "no personal data or secret survives in any attribute value"
        case .labels: "no personal data or secret survives in any label"
        case .attachments: "no personal data or secret survives in a text attachment"
        }
    }

    /// A report with the planted values in this field only; the reporter's `email` is set too
    /// (it must be left alone, and must not count against the plugin).
    func request(planting data: PersonalData) -> ReportRequest {
        var request = Catalogue.ordinary(.logError)
        request.email = "reporter@example.org"
        let lines = (data.items + data.decoys).map { "context: \($0.text)" }
        switch self {
        case .summary: request.summary = data.text
        case .description: request.description = "Steps:\n" + data.text + "\n" + lines.joined(separator: "\n")
        case .attributes:
            for (index, line) in lines.enumerated() { request.attributes["context.\(index)"] = line }
        case .labels: request.labels = (data.items + data.decoys).map(\.text)
        case .attachments:
            request.attachments = [ReportRequest.ExtendedAttachment(
                name: "session.log", filename: "session.log", data: Data((lines.joined(separator: "\n") + "\n").utf8))]
        }
        return request
    }

    /// What the field holds after the chain.
    func text(of document: ReportDocument) -> String {
        let content = document.content
        switch self {
        case .summary: return content.summary ?? ""
        case .description: return content.description ?? ""
        case .attributes: return content.attributes.sorted { $0.key < $1.key }.map(\.value).joined(separator: "\n")
        case .labels: return content.labels.joined(separator: "\n")
        case .attachments: return content.attachments.map { String(decoding: $0.data, as: UTF8.self) }.joined(separator: "\n")
        }
    }

    func verdict(_ data: PersonalData, after text: String, seed: UInt64) -> (CheckStatus, String) {
        let survived = data.items.filter { text.contains($0.secret) }
        if !survived.isEmpty {
            let list = survived.map { "\($0.kind) \"\($0.secret)\"" }.joined(separator: ", ")
            return (.failed, "survived in \(rawValue): \(list) (reproduce with --seed \(seed))")
        }
        let destroyed = data.decoys.filter { !text.contains($0.text) }
        if !destroyed.isEmpty {
            let list = destroyed.map { "\($0.kind) \"\($0.text)\"" }.joined(separator: ", ")
            return (.warning, "\(data.items.count) kinds scrubbed, but decoys that are not personal data were destroyed in \(rawValue): \(list) (seed \(seed))")
        }
        return (.passed, "\(data.items.count) kinds scrubbed, \(data.decoys.count) decoys kept (seed \(seed))")
    }
}
