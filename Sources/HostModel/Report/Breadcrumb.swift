import FoundationEssentials
import Glibc
import HostSupport

/// One line of what a program did before a report (SPEC B-1): left by the embedding program
/// (`rh_embed_breadcrumb`), by the host itself (category `reporthost`), or by `run` from the
/// watched program's standard error (category `stderr`).
public struct Breadcrumb: Sendable, Equatable {
    /// Its place in its session's ring (1 for the session's first): Backtrace's breadcrumb id.
    public var sequence: UInt64 { didSet { if sequence != oldValue { rendering = nil } } }
    public var timestamp: Date { didSet { if timestamp != oldValue { rendering = nil } } }
    public var level: LogLevel { didSet { if level != oldValue { rendering = nil } } }
    public var category: String { didSet { if category != oldValue { rendering = nil } } }
    public var message: String { didSet { if message != oldValue { rendering = nil } } }
    /// Its timestamp's text and its JSON, made once for a breadcrumb read from its ring: it
    /// rides on every report of its session until the ring drops it, each report's document
    /// is written twice, and a scrubber reads every breadcrumb at each of its steps. A change
    /// to any field drops it; a field set to the value it had keeps it (the session's reader
    /// sets each kept breadcrumb's id again for every report).
    private var rendering: Rendering?

    /// Whether its rendering is kept (tests).
    package var isRendered: Bool { rendering != nil }

    public init(sequence: UInt64, timestamp: Date, level: LogLevel, category: String, message: String) {
        self.sequence = sequence
        self.timestamp = timestamp
        self.level = level
        self.category = category
        self.message = message
    }

    /// A breadcrumb as its session's ring holds it: Unix milliseconds and an `RH_LOG_*` level
    /// (an unknown one reads as info), rendered at once.
    package init(_ entry: BreadcrumbRing.Entry) {
        self.init(
            sequence: entry.sequence, timestamp: Date(timeIntervalSince1970: TimeInterval(entry.timestampMs) / 1000),
            level: LogLevel(rawValue: entry.level) ?? .info, category: entry.category, message: entry.message)
        let stamp = Self.timestamp(timestamp)
        var out = JSONWriter(reservingCapacity: 112 + category.utf8.count + message.utf8.count)
        writeFields(to: &out, timestamp: stamp)
        rendering = Rendering(timestamp: stamp, json: out.utf8)
    }

    /// The fields, as breadcrumbs are compared: how one was rendered is not one of them.
    public static func == (a: Breadcrumb, b: Breadcrumb) -> Bool {
        a.sequence == b.sequence && a.timestamp == b.timestamp && a.level == b.level && a.category == b.category
            && a.message == b.message
    }

    /// `Breadcrumb.timestamp(timestamp)`, made once when the breadcrumb was rendered.
    package var timestampText: String { rendering?.timestamp ?? Self.timestamp(timestamp) }

    /// The category of the host's own breadcrumbs.
    public static let hostCategory = "reporthost"
    /// The category of the lines `reporthost run` keeps of the watched program's standard error.
    public static let standardErrorCategory = "stderr"

    /// In the report document: `{"timestamp", "level", "category", "message"}` (and its
    /// `sequence`, which the wire format sends as Backtrace's breadcrumb `id`).
    package var json: JSONValue {
        .object([
            ("timestamp", .string(timestampText)),
            ("level", .string(level.name)),
            ("category", .string(category)),
            ("message", .string(message)),
            ("sequence", .int(Int(clamping: sequence))),
        ])
    }

    /// `json`, written into `out` (`ReportDocument.serialized`).
    package func write(to out: inout JSONWriter) {
        if let rendering {
            out.written(rendering.json)
        } else {
            writeFields(to: &out, timestamp: Self.timestamp(timestamp))
        }
    }

    /// The length of what `write(to:)` writes.
    package var jsonByteCount: Int {
        if let rendering { return rendering.json.count }
        var out = JSONWriter(reservingCapacity: 112 + category.utf8.count + message.utf8.count)
        write(to: &out)
        return out.utf8.count
    }

    private func writeFields(to out: inout JSONWriter, timestamp: String) {
        out.openObject()
        out.member("timestamp", timestamp)
        out.member("level", level.name)
        out.member("category", category)
        out.member("message", message)
        out.member("sequence", int: Int(clamping: sequence))
        out.closeObject()
    }

    package init?(json: JSONValue) {
        guard let stamp = json["timestamp"]?.stringValue, let timestamp = Self.parseTimestamp(stamp),
            let message = json["message"]?.stringValue
        else { return nil }
        self.init(
            sequence: UInt64(clamping: json["sequence"]?.intValue ?? 0), timestamp: timestamp,
            level: json["level"]?.stringValue.flatMap(LogLevel.init(name:)) ?? .info,
            category: json["category"]?.stringValue ?? "default", message: message)
    }

    /// ISO 8601 in UTC with milliseconds, e.g. 2026-01-01T00:00:00.123Z: breadcrumbs come
    /// many a second.
    public static func timestamp(_ date: Date) -> String {
        let milliseconds = Self.milliseconds(date)
        let seconds = milliseconds.floorDivided(by: 1000)
        return ReportDocument.utc(seconds: seconds, milliseconds: Int(milliseconds - seconds * 1000))
    }

    /// Unix milliseconds of `date`, saturating: a ring written by anything else (its checksum
    /// matches what it was given) may hold any time, and none traps.
    public static func milliseconds(_ date: Date) -> Int64 {
        // A time within a microsecond of a whole millisecond is that millisecond: a Date holds
        // its time as a Double, and rounding down what reads 9.999999 lost one (a breadcrumb
        // parsed back from a document came back 1 ms early for one time in nine).
        let exact = date.timeIntervalSince1970 * 1000
        let value = abs(exact - exact.rounded()) < 0.001 ? exact.rounded() : exact.rounded(.down)
        guard value.isFinite else { return 0 }
        // Within ±4·10¹⁸: room for the arithmetic that splits it into seconds and milliseconds.
        return Int64(min(max(value, -4e18), 4e18))
    }
}

extension Int64 {
    /// Division rounding toward negative infinity (times before 1970 stay in order).
    fileprivate func floorDivided(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}

/// A breadcrumb's timestamp text and its JSON object (`Breadcrumb.rendering`).
private final class Rendering: Sendable {
    let timestamp: String
    let json: [UInt8]

    init(timestamp: String, json: [UInt8]) {
        self.timestamp = timestamp
        self.json = json
    }
}
