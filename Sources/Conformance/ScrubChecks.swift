import FoundationEssentials
import Glibc
import Host
import HostPlugins
import HostSupport

/// What `check --scrub` scores against, and how it judges (SPEC T-4).
package struct ScrubSettings: Sendable {
    /// `--corpus FILE`; nil: the corpus generated from the seed.
    package var corpus: String?
    /// `--min-recall R`: each judged kind must reach it (default 1: every planted value goes).
    package var minRecall: Double?
    /// `--max-false-positive-rate F`: above it, the run fails (default: a changed decoy warns).
    package var maxFalsePositiveRate: Double?

    package init(corpus: String? = nil, minRecall: Double? = nil, maxFalsePositiveRate: Double? = nil) {
        self.corpus = corpus
        self.minRecall = minRecall
        self.maxFalsePositiveRate = maxFalsePositiveRate
    }

    var recallNeeded: Double { minRecall ?? 1 }

    package func loadCorpus(seed: UInt64, system: SystemCalls) throws(ScrubCorpus.FormatError) -> ScrubCorpus {
        try corpus.map { path throws(ScrubCorpus.FormatError) in try ScrubCorpus.load(path, system: system) } ?? .generated(seed: seed)
    }
}

/// The scrubbing checks (`check --scrub`, SPEC I-8, T-4): one per field a plugin can change.
/// Each places every document of the corpus (generated from the seed, or `--corpus`) in its
/// field, raises one report a document through the plugin, and scores what the field holds
/// after: the planted values removed per kind (recall) and the decoys changed (false
/// positives). A judged kind below `--min-recall` fails the check, naming an example and the
/// seed; changed decoys warn, or fail past `--max-false-positive-rate`. The reporter's own
/// `email` field and attribute keys are not the plugin's to scrub. `reporthost check` then
/// adds up the fields' figures into the judgements `scrub-recall` and `scrub-false-positive-rate`.
extension Catalogue {
    package static let scrubChecks: [ConformanceCheck] = ScrubField.allCases.map { field in
        ConformanceCheck(name: "scrub-\(field.rawValue)", summary: field.summary, slots: handlerSlots, scoring: { context in
            let corpus = try context.scrub.loadCorpus(seed: context.seed, system: context.system)
            var figures = ScrubFigures(source: corpus.source, documents: corpus.documents.count)
            // A host's own limits: a scrubber's first report may compile its rules (scrub-pii
            // about a second, several on a busy machine), and a report that went on without its
            // changes would be scored as leaks. A scrubber that does not complete in time fails
            // as that, at its first report.
            var limits = CheckContext.limits
            limits.callbackTimeoutMs = Limits().callbackTimeoutMs
            limits.reportBudgetMs = Limits().reportBudgetMs
            let (host, events, plugin) = try context.host(limits: limits)
            defer { host.stop() }
            // Attribute keys are judged on documents of their own, from the seed.
            let documents = field == .attributeKeys
                ? (0..<min(corpus.documents.count, 20)).map { SecretKeys.document(seed: context.seed &+ UInt64($0)) } : corpus.documents
            for document in documents {
                guard let report = try host.raise(field.request(placing: document, at: context.system.now())) else { return (.failed, "no document", nil) }
                if let late = events.first(of: [.notCompleted, .notReturned], about: plugin.name) {
                    return (.failed, "a report went on without the plugin's changes: \(late.message)", nil)
                }
                figures.score(document, field: field.rawValue, after: field.text(of: report))
            }
            return field.verdict(figures, settings: context.scrub, seed: context.seed)
        })
    }

    /// The names of the two judgements added after the fields' checks.
    package static let scrubJudgements = ["scrub-recall", "scrub-false-positive-rate"]

    /// The judgements over every field's figures (SPEC T-4): `scrub-recall` fails when a judged
    /// kind is below the minimum recall, `scrub-false-positive-rate` when the decoys changed
    /// pass the maximum (without one given: a changed decoy warns). Nil when no field was scored.
    package static func scrubJudgements(_ results: [CheckResult], settings: ScrubSettings) -> [CheckResult] {
        let scored = results.compactMap { result in result.figures.flatMap(ScrubFigures.init(json:)) }
        guard var figures = scored.first else { return [] }
        for more in scored.dropFirst() { figures = figures.merged(with: more) }
        let below = figures.kinds(below: settings.recallNeeded)
        let judged = ScrubCorpus.judgedKinds.compactMap { kind in
            figures.judged[kind].map { "\(kind) \(ScrubFigures.rate($0))" }
        }
        let others = figures.kinds.filter { !ScrubCorpus.judgedKinds.contains($0.key) }.sorted { $0.key < $1.key }
            .map { "\($0.key) \(ScrubFigures.rate($0.value))" }
        let recallDetails = "\(ScrubFigures.rate(figures.allJudged, "recall")) over \(figures.source); "
            + judged.joined(separator: ", ") + (others.isEmpty ? "" : "; not judged: " + others.joined(separator: ", "))
        let recall = CheckResult(
            check: "scrub-recall", status: below.isEmpty ? .passed : .failed,
            details: (below.isEmpty ? "every judged kind at or above \(settings.recallNeeded): " : "below \(settings.recallNeeded): \(below.joined(separator: ", ")); ") + recallDetails,
            durationMs: 0, figures: figures.json)
        let decoys = figures.allDecoys
        let changed = figures.decoyLabels.filter { $0.value.hit > 0 }.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value.hit)/\($0.value.total)" }
        let rate = decoys.rate ?? 0
        let status: CheckStatus =
            if let maximum = settings.maxFalsePositiveRate { rate > maximum ? .failed : .passed } else { decoys.hit > 0 ? .warning : .passed }
        let limit = settings.maxFalsePositiveRate.map { " (at most \($0))" } ?? ""
        let falsePositives = CheckResult(
            check: "scrub-false-positive-rate", status: status,
            details: "\(ScrubFigures.rate(decoys, "false positives"))\(limit)" + (changed.isEmpty ? "" : "; changed: " + changed.joined(separator: ", ")),
            durationMs: 0, figures: figures.json)
        return [recall, falsePositives]
    }
}

