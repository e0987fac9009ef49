import FoundationEssentials
import Glibc
import HostSupport

/// One line of what a program did before a report (SPEC B-1): left by the embedding program
/// (`rh_embed_breadcrumb`), by the host itself (category `reporthost`), or by `run` from the
/// watched program's standard error (category `stderr`).
public struct Breadcrumb: Sendable, Equatable {
    /// Every field behind one reference, so a copy costs one retain: each report of a session
    /// copies its ring's breadcrumbs, and a scrubber reads every one at each of its steps.
    fileprivate var fields: Fields

    /// Its place in its session's ring (1 for the session's first): Backtrace's breadcrumb id.
    public var sequence: UInt64 {
        get { fields.sequence }
        set { if newValue != fields.sequence { fields = fields.with(sequence: newValue) } }
    }
    public var timestamp: Date {
        get { fields.timestamp }
        set { if newValue != fields.timestamp { fields = fields.with(timestamp: newValue) } }
    }
    public var level: LogLevel {
        get { fields.level }
        set { if newValue != fields.level { fields = fields.with(level: newValue) } }
    }
    public var category: String {
        get { fields.category }
        set { if newValue != fields.category { fields = fields.with(category: newValue) } }
    }
    public var message: String {
        get { fields.message }
        set { if newValue != fields.message { fields = fields.with(message: newValue) } }
    }

    /// Whether its rendering is kept (tests).
    package var isRendered: Bool { fields.rendered != nil }

    public init(sequence: UInt64, timestamp: Date, level: LogLevel, category: String, message: String) {
        fields = Fields(sequence: sequence, timestamp: timestamp, level: level, category: category, message: message, rendered: nil)
    }

    /// A breadcrumb as its session's ring holds it: Unix milliseconds and an `RH_LOG_*` level
    /// (an unknown one reads as info), rendered at once.
    package init(_ entry: BreadcrumbRing.Entry) {
        let timestamp = Date(timeIntervalSince1970: TimeInterval(entry.timestampMs) / 1000)
        let level = LogLevel(rawValue: entry.level) ?? .info
        let stamp = Self.timestamp(timestamp)
        var out = JSONWriter(reservingCapacity: 112 + entry.category.utf8.count + entry.message.utf8.count)
        Fields.write(to: &out, timestamp: stamp, level: level, category: entry.category, message: entry.message, sequence: entry.sequence)
        fields = Fields(
            sequence: entry.sequence, timestamp: timestamp, level: level, category: entry.category, message: entry.message,
            rendered: Rendered(stamp: stamp, category: entry.category, message: entry.message, json: out.utf8))
    }

    /// The fields, as breadcrumbs are compared: how one was rendered is not one of them.
    public static func == (a: Breadcrumb, b: Breadcrumb) -> Bool {
        a.fields === b.fields
            || (a.sequence == b.sequence && a.timestamp == b.timestamp && a.level == b.level && a.category == b.category
                && a.message == b.message)
    }

