import Foundation
import HostModel
@testable import HostSupport
import Testing

/// The repository writes a document with `ReportDocument.serialized()`, which writes the text
/// directly; everything else reads `json`. The two must never differ.
@Suite struct DocumentTextTests {
    /// Pieces a random text is made of: escapes, control bytes, multi-byte and combining
    /// characters, a CR LF pair, JSON's own punctuation.
    static let pieces = [
        "a", "Z", "0", " ", "\"", "\\", "/", "\n", "\r\n", "\t", "\u{0}", "\u{1}", "\u{1f}", "\u{7f}", "é", "e\u{301}", "😀",
        "{", "}", "[", "]", ",", ":", "null", "report", "\u{2028}",
    ]

    static func text(_ random: inout SplitMix64) -> String {
        (0..<random.int(0..<12)).map { _ in pieces[random.int(0..<pieces.count)] }.joined()
    }

    static func instant(_ random: inout SplitMix64) -> Date {
        // Before 1970, now, far ahead, and with milliseconds.
        let seconds = [-86_400.5, 0, 1_796_400_000.123, 9.9e10, Double(random.int(0..<2_000_000_000)) + 0.001 * Double(random.int(0..<1000))]
        return Date(timeIntervalSince1970: seconds[random.int(0..<seconds.count)])
    }

    static func document(_ random: inout SplitMix64) -> ReportDocument {
        var content = ReportContent()
        content.summary = random.int(0..<4) == 0 ? nil : text(&random)
        content.description = random.int(0..<4) == 0 ? nil : text(&random)
        content.email = random.int(0..<2) == 0 ? nil : text(&random)
        content.severity = Int32(truncatingIfNeeded: Int(bitPattern: UInt(random.next())))
        for _ in 0..<random.int(0..<6) { content.attributes[text(&random)] = text(&random) }
        content.labels = (0..<random.int(0..<4)).map { _ in text(&random) }
        content.attachments = (0..<random.int(0..<3)).map { _ in
            Attachment(
                name: text(&random), filename: text(&random), data: Data(text(&random).utf8),
                source: AttachmentSource.allCases[random.int(0..<AttachmentSource.allCases.count)])
        }
        content.breadcrumbs = (0..<random.int(0..<40)).map { _ in
            let sequences: [UInt64] = [1, UInt64(random.int(0..<1_000_000)), 1 << 53 + 1, UInt64.max]
            return Breadcrumb(
                sequence: sequences[random.int(0..<sequences.count)], timestamp: instant(&random),
                level: LogLevel.allCases[random.int(0..<LogLevel.allCases.count)], category: text(&random), message: text(&random))
        }
        let log = (0..<random.int(0..<3)).map { _ in
            InternalLogEntry(level: LogLevel.allCases[random.int(0..<LogLevel.allCases.count)], handler: text(&random), message: text(&random))
        }
        let changes = (0..<random.int(0..<4)).map { _ in
            TrailEntry(
                plugin: text(&random), slot: text(&random), step: text(&random), field: text(&random),
                operation: [.set, .added, .removed, .cleared, .dropped][random.int(0..<5)],
                ranges: random.int(0..<2) == 0 ? nil : [0..<random.int(0..<9), 9..<9],
                wasLength: random.int(0..<2) == 0 ? nil : random.int(0..<100),
                droppedCount: random.int(0..<4) == 0 ? random.int(1..<50) : nil)
        }
        var document = ReportDocument(
            id: UUID().uuidString.lowercased(), trigger: Trigger.allCases[random.int(0..<Trigger.allCases.count)], content: content,
            internalLog: log, createdAt: instant(&random), changes: changes)
        document.duplicates = random.int(1..<5)
        return document
    }

    /// Where two texts part, with a little of each from there.
    static func firstDifference(_ a: String, _ b: String) -> String {
        let at = zip(a.utf8, b.utf8).prefix { $0 == $1 }.count
        return "they part at byte \(at): \(String(decoding: a.utf8.dropFirst(at).prefix(60), as: UTF8.self)) | \(String(decoding: b.utf8.dropFirst(at).prefix(60), as: UTF8.self))"
    }

    @Test("report document: the text the repository stores is json.serialized(), byte for byte, for 2,000 random documents (escapes, control bytes, combining characters, empty and missing fields, times before 1970, sequences past 2^53)")
    func writerMatchesJSON() {
        var random = SplitMix64(seed: 20_261_204)
        for round in 0..<2_000 {
            let document = Self.document(&random)
            let direct = document.serialized()
            let built = document.json.serialized()
            #expect(direct == built, "document \(round): \(Self.firstDifference(direct, built))")
            if direct != built { return }
        }
    }

