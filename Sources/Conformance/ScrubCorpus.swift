import FoundationEssentials
import Host
import HostSupport

/// Labelled text for the scrubbing checks (SPEC T-4): documents whose personal data and decoys
/// are marked by byte spans. `check --scrub` makes one from the seed (`generated`), or reads
/// one made elsewhere (`--corpus FILE`, JSON lines).
package struct ScrubCorpus: Sendable {
    /// One marked stretch of a document: bytes `start..<end`, of `kind` (`none`: a decoy, text
    /// that is not personal data and must survive); `label` says what a decoy is, when known.
    package struct Span: Sendable, Equatable {
        package var start: Int
        package var end: Int
        package var kind: String
        package var label: String?
    }

    package struct Document: Sendable, Equatable {
        package var text: String
        package var spans: [Span]

        /// The text a span marks.
        package func text(of span: Span) -> String {
            String(decoding: Array(text.utf8)[span.start..<span.end], as: UTF8.self)
        }
    }

    /// The kinds `check` judges (`--min-recall`); a corpus's other kinds are reported only.
    /// SPEC T-4's nine, the kinds of the outside detectors (T-5), and values of secret-named
    /// attribute keys.
    package static let judgedKinds = ["email", "card", "ipv4", "ipv6", "phone", "jwt", "aws_key", "bearer", "secret"] + OutsideKind.kinds + [secretKeyKind]
    /// The kind of a value whose attribute key names a secret (`scrub-attribute-keys`).
    package static let secretKeyKind = "secret_key"
    package static let decoyKind = "none"

    package var documents: [Document]
    /// Where it came from, for the report: `generated (seed 1)` or the file's path.
    package var source: String

    package init(documents: [Document], source: String) {
        self.documents = documents
        self.source = source
    }

    /// Documents generated from `seed`: each holds every judged kind once and every kind of
    /// decoy once, in running text.
    package static func generated(seed: UInt64, documents count: Int = 20) -> ScrubCorpus {
        let documents = (0..<count).map { index in PersonalData(seed: seed &+ UInt64(index)).document }
        return ScrubCorpus(documents: documents, source: "generated (seed \(seed), \(count) documents)")
    }

    /// A corpus file's problem: which line, and what is wrong with it.
    package struct FormatError: Error, CustomStringConvertible {
        package let description: String
    }

    /// The most a corpus may hold: a field holds 64 KB, and a run reads each document once a field.
    package static let maxDocuments = 100_000

    /// Reads JSON lines `{"text": "…", "spans": [{"start": 0, "end": 5, "kind": "email"}]}`
    /// (byte offsets; blank lines skipped). A span out of the text, reversed, or cutting a
    /// UTF-8 character is an error naming its line, as is a text longer than a field holds.
    package static func load(_ path: String, system: SystemCalls) throws(FormatError) -> ScrubCorpus {
        guard case .success(let data) = BoundedFile.read(path, limit: 1 << 30, followLinks: true, system: system) else {
            throw FormatError(description: "--corpus \(path): cannot read the file")
        }
        var documents: [Document] = []
        for (index, line) in data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
            let where_ = "--corpus \(path):\(index + 1)"
            guard !line.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\t") }) else { continue }
            guard documents.count < maxDocuments else { throw FormatError(description: "\(where_): more than \(maxDocuments) documents") }
            documents.append(try document(Data(line), at: where_))
        }
        guard !documents.isEmpty else { throw FormatError(description: "--corpus \(path): no documents") }
        return ScrubCorpus(documents: documents, source: path)
    }

    static func document(_ line: Data, at place: String) throws(FormatError) -> Document {
        let json: JSONValue
        do {
            json = try JSONValue.parse(line)
        } catch {
            throw FormatError(description: "\(place): not JSON (\(error))")
        }
        guard let text = json["text"]?.stringValue else { throw FormatError(description: "\(place): no \"text\" string") }
        let bytes = Array(text.utf8)
        guard bytes.count <= ReportContent.textMaxBytes else {
            throw FormatError(description: "\(place): the text is \(bytes.count) bytes, over the \(ReportContent.textMaxBytes) a field holds")
        }
        guard let list = json["spans"]?.arrayValue else { throw FormatError(description: "\(place): no \"spans\" list") }
        var spans: [Span] = []
        for (number, item) in list.enumerated() {
            guard let start = item["start"]?.intValue, let end = item["end"]?.intValue, let kind = item["kind"]?.stringValue, !kind.isEmpty else {
                throw FormatError(description: "\(place): span \(number + 1) needs integer \"start\" and \"end\" and a \"kind\"")
            }
            guard start >= 0, start < end, end <= bytes.count else {
                throw FormatError(description: "\(place): span \(number + 1) (\(start)..<\(end)) is not inside the text's \(bytes.count) bytes")
            }
            let isBoundary = { (offset: Int) in offset == bytes.count || bytes[offset] & 0xC0 != 0x80 }
            guard isBoundary(start), isBoundary(end) else {
                throw FormatError(description: "\(place): span \(number + 1) (\(start)..<\(end)) cuts a UTF-8 character")
            }
            spans.append(Span(start: start, end: end, kind: kind, label: item["label"]?.stringValue))
        }
        return Document(text: text, spans: spans)
    }
}

extension PersonalData {
    /// Every planted item and decoy in running text, each marked by its span.
    var document: ScrubCorpus.Document {
        let fillers = ["user reported", "while syncing", "see", "retrying with", "contact", "failed for", "at", "build", "then"]
        var text = ""
        var spans: [ScrubCorpus.Span] = []
        for (index, (item, isDecoy)) in (items.map { ($0, false) } + decoys.map { ($0, true) }).enumerated() {
            if !text.isEmpty { text += "; " }
            text += fillers[index % fillers.count] + " "
            let start = text.utf8.count
            text += item.text
            // The secret of a `key=value` or `Bearer` item is its value: the key may stay.
            let secretStart = start + (item.secretStart ?? (item.text.utf8.count - item.secret.utf8.count))
            spans.append(ScrubCorpus.Span(
                start: isDecoy ? start : secretStart, end: isDecoy ? text.utf8.count : secretStart + item.secret.utf8.count,
                kind: isDecoy ? ScrubCorpus.decoyKind : item.kind, label: isDecoy ? item.name : nil))
        }
        return ScrubCorpus.Document(text: text, spans: spans)
    }
}
