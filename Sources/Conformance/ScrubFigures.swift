import FoundationEssentials
import Glibc
import Host
import HostSupport

/// How well a scrubber scrubbed (SPEC T-4): per field and per kind, how many planted values
/// were removed (recall), and per field and per decoy, how many decoys were changed (false
/// positives), with the counts behind each rate.
package struct ScrubFigures: Sendable, Equatable {
    /// How many of something there were, and how many of them were hit (removed, or changed).
    package struct Count: Sendable, Equatable {
        package var total = 0
        package var hit = 0

        package var rate: Double? { total == 0 ? nil : Double(hit) / Double(total) }

        static func + (a: Count, b: Count) -> Count { Count(total: a.total + b.total, hit: a.hit + b.hit) }
    }

    /// field → kind → planted values and those removed.
    package var planted: [String: [String: Count]] = [:]
    /// field → decoy (its label, or `none`) → decoys and those changed.
    package var decoys: [String: [String: Count]] = [:]
    /// An example of what survived, and of a decoy changed, per field and kind (for details).
    package var examples: [String: String] = [:]
    package var source = ""
    package var documents = 0

    package init(source: String, documents: Int) {
        self.source = source
        self.documents = documents
    }

    // MARK: Scoring

    /// Scores one document placed in `field`, against what the field held afterwards.
    package mutating func score(_ document: ScrubCorpus.Document, field: String, after output: String) {
        let input = Array(document.text.utf8)
        let left = Array(output.utf8)
        // Spans with the same text are judged together: as many survived as the output still
        // holds of that text beyond the copies of it the document holds outside the spans.
        let groups = Dictionary(grouping: document.spans) { document.text(of: $0) }
        for (text, spans) in groups.sorted(by: { $0.key < $1.key }) {
            let needle = Array(text.utf8)
            let unmarked = max(0, Self.occurrences(of: needle, in: input) - spans.count)
            let kept = min(spans.count, max(0, Self.occurrences(of: needle, in: left) - unmarked))
            for (index, span) in spans.enumerated() {
                let survived = index < kept
                let isDecoy = span.kind == ScrubCorpus.decoyKind
                let name = isDecoy ? span.label ?? ScrubCorpus.decoyKind : span.kind
                // Hit: a planted value removed, a decoy changed; either way, its text is gone.
                let hit = !survived
                if isDecoy {
                    decoys[field, default: [:]][name, default: Count()].total += 1
                    if hit { decoys[field, default: [:]][name, default: Count()].hit += 1 }
                } else {
                    planted[field, default: [:]][name, default: Count()].total += 1
                    if hit { planted[field, default: [:]][name, default: Count()].hit += 1 }
                }
                // The first example of what went wrong: a value that survived, a decoy changed.
                let wentWrong = isDecoy ? !survived : survived
                if wentWrong, examples["\(field) \(name)"] == nil { examples["\(field) \(name)"] = text }
            }
        }
    }

    /// Non-overlapping occurrences of `needle` in `haystack` (memchr for its first byte, then memcmp).
    static func occurrences(of needle: [UInt8], in haystack: [UInt8]) -> Int {
        guard !needle.isEmpty, needle.count <= haystack.count else { return 0 }
        return haystack.withUnsafeBytes { hay in
            needle.withUnsafeBytes { pin in
                guard let base = hay.baseAddress, let first = pin.baseAddress else { return 0 }
                var count = 0
                var offset = 0
                while offset + pin.count <= hay.count,
                    let found = memchr(base + offset, Int32(needle[0]), hay.count - offset - pin.count + 1)
                {
                    let at = base.distance(to: UnsafeRawPointer(found))
                    if memcmp(found, first, pin.count) == 0 {
                        count += 1
                        offset = at + pin.count
                    } else {
                        offset = at + 1
                    }
                }
                return count
            }
        }
    }

    /// These figures and `other`'s, added.
    package func merged(with other: ScrubFigures) -> ScrubFigures {
        var result = self
        for (field, kinds) in other.planted { result.planted[field, default: [:]].merge(kinds, uniquingKeysWith: +) }
        for (field, labels) in other.decoys { result.decoys[field, default: [:]].merge(labels, uniquingKeysWith: +) }
        result.examples.merge(other.examples) { mine, _ in mine }
        result.documents = max(documents, other.documents)
        if result.source.isEmpty { result.source = other.source }
        return result
    }

    // MARK: Totals

    /// Planted values per kind, over every field.
    package var kinds: [String: Count] { planted.values.reduce(into: [:]) { $0.merge($1, uniquingKeysWith: +) } }
    /// Decoys per label, over every field.
    package var decoyLabels: [String: Count] { decoys.values.reduce(into: [:]) { $0.merge($1, uniquingKeysWith: +) } }
    /// The kinds `--min-recall` judges, of those the corpus holds.
    package var judged: [String: Count] { kinds.filter { ScrubCorpus.judgedKinds.contains($0.key) } }
    package var allJudged: Count { judged.values.reduce(Count(), +) }
    package var allDecoys: Count { decoyLabels.values.reduce(Count(), +) }

    /// The judged kinds whose recall is below `minimum`, in the order SPEC T-4 lists them.
    package func kinds(below minimum: Double, in counts: [String: Count]? = nil) -> [String] {
        let counts = counts ?? judged
        return ScrubCorpus.judgedKinds.filter { kind in counts[kind].flatMap(\.rate).map { $0 < minimum } ?? false }
    }

    // MARK: Reading

    /// `1.000 (180/180)`.
    static func rate(_ count: Count) -> String { "\(count.rate.map { String(format3: $0) } ?? "n/a") (\(count.hit)/\(count.total))" }

    /// `recall 1.000 (180/180)`.
    static func rate(_ count: Count, _ word: String) -> String { "\(word) \(rate(count))" }

    /// The table `check` prints: per kind, per decoy, per field.
    package var lines: [String] {
        func row(_ name: String, _ total: String, _ hit: String, _ rate: String) -> String {
            "  " + name.rightPadded(30) + total.leftPadded(8) + hit.leftPadded(9) + rate.leftPadded(9)
        }
        func row(_ name: String, _ count: Count) -> String {
            row(name, String(count.total), String(count.hit), count.rate.map { String(format3: $0) } ?? "n/a")
        }
        var lines = ["scrub figures: \(source), each document in each field", row("kind", "planted", "removed", "recall")]
        let kinds = self.kinds
        let others = kinds.keys.filter { !ScrubCorpus.judgedKinds.contains($0) }.sorted()
        for kind in ScrubCorpus.judgedKinds { if let count = kinds[kind] { lines.append(row(kind, count)) } }
        for kind in others { if let count = kinds[kind] { lines.append(row("\(kind) (not judged)", count)) } }
        lines.append(row("all judged kinds", allJudged))
        lines.append(row("decoy", "decoys", "changed", "rate"))
        for (label, count) in decoyLabels.sorted(by: { $0.key < $1.key }) { lines.append(row(label, count)) }
        lines.append(row("all decoys", allDecoys))
        for field in ScrubField.allCases.map(\.rawValue) where planted[field] != nil || decoys[field] != nil {
            let judgedHere = (planted[field] ?? [:]).filter { ScrubCorpus.judgedKinds.contains($0.key) }
            let recall = judgedHere.values.reduce(Count(), +)
            let changed = (decoys[field] ?? [:]).values.reduce(Count(), +)
            lines.append("  \(field): \(Self.rate(recall, "recall")), \(Self.rate(changed, "false positives"))")
        }
        return lines
    }

    // MARK: JSON

    package var json: JSONValue {
        func table(_ counts: [String: Count], _ totalName: String, _ hitName: String, _ rateName: String) -> JSONValue {
            .object(counts.sorted { $0.key < $1.key }.map { name, count in
                (name, .object([(totalName, .int(count.total)), (hitName, .int(count.hit)), (rateName, count.rate.map(JSONValue.number) ?? .null)]))
            })
        }
        let fields = Set(planted.keys).union(decoys.keys).sorted()
        return .object([
            ("source", .string(source)), ("documents", .int(documents)),
            ("recall", allJudged.rate.map(JSONValue.number) ?? .null),
            ("false_positive_rate", allDecoys.rate.map(JSONValue.number) ?? .null),
            ("kinds", table(kinds, "planted", "removed", "recall")),
            ("decoys", table(decoyLabels, "decoys", "changed", "rate")),
            ("fields", .object(fields.map { field in
                (field, .object([
                    ("kinds", table(planted[field] ?? [:], "planted", "removed", "recall")),
                    ("decoys", table(decoys[field] ?? [:], "decoys", "changed", "rate")),
                ]))
            })),
        ])
    }

    package init?(json: JSONValue) {
        guard let fields = json["fields"]?.objectValue else { return nil }
        source = json["source"]?.stringValue ?? ""
        documents = json["documents"]?.intValue ?? 0
        func counts(_ value: JSONValue?, _ totalName: String, _ hitName: String) -> [String: Count] {
            Dictionary(uniqueKeysWithValues: (value?.objectValue ?? []).map { name, item in
                (name, Count(total: item[totalName]?.intValue ?? 0, hit: item[hitName]?.intValue ?? 0))
            })
        }
        for (field, item) in fields {
            planted[field] = counts(item["kinds"], "planted", "removed")
            decoys[field] = counts(item["decoys"], "decoys", "changed")
        }
    }
}

extension String {
    /// Three decimals: `0.997`.
    init(format3 value: Double) {
        let thousandths = Int((value * 1000).rounded())
        let fraction = String(thousandths % 1000)
        self = "\(thousandths / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }

    func leftPadded(_ width: Int) -> String { String(repeating: " ", count: max(0, width - count)) + self }
    func rightPadded(_ width: Int) -> String { self + String(repeating: " ", count: max(0, width - count)) }
}