    @Test("report document: breadcrumbs read from a ring (written once, kept as text) write what they would write made field by field and visit (`each_breadcrumb`) as the same C strings, and one changed after it was read (a scrubber's set_breadcrumb_message, any field) writes its new value; their size counted without writing them is the size written")
    func renderedBreadcrumbsMatch() {
        var random = SplitMix64(seed: 20_261_205)
        for round in 0..<1_000 {
            var document = Self.document(&random)
            let plain = document.content.breadcrumbs
            document.content.breadcrumbs = plain.map { crumb in
                var read = Breadcrumb(
                    BreadcrumbRing.Entry(
                        sequence: crumb.sequence, locator: crumb.sequence, timestampMs: Breadcrumb.milliseconds(crumb.timestamp),
                        level: crumb.level.rawValue, category: crumb.category, message: crumb.message))
                switch random.int(0..<8) {
                case 0: read.message = Self.text(&random)
                case 1: read.category = Self.text(&random)
                case 2: read.level = LogLevel.allCases[random.int(0..<LogLevel.allCases.count)]
                case 3: read.timestamp = Self.instant(&random)
                case 4: read.sequence = UInt64(random.int(0..<1_000_000))
                default: break
                }
                return read
            }
            let direct = document.serialized()
            let built = document.json.serialized()
            #expect(direct == built, "document \(round): \(Self.firstDifference(direct, built))")
            // Counted without being written (a record that holds them): the same size.
            let without = document.serializedWithoutBreadcrumbs()
            #expect(without.bytes == direct.utf8.count && without.text == document.serializedApart().text, "document \(round)")
            // The same breadcrumbs made field by field (never rendered) write the same text.
            var unrendered = document
            unrendered.content.breadcrumbs = document.content.breadcrumbs.map {
                Breadcrumb(sequence: $0.sequence, timestamp: $0.timestamp, level: $0.level, category: $0.category, message: $0.message)
            }
            #expect(direct == unrendered.serialized(), "document \(round): \(Self.firstDifference(direct, unrendered.serialized()))")
            #expect(document.content.breadcrumbs.map(\.timestampText) == document.content.breadcrumbs.map { Breadcrumb.timestamp($0.timestamp) })
            #expect(Self.visited(document.content.breadcrumbs) == Self.visited(unrendered.content.breadcrumbs), "document \(round)")
            if direct != built { return }
        }
    }

    /// What `each_breadcrumb` hands a plugin, checked against the fields as `withCString`
    /// hands them (to the first NUL); visiting stops where the visitor says.
    static func visited(_ crumbs: [Breadcrumb]) -> [String] {
        let cText = { (text: String) in text.withCString { String(cString: $0) } }
        var seen: [String] = []
        crumbs.visitCStrings { index, stamp, level, category, message in
            let crumb = crumbs[index]
            #expect(String(cString: stamp) == crumb.timestampText && level == crumb.level)
            #expect(String(cString: category) == cText(crumb.category) && String(cString: message) == cText(crumb.message))
            seen.append("\(index) \(String(cString: stamp)) \(level) \(String(cString: category)) \(String(cString: message))")
            return index + 1 < max(1, crumbs.count - 1)
        }
        #expect(seen.count == min(crumbs.count, max(1, crumbs.count - 1)), "visited \(seen.count) of \(crumbs.count)")
        return seen
    }

    @Test("report document: stored apart (schema 16), the text without its breadcrumbs and their array make the whole text back, byte for byte, and its size (also when the array is counted, not written), for 1,000 random documents (none, one, forty breadcrumbs)")
    func storedApartMakesTheWhole() throws {
        var random = SplitMix64(seed: 20_261_206)
        var withBreadcrumbs = 0
        for round in 0..<1_000 {
            let document = Self.document(&random)
            let whole = document.serialized()
            let apart = document.serializedApart()
            #expect(apart.bytes == whole.utf8.count, "document \(round)")
            let without = document.serializedWithoutBreadcrumbs()
            #expect(without.text == apart.text && without.bytes == apart.bytes, "document \(round): counted without the array")
            #expect((try JSONValue.parse(apart.text))["breadcrumbs"] == nil, "document \(round): the text still holds them")
            // The array goes where the writer puts the member: after `changes`.
            let member = #","breadcrumbs":"# + (apart.breadcrumbs ?? "[]")
            let split = try #require(apart.text.range(of: #","duplicates":"#), "document \(round)")
            let rebuilt = String(apart.text[..<split.lowerBound]) + member + String(apart.text[split.lowerBound...])
            #expect(rebuilt == whole, "document \(round): \(Self.firstDifference(rebuilt, whole))")
            #expect((apart.breadcrumbs == nil) == document.content.breadcrumbs.isEmpty, "document \(round)")
            if let stored = apart.breadcrumbs {
                withBreadcrumbs += 1
                // Read back as the whole text reads back (a sequence past 2^53 comes back as
                // JSON's numbers let it, as from a whole document).
                let whole = try #require(ReportDocument(json: try JSONValue.parse(whole)), "document \(round)")
                #expect(ReportDocument.breadcrumbs(stored: stored) == whole.content.breadcrumbs, "document \(round)")
            }
            if rebuilt != whole { return }
        }
        #expect(withBreadcrumbs > 900)
        #expect(ReportDocument.breadcrumbs(stored: "{\"not\": \"an array\"}") == nil)
        #expect(ReportDocument.breadcrumbs(stored: "[{\"timestamp\"") == nil)
    }

