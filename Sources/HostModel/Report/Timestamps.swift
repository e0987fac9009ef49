import FoundationEssentials
import Glibc

// Reading the timestamps documents carry (`ReportDocument.timestamp`, `Breadcrumb.timestamp`):
// UTC, `YYYY-MM-DDTHH:MM:SSZ`, a breadcrumb's with `.mmm` before the `Z`.
extension ReportDocument {
    /// Parses `timestamp`'s format (UTC, seconds).
    public static func parseTimestamp(_ text: String) -> Date? {
        if let exact = exactTimestamp(text), exact.milliseconds == nil {
            return Date(timeIntervalSince1970: TimeInterval(exact.seconds))
        }
        return parseTimestampByFields(text)
    }

    /// Parses `timestamp`'s format by its fields, as any text that splits into six numbers at
    /// `-`, `T`, `:` and `Z` (what `parseTimestamp` reads when the text is not exactly the format).
    package static func parseTimestampByFields(_ text: String) -> Date? {
        let fields = text.split(whereSeparator: { "-T:Z".contains($0) }).compactMap { Int32($0) }
        guard fields.count == 6, text.count == 20, text.hasSuffix("Z") else { return nil }
        var parts = tm()
        parts.tm_year = fields[0] - 1900
        parts.tm_mon = fields[1] - 1
        parts.tm_mday = fields[2]
        parts.tm_hour = fields[3]
        parts.tm_min = fields[4]
        parts.tm_sec = fields[5]
        return Date(timeIntervalSince1970: TimeInterval(timegm(&parts)))
    }

    /// `YYYY-MM-DDTHH:MM:SS[.mmm]Z` read from its bytes, with a month from 1 to 12: the seconds
    /// since 1970 (days counted as `timegm` counts them, a day or time past its range running
    /// on into the next) and the milliseconds when there are any. nil for any other text.
    /// Reading every document's and breadcrumb's time by fields, through `Character`s and
    /// `timegm`, was a tenth of building a delivery's request.
    package static func exactTimestamp(_ text: String) -> (seconds: Int64, milliseconds: Int64?)? {
        var text = text
        return text.withUTF8 { bytes -> (seconds: Int64, milliseconds: Int64?)? in
            guard bytes.count == 20 || bytes.count == 24, bytes[bytes.count - 1] == UInt8(ascii: "Z") else { return nil }
            func number(_ at: Int, _ digits: Int) -> Int64? {
                var value: Int64 = 0
                for byte in bytes[at..<(at + digits)] {
                    guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                    value = value * 10 + Int64(byte - UInt8(ascii: "0"))
                }
                return value
            }
            guard timestampSeparators.allSatisfy({ bytes[$0.at] == $0.byte }),
                let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
                let minute = number(14, 2), let second = number(17, 2), (1...12).contains(month)
            else { return nil }
            var milliseconds: Int64?
            if bytes.count == 24 {
                guard bytes[19] == UInt8(ascii: "."), let fraction = number(20, 3) else { return nil }
                milliseconds = fraction
            }
            let days = daysFromCivil(year: year, month: month, day: day)
            return (((days * 24 + hour) * 60 + minute) * 60 + second, milliseconds)
        }
    }

    /// Where `exactTimestamp`'s format puts its separators.
    private static let timestampSeparators: [(at: Int, byte: UInt8)] = [
        (4, UInt8(ascii: "-")), (7, UInt8(ascii: "-")), (10, UInt8(ascii: "T")), (13, UInt8(ascii: ":")), (16, UInt8(ascii: ":")),
    ]

    /// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard Hinnant's
    /// `days_from_civil`); a day past its month's last runs on into the next month.
    private static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}

extension Breadcrumb {
    /// Parses `timestamp`'s format (also without the milliseconds).
    public static func parseTimestamp(_ text: String) -> Date? {
        if let exact = ReportDocument.exactTimestamp(text) {
            // Added as the reading by fields adds them: the same Double to the last bit.
            let seconds = Date(timeIntervalSince1970: TimeInterval(exact.seconds))
            return exact.milliseconds.map { seconds.addingTimeInterval(TimeInterval($0) / 1000) } ?? seconds
        }
        guard let dot = text.firstIndex(of: ".") else { return ReportDocument.parseTimestampByFields(text) }
        let fraction = text[text.index(after: dot)...].dropLast()
        guard text.hasSuffix("Z"), fraction.count == 3, let milliseconds = Int(fraction),
            let seconds = ReportDocument.parseTimestampByFields(String(text[..<dot]) + "Z")
        else { return nil }
        return seconds.addingTimeInterval(TimeInterval(milliseconds) / 1000)
    }
}
