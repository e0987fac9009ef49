import FoundationEssentials
import Host
import HostPlugins
import HostStore
import HostSupport

/// How `reporthost demo` tells what happened to a report: its text before and after the
/// plugins, and each change in words (`scrub-pii replaced an e-mail address in the summary`).
enum DemoStory {
    /// The text fields a person typed, before and after, a line each; nothing for a field
    /// that is empty both times.
    static func beforeAndAfter(_ request: ReportRequest, _ content: ReportContent) -> [String] {
        let fields: [(String, String?, String?)] = [
            ("summary", request.summary, content.summary), ("description", request.description, content.description),
        ]
        let shown = fields.filter { $0.1 != nil || $0.2 != nil }
        return ["before:"] + shown.map { "  \($0.0.padded(toLength: 12)) \($0.1 ?? "(none)")" }
            + ["after:"] + shown.map { "  \($0.0.padded(toLength: 12)) \($0.2 ?? "(none)")" }
    }

    /// Each entry of the trail as a sentence; a text change whose written parts are all a
    /// scrubber's replacements (`[email]`, `[card]`) names what they replaced.
    static func changes(_ document: ReportDocument) -> [String] {
        guard !document.changes.isEmpty else { return ["what the plugins changed: nothing"] }
        return ["what the plugins changed:"] + document.changes.map { "  " + sentence($0, document.content) }
    }

    static func sentence(_ entry: TrailEntry, _ content: ReportContent) -> String {
        guard entry.droppedCount == nil else { return entry.text }
        let final: String?
        let place: String
        switch entry.field {
        case "summary": (final, place) = (content.summary, "the summary")
        case "description": (final, place) = (content.description, "the description")
        case "email": (final, place) = (content.email, "the e-mail field")
        default:
            guard entry.field.hasPrefix("attribute:") else { return "\(entry.plugin) \(entry.words)" }
            let key = String(entry.field.dropFirst("attribute:".count))
            (final, place) = (content.attributes[key], "attribute \(key)")
        }
        let written = (entry.ranges ?? []).filter { !$0.isEmpty }
        guard entry.operation == .set, let final, !written.isEmpty else { return "\(entry.plugin) \(entry.words)" }
        let bytes = Array(final.utf8)
        let kinds = written.compactMap { range -> String? in
            guard range.upperBound <= bytes.count else { return nil }
            return replacementKind(String(decoding: bytes[range], as: UTF8.self))
        }
        guard kinds.count == written.count else { return "\(entry.plugin) \(entry.words)" }
        return "\(entry.plugin) replaced \(listed(kinds.map(phrase))) in \(place)"
    }

    /// `email` for `[email]` or `[github_token:0a1b…]`: what a scrubber writes in place of a value.
    static func replacementKind(_ text: String) -> String? {
        guard text.hasPrefix("["), text.hasSuffix("]"), text.count > 2 else { return nil }
        let inside = text.dropFirst().dropLast()
        let kind = inside.prefix { $0 != ":" }
        guard !kind.isEmpty, kind.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "_") }) else { return nil }
        return String(kind)
    }

    static let phrases = [
        "email": "an e-mail address", "card": "a card number", "secret": "a secret", "ip": "an IP address", "ipv4": "an IP address",
        "ipv6": "an IP address", "phone": "a phone number", "iban": "an IBAN", "jwt": "a JSON Web Token", "ssn": "a social security number",
    ]

    static func phrase(_ kind: String) -> String {
        if let known = phrases[kind] { return known }
        let words = String(kind.map { $0 == "_" ? " " : $0 })
        return ("aeiou".contains(words.first ?? "x") ? "an " : "a ") + words
    }

    /// `a, b and c`.
    static func listed(_ items: [String]) -> String {
        items.count <= 1 ? items.joined() : items.dropLast().joined(separator: ", ") + " and " + (items.last ?? "")
    }

    /// The crashed thread's stack of the recovered crash `id`, as `show` prints it (read back
    /// from the repository: the document does not hold the payload).
    static func crashLines(of id: String, repository: String) -> [String] {
        let folder = URL(fileURLWithPath: repository)
        guard let records = try? Repository.openForReading(existingFolder: folder, system: Switches.system)?.records(),
            let crash = records.first(where: { $0.reportID == id })?.crash
        else { return ["(its stack could not be read back)"] }
        let lines = CrashText.lines(crash)
        // The signal line and the crashed thread: the other threads' stacks are in `show`.
        let next = lines.dropFirst(2).firstIndex { $0.hasPrefix("thread ") } ?? lines.endIndex
        return Array(lines[..<next])
    }
}