/// A field the scrubbing checks plant personal data in.
package enum ScrubField: String, CaseIterable, Sendable {
    case summary, description, attributes, labels, breadcrumbs, attachments
    /// Attributes whose keys name a secret (SPEC T-5): `key: value` lines, one attribute each.
    case attributeKeys = "attribute-keys"

    var summary: String {
        switch self {
        case .summary: "personal data in the summary is removed, and text that is not personal data stays"
        case .description: "personal data in the description is removed, and text that is not personal data stays"
        case .attributes: "personal data in an attribute value is removed, and text that is not personal data stays"
        case .labels: "personal data in a label is removed, and text that is not personal data stays"
        case .breadcrumbs: "personal data in a breadcrumb's message is removed, and text that is not personal data stays (ABI 1.1)"
        case .attachments: "personal data in a text attachment is removed, and text that is not personal data stays"
        case .attributeKeys: "an attribute whose key names a secret (password, apiKey, set-cookie) loses its value; author, tokenizer keep theirs (T-5)"
        }
    }

    /// A report with the document in this field only; the reporter's `email` is set too (it
    /// must be left alone, and does not count against the plugin).
    func request(placing document: ScrubCorpus.Document, at time: Date) -> ReportRequest {
        var request = Catalogue.ordinary(.logError)
        request.email = "reporter@example.org"
        switch self {
        case .summary: request.summary = document.text
        case .description: request.description = document.text
        case .attributes: request.attributes["context.text"] = document.text
        case .labels: request.labels = [document.text]
        case .breadcrumbs:
            request.breadcrumbs = [
                Breadcrumb(sequence: 1, timestamp: time, level: .info, category: "app", message: "opened the settings"),
                Breadcrumb(sequence: 2, timestamp: time, level: .info, category: "app", message: document.text),
            ]
        case .attachments:
            request.attachments = [ReportRequest.ExtendedAttachment(
                name: "session.log", filename: "session.log", data: Data(document.text.utf8))]
        case .attributeKeys:
            for line in document.text.split(separator: "\n") {
                let parts = line.split(separator: ":", maxSplits: 1)
                if parts.count == 2 { request.attributes[String(parts[0])] = String(parts[1].dropFirst()) }
            }
        }
        return request
    }

    /// What the field holds after the chain.
    func text(of document: ReportDocument) -> String {
        let content = document.content
        switch self {
        case .summary: return content.summary ?? ""
        case .description: return content.description ?? ""
        case .attributes: return content.attributes["context.text"] ?? ""
        case .labels: return content.labels.joined(separator: "\n")
        case .breadcrumbs: return content.breadcrumbs.last?.message ?? ""
        case .attachments: return content.attachments.map { String(decoding: $0.data, as: UTF8.self) }.joined(separator: "\n")
        case .attributeKeys: return content.attributes.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: "\n")
        }
    }

    func verdict(_ figures: ScrubFigures, settings: ScrubSettings, seed: UInt64) -> (CheckStatus, String, JSONValue) {
        let kinds = figures.planted[rawValue] ?? [:]
        let below = figures.kinds(below: settings.recallNeeded, in: kinds)
        let recall = kinds.filter { ScrubCorpus.judgedKinds.contains($0.key) }.values.reduce(ScrubFigures.Count(), +)
        let decoys = (figures.decoys[rawValue] ?? [:]).values.reduce(ScrubFigures.Count(), +)
        let counts = "\(ScrubFigures.rate(recall, "recall")), \(ScrubFigures.rate(decoys, "false positives")) (\(figures.source))"
        if !below.isEmpty {
            let survivors = below.map { kind in "\(kind) \"\(figures.examples["\(rawValue) \(kind)"] ?? "?")\"" }.joined(separator: ", ")
            return (.failed, "survived in \(rawValue): \(survivors); \(counts) (reproduce with --seed \(seed))", figures.json)
        }
        let changed = (figures.decoys[rawValue] ?? [:]).filter { $0.value.hit > 0 }.sorted { $0.key < $1.key }
            .map { "\($0.key) \"\(figures.examples["\(rawValue) \($0.key)"] ?? "?")\"" }
        if !changed.isEmpty {
            let overLimit = settings.maxFalsePositiveRate.map { (decoys.rate ?? 0) > $0 } ?? false
            return (overLimit ? .failed : .warning,
                    "decoys that are not personal data were changed in \(rawValue): \(changed.joined(separator: ", ")); \(counts) (seed \(seed))",
                    figures.json)
        }
        return (.passed, counts, figures.json)
    }
}