    /// `Breadcrumb.timestamp(timestamp)`, made once when the breadcrumb was rendered.
    package var timestampText: String { fields.rendered.map { String(cString: $0.stamp) } ?? Self.timestamp(timestamp) }

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
        if let rendered = fields.rendered {
            out.written(rendered.json)
        } else {
            fields.write(to: &out, timestamp: Self.timestamp(timestamp))
        }
    }

    /// The length of what `write(to:)` writes.
    package var jsonByteCount: Int {
        if let rendered = fields.rendered { return rendered.json.count }
        var out = JSONWriter(reservingCapacity: 112 + category.utf8.count + message.utf8.count)
        write(to: &out)
        return out.utf8.count
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

extension [Breadcrumb] {
    /// Visits each breadcrumb in order until `visit` returns false, with its index, timestamp
    /// text, level, category and message, the texts as C strings (`each_breadcrumb`). A
    /// breadcrumb read from its ring is read in place, without counting a reference to it:
    /// each count is a write to memory the thread that made the report last wrote.
    package func visitCStrings(
        _ visit: (Int, UnsafePointer<CChar>, LogLevel, UnsafePointer<CChar>, UnsafePointer<CChar>) -> Bool
    ) {
        withUnsafeBufferPointer { crumbs in
            for index in crumbs.indices {
                let goOn: Bool
                if let rendered = crumbs[index].fields.rendered {
                    goOn = visit(index, rendered.stamp, crumbs[index].fields.level, rendered.category, rendered.message)
                } else {
                    let crumb = crumbs[index]
                    goOn = crumb.timestampText.withCString { stamp in
                        crumb.category.withCString { category in
                            crumb.message.withCString { visit(index, stamp, crumb.level, category, $0) }
                        }
                    }
                }
                if !goOn { return }
            }
        }
    }

    /// Their JSON array (`ReportDocument.serialized`), rendered ones written in place.
    package func writeJSON(to out: inout JSONWriter) {
        out.openArray()
        withUnsafeBufferPointer { crumbs in
            for index in crumbs.indices {
                if let rendered = crumbs[index].fields.rendered {
                    out.written(rendered.json)
                } else {
                    crumbs[index].write(to: &out)
                }
            }
        }
        out.closeArray()
    }

    /// The length of what `writeJSON` writes (`[`, `]`, a comma between two), rendered ones
    /// counted in place.
    package var jsonByteCount: Int {
        withUnsafeBufferPointer { crumbs in
            crumbs.indices.reduce(Swift.max(2, crumbs.count + 1)) { bytes, index in
                bytes + (crumbs[index].fields.rendered?.json.count ?? crumbs[index].jsonByteCount)
            }
        }
    }
}

extension Int64 {
    /// Division rounding toward negative infinity (times before 1970 stay in order).
    fileprivate func floorDivided(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}

/// A breadcrumb's fields (`Breadcrumb.fields`), never changed: a change makes new ones.
///
/// # Thread safety
/// `@unchecked Sendable`: every field is set once, in `init`; `rendered` points to memory
/// this object alone owns, written before `init` returns and freed by `deinit`.
private final class Fields: @unchecked Sendable {
    let sequence: UInt64
    let timestamp: Date
    let level: LogLevel
    let category: String
    let message: String
    /// Made once for a breadcrumb read from its ring: it rides on every report of its session
    /// until the ring drops it, each report's document is written twice, and a scrubber reads
    /// every breadcrumb at each of its steps. Changed fields are made without it; a field set
    /// to the value it had keeps it (the session's reader sets each kept breadcrumb's id again
    /// for every report).
    let rendered: Rendered?

    init(sequence: UInt64, timestamp: Date, level: LogLevel, category: String, message: String, rendered: Rendered?) {
        self.sequence = sequence
        self.timestamp = timestamp
        self.level = level
        self.category = category
        self.message = message
        self.rendered = rendered
    }

    deinit { if let rendered { UnsafeMutableRawPointer(rendered.stamp).deallocate() } }

    /// These fields with those given changed, unrendered.
    func with(
        sequence: UInt64? = nil, timestamp: Date? = nil, level: LogLevel? = nil, category: String? = nil, message: String? = nil
    ) -> Fields {
        Fields(
            sequence: sequence ?? self.sequence, timestamp: timestamp ?? self.timestamp, level: level ?? self.level,
            category: category ?? self.category, message: message ?? self.message, rendered: nil)
    }

    func write(to out: inout JSONWriter, timestamp: String) {
        Self.write(to: &out, timestamp: timestamp, level: level, category: category, message: message, sequence: sequence)
    }

    static func write(to out: inout JSONWriter, timestamp: String, level: LogLevel, category: String, message: String, sequence: UInt64) {
        out.openObject()
        out.member("timestamp", timestamp)
        out.member("level", level.name)
        out.member("category", category)
        out.member("message", message)
        out.member("sequence", int: Int(clamping: sequence))
        out.closeObject()
    }
}

/// A rendered breadcrumb (`Fields.rendered`) in one block: its timestamp text, category and
/// message as C strings (each ending at its first NUL, as `withCString` hands it), then its
/// JSON object. They are read without counting a reference: each count is a write to memory
/// the thread that made the report last wrote. The block starts at `stamp`; its owner frees it.
private struct Rendered {
    let stamp: UnsafeMutablePointer<CChar>
    let category: UnsafePointer<CChar>
    let message: UnsafePointer<CChar>
    let json: UnsafeRawBufferPointer

    init(stamp: String, category: String, message: String, json: [UInt8]) {
        let texts = [stamp.utf8, category.utf8, message.utf8]
        let block = UnsafeMutableRawPointer.allocate(byteCount: texts.reduce(json.count) { $0 + $1.count + 1 }, alignment: 1)
        var next = block
        var starts: [UnsafePointer<CChar>] = []
        for text in texts {
            starts.append(UnsafePointer(next.assumingMemoryBound(to: CChar.self)))
            next += UnsafeMutableRawBufferPointer(start: next, count: text.count).initializeMemory(as: UInt8.self, fromContentsOf: text).count
            next.storeBytes(of: 0, as: UInt8.self)
            next += 1
        }
        json.withUnsafeBytes { next.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        self.stamp = block.assumingMemoryBound(to: CChar.self)
        self.category = starts[1]
        self.message = starts[2]
        self.json = UnsafeRawBufferPointer(start: next, count: json.count)
    }
}