    @Test("report document: a stored document reads back as the same document")
    func writtenTextParses() throws {
        var random = SplitMix64(seed: 7)
        for _ in 0..<200 {
            let document = Self.document(&random)
            let text = document.serialized()
            #expect(try JSONValue.parse(text) == document.json, "\(text.prefix(200))")
        }
    }

    /// JSON's escaping written the plain way, one character at a time.
    static func escaped(_ text: String) -> String {
        var out = "\""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out += "\\\""
            case UInt8(ascii: "\\"): out += "\\\\"
            case UInt8(ascii: "\n"): out += "\\n"
            case UInt8(ascii: "\r"): out += "\\r"
            case UInt8(ascii: "\t"): out += "\\t"
            case 0..<0x20: out += "\\u00" + (byte < 0x10 ? "0" : "") + String(byte, radix: 16)
            default: out.unicodeScalars.append(UnicodeScalar(byte))
            }
        }
        return out + "\""
    }

    @Test("JSON: a string is escaped as the plain one-byte-at-a-time writer does, whatever byte needs it at whatever place (the writer looks eight bytes at a time)")
    func escapesAtEveryPlace() {
        // Every byte that needs an escape, and its neighbours that do not, at every place in
        // texts of 0 to 24 bytes (three words and their ends).
        let probes: [UInt8] = Array(0..<0x20) + [0x21, 0x22, 0x23, 0x5B, 0x5C, 0x5D, 0x7F]
        for length in 0...24 {
            for place in 0..<max(length, 1) {
                for probe in probes where length > 0 {
                    var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                    bytes[place] = probe
                    let text = String(decoding: bytes, as: UTF8.self)
                    let written = JSONValue.string(text).serialized()
                    #expect(written == Self.escaped(text), "byte \(probe) at \(place) of \(length)")
                }
            }
        }
        #expect(JSONValue.string("").serialized() == "\"\"")
        // Multi-byte characters around an escape are copied whole.
        let mixed = "é\"😀\\\u{1}e\u{301}\r\nabcdefgh\u{2028}"
        #expect(JSONValue.string(mixed).serialized() == "\"é\\\"😀\\\\\\u0001e\u{301}\\r\\nabcdefgh\u{2028}\"")
    }

    @Test("report document: a breadcrumb's time reads back as it was written: 100,000 millisecond times as a ring gives them (2026, and before 1970), written, parsed and written again (one in nine came back 1 ms early)")
    func breadcrumbTimesRoundTrip() {
        var changed: [Int64] = []
        for step in Int64(0)..<100_000 {
            for base in [Int64(1_796_400_000_000), -86_400_000] {
                let milliseconds = base + step * 7 + 3
                let written = Breadcrumb.timestamp(Date(timeIntervalSince1970: TimeInterval(milliseconds) / 1000))
                let again = Breadcrumb.parseTimestamp(written).map(Breadcrumb.timestamp)
                if again != written { changed.append(milliseconds) }
            }
        }
        #expect(changed.isEmpty, "\(changed.count) times changed, first \(changed.prefix(3))")
    }

    @Test("report document: a timestamp read from its bytes is the Date the reading by fields gives, to the last bit: 200,000 random times from year 0 to 9999 (days 1 to 31 of every month, 60 seconds), with and without milliseconds, and texts near the format")
    func exactTimestampsMatchFields() {
        var random = SplitMix64(seed: 20261205)
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        var differing: [String] = []
        for _ in 0..<200_000 {
            let year = String(repeating: "0", count: 3) + "\(random.int(0..<10_000))"
            let text = "\(year.suffix(4))-\(two(random.int(1..<13)))-\(two(random.int(1..<32)))T\(two(random.int(0..<24))):\(two(random.int(0..<60))):\(two(random.int(0..<61)))Z"
            let fields = ReportDocument.parseTimestampByFields(text)
            if ReportDocument.exactTimestamp(text) == nil || ReportDocument.parseTimestamp(text) != fields { differing.append(text) }
            let milliseconds = "\(random.int(1000..<2000))".dropFirst()
            let withMilliseconds = text.dropLast() + ".\(milliseconds)Z"
            let expected = fields.map { $0.addingTimeInterval(TimeInterval(Int(milliseconds)!) / 1000) }
            if Breadcrumb.parseTimestamp(String(withMilliseconds)) != expected { differing.append(String(withMilliseconds)) }
        }
        #expect(differing.isEmpty, "\(differing.count) differ, first \(differing.prefix(3))")
        // Near the format: what the reading by fields makes of them, never another time.
        for text in ["2026-13-05T10:00:00Z", "2026-12-05T1:00:000Z", "2026-12-05 10:00:00Z", "2026-12-05T10:00:00", "+026-12-05T10:00:00Z",
                     "2026-12-05T10:00:00.5Z", "2026-12-05T10:00:00.123Z", "２０26-12-05T10:00:00Z"] {
            #expect(ReportDocument.parseTimestamp(text) == ReportDocument.parseTimestampByFields(text), "\(text)")
        }
    }
}
