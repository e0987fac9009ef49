import FoundationEssentials

/// A JSON value that keeps object keys in order, so documents print in the order SPEC I
/// shows them, and so parsing can tell `true` from `1` (Foundation's parser cannot, on Linux).
package enum JSONValue: Equatable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    package static func == (a: JSONValue, b: JSONValue) -> Bool {
        switch (a, b) {
        case (.null, .null): true
        case (.bool(let x), .bool(let y)): x == y
        case (.number(let x), .number(let y)): x == y
        case (.string(let x), .string(let y)): x == y
        case (.array(let x), .array(let y)): x == y
        case (.object(let x), .object(let y)):
            x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: false
        }
    }

    package static func int<I: BinaryInteger>(_ value: I) -> JSONValue { .number(Double(value)) }
    package static func optional(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }

    /// The value of `key` when this is an object.
    package subscript(key: String) -> JSONValue? {
        guard case .object(let pairs) = self else { return nil }
        return pairs.first(where: { $0.0 == key })?.1
    }

    package var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    package var arrayValue: [JSONValue]? { if case .array(let a) = self { a } else { nil } }
    package var objectValue: [(String, JSONValue)]? { if case .object(let o) = self { o } else { nil } }
    package var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }
    package var doubleValue: Double? { if case .number(let d) = self { d } else { nil } }
    package var isNull: Bool { self == .null }

    /// The value as an integer, when it is a number without a fractional part.
    package var intValue: Int? {
        guard case .number(let d) = self, d.rounded() == d, abs(d) < 9.0e15 else { return nil }
        return Int(d)
    }

    /// A short name of the value's JSON type, for error messages.
    package var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

// MARK: - Writing

extension JSONValue {
    /// Compact JSON text; `pretty` indents by two spaces.
    package func serialized(pretty: Bool = false) -> String {
        var out: [UInt8] = []
        write(to: &out, pretty: pretty, indent: 0)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appended byte by byte and run by run into one buffer, with no string built on the way:
    /// a recovered crash's payload has thousands of values. (`JSONWriter` writes with it too.)
    func write(to out: inout [UInt8], pretty: Bool, indent: Int) {
        switch self {
        case .null: out += "null".utf8
        case .bool(let b): out += (b ? "true" : "false").utf8
        case .number(let d): JSONValue.writeNumber(d, to: &out)
        case .string(let s): JSONValue.writeString(s, to: &out)
        case .array(let items):
            if items.isEmpty { out += "[]".utf8; return }
            // A list of numbers (a trail's byte range) reads best on one line.
            let broken = pretty && !items.allSatisfy { if case .number = $0 { true } else { false } }
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                if broken { Self.newline(&out, indent + 1) } else if pretty && i > 0 { out.append(UInt8(ascii: " ")) }
                item.write(to: &out, pretty: pretty, indent: indent + 1)
            }
            if broken { Self.newline(&out, indent) }
            out.append(UInt8(ascii: "]"))
        case .object(let pairs):
            if pairs.isEmpty { out += "{}".utf8; return }
            out.append(UInt8(ascii: "{"))
            for (i, (key, value)) in pairs.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                if pretty { Self.newline(&out, indent + 1) }
                JSONValue.writeString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                if pretty { out.append(UInt8(ascii: " ")) }
                value.write(to: &out, pretty: pretty, indent: indent + 1)
            }
            if pretty { Self.newline(&out, indent) }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// A line break and two spaces per `level`, for pretty output.
    private static func newline(_ out: inout [UInt8], _ level: Int) {
        out.append(UInt8(ascii: "\n"))
        out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: 2 * level))
    }

    /// A whole number below 9·10¹⁵ as its digits, any other as Swift prints a Double
    /// (`JSONWriter` writes with it too).
    static func writeNumber(_ d: Double, to out: inout [UInt8]) {
        if d.rounded() == d && abs(d) < 9.0e15 { out += String(Int64(d)).utf8 } else { out += "\(d)".utf8 }
    }

    /// A string with its quotes and escapes (`JSONWriter` writes with it too).
    static func writeString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Runs of bytes that need no escape are appended whole, found eight bytes at a time;
        // only `"`, `\` and controls (all ASCII, so never inside a multi-byte character) are
        // written one at a time. (Runs are cut at bytes, not Characters: a String subscript
        // would round a cut inside "\r\n" or before a combining mark to a Character boundary.)
        var s = s
        s.withUTF8 { bytes in
            guard let base = bytes.baseAddress else { return }
            var run = 0
            var index = 0
            while index < bytes.count {
                if index + 8 <= bytes.count,
                    !needsEscape(UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self))
                {
                    index += 8
                    continue
                }
                let byte = bytes[index]
                index += 1
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<index - 1]))
                switch byte {
                case UInt8(ascii: "\""): out += #"\""#.utf8
                case UInt8(ascii: "\\"): out += #"\\"#.utf8
                case UInt8(ascii: "\n"): out += #"\n"#.utf8
                case UInt8(ascii: "\r"): out += #"\r"#.utf8
                case UInt8(ascii: "\t"): out += #"\t"#.utf8
                default: out += ("\\u" + String(hex: byte, width: 4)).utf8
                }
                run = index
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run...]))
        }
        out.append(UInt8(ascii: "\""))
    }

    /// Whether any of the eight bytes in `word` is a control, `"` or `\`: each test is exact
    /// for the word as a whole (the classic "has a byte less than n" and "has a zero byte").
    private static func needsEscape(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        func hasZeroByte(_ value: UInt64) -> Bool { (value &- ones) & ~value & highs != 0 }
        let hasControl = (word &- ones &* 0x20) & ~word & highs != 0
        return hasControl || hasZeroByte(word ^ (ones &* 0x22)) || hasZeroByte(word ^ (ones &* 0x5C))
    }
}

// MARK: - Parsing

/// Why JSON text could not be parsed, with the byte offset.
package struct JSONParseError: Error, Equatable, Sendable, CustomStringConvertible {
    package let offset: Int
    package let reason: String
    package var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

extension JSONValue {
    /// Parses one JSON document (RFC 8259); duplicate object keys keep the last value.
    package static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        var parser = Parser(bytes: Array(text.utf8))
        parser.skipSpace()
        let value = try parser.value(depth: 0)
        parser.skipSpace()
        guard parser.index == parser.bytes.count else { throw parser.fail("unexpected text after the document") }
        return value
    }

    package static func parse(_ data: Data) throws(JSONParseError) -> JSONValue {
        guard let text = String(data: data, encoding: .utf8) else {
            throw JSONParseError(offset: 0, reason: "not UTF-8")
        }
        return try parse(text)
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0
        /// Up to this many keys, an object's keys are compared one by one.
        static let smallObject = 16

        func fail(_ reason: String) -> JSONParseError { JSONParseError(offset: index, reason: reason) }

        mutating func skipSpace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x0A, 0x0D, 0x09: index += 1
                default: return
                }
            }
        }

        mutating func expect(_ literal: StaticString, _ value: JSONValue) throws(JSONParseError) -> JSONValue {
            let count = literal.utf8CodeUnitCount
            guard index + count <= bytes.count,
                literal.withUTF8Buffer({ expected in (0..<count).allSatisfy { bytes[index + $0] == expected[$0] } })
            else { throw fail("expected \(literal)") }
            index += count
            return value
        }

        mutating func value(depth: Int) throws(JSONParseError) -> JSONValue {
            guard depth < 256 else { throw fail("nested too deeply") }
            guard index < bytes.count else { throw fail("unexpected end") }
            switch bytes[index] {
            case UInt8(ascii: "n"): return try expect("null", .null)
            case UInt8(ascii: "t"): return try expect("true", .bool(true))
            case UInt8(ascii: "f"): return try expect("false", .bool(false))
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "["):
                index += 1
                var items: [JSONValue] = []
                skipSpace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
                while true {
                    skipSpace()
                    items.append(try value(depth: depth + 1))
                    skipSpace()
                    guard index < bytes.count else { throw fail("unterminated array") }
                    if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                    if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
                    throw fail("expected , or ]")
                }
            case UInt8(ascii: "{"):
                index += 1
                // A repeated key: the last value wins, in the position of the last occurrence.
                // The earlier one is left as a hole (nil), closed once at the end: a document
                // repeating keys costs no more than one with as many distinct keys. A key is
                // looked for among the keys so far while the object is small (most of a
                // report's objects: hashing cost them more), in a table beyond.
                var pairs: [(String, JSONValue)?] = []
                var keys: [String] = []
                var positions: [String: Int]?
                var repeats = false
                func position(of key: String) -> Int? {
                    if let positions { return positions[key] }
                    return keys.lastIndex(of: key)  // an earlier one is a hole
                }
                func object() -> JSONValue { .object(repeats ? pairs.compactMap { $0 } : pairs.map { $0! }) }
                skipSpace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return object() }
                while true {
                    skipSpace()
                    guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a key") }
                    let key = try string()
                    skipSpace()
                    guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected :") }
                    index += 1
                    skipSpace()
                    let item = try value(depth: depth + 1)
                    if let position = position(of: key) {
                        pairs[position] = nil
                        repeats = true
                    }
                    if positions == nil, keys.count == Self.smallObject {
                        var table: [String: Int] = [:]
                        for (at, pair) in pairs.enumerated() { if let pair { table[pair.0] = at } }
                        positions = table
                    }
                    if positions == nil { keys.append(key) } else { positions?[key] = pairs.count }
                    pairs.append((key, item))
                    skipSpace()
                    guard index < bytes.count else { throw fail("unterminated object") }
                    if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                    if bytes[index] == UInt8(ascii: "}") { index += 1; return object() }
                    throw fail("expected , or }")
                }
            default: return try number()
            }
        }

        /// RFC 8259's number: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, finite.
        mutating func number() throws(JSONParseError) -> JSONValue {
            let start = index
            func digits() -> Int {
                let from = index
                while index < bytes.count, (0x30...0x39).contains(bytes[index]) { index += 1 }
                return index - from
            }
            func invalid() -> JSONParseError {
                let error = fail("expected a value")
                index = start
                return error
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
            let leadingZero = index < bytes.count && bytes[index] == UInt8(ascii: "0")
            let integer = digits()
            guard integer > 0, !(leadingZero && integer > 1) else { throw invalid() }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                guard digits() > 0 else { throw invalid() }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
                guard digits() > 0 else { throw invalid() }
            }
            // Infinities are refused on purpose (Python's reader turns 1e400 into inf).
            guard let d = Double(String(decoding: bytes[start..<index], as: UTF8.self)), d.isFinite else {
                throw invalid()
            }
            return .number(d)
        }

        mutating func string() throws(JSONParseError) -> String {
            index += 1  // opening quote
            // Most strings hold no escape: taken whole, validated once.
            var end = index
            var bits: UInt8 = 0
            while end < bytes.count, bytes[end] != UInt8(ascii: "\""), bytes[end] != UInt8(ascii: "\\"), bytes[end] >= 0x20 {
                bits |= bytes[end]
                end += 1
            }
            if end < bytes.count, bytes[end] == UInt8(ascii: "\"") {
                // ASCII (most keys and values) needs no validation: `String(validating:)` is
                // generic, and looked up its types at run time at every string.
                let text = bytes[index..<end]
                guard let s = bits < 0x80 ? String(decoding: text, as: UTF8.self) : String(validating: text, as: UTF8.self) else {
                    throw fail("string is not UTF-8")
                }
                index = end + 1
                return s
            }
            var out = [UInt8]()
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    guard let s = String(validating: out, as: UTF8.self) else { throw fail("string is not UTF-8") }
                    return s
                case UInt8(ascii: "\\"):
                    guard index < bytes.count else { throw fail("unterminated escape") }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""): out.append(0x22)
                    case UInt8(ascii: "\\"): out.append(0x5C)
                    case UInt8(ascii: "/"): out.append(0x2F)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0C)
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "u"):
                        var code = try hex4()
                        if (0xD800..<0xDC00).contains(code), index + 6 <= bytes.count,
                            bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                        {
                            index += 2
                            let low = try hex4()
                            guard (0xDC00..<0xE000).contains(low) else { throw fail("bad surrogate pair") }
                            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let scalar = Unicode.Scalar(code) else { throw fail("bad \\u escape") }
                        out.append(contentsOf: Array(String(Character(scalar)).utf8))
                    default: throw fail("bad escape")
                    }
                case 0..<0x20: throw fail("control character in string")
                default: out.append(byte)
                }
            }
            throw fail("unterminated string")
        }

        mutating func hex4() throws(JSONParseError) -> UInt32 {
            guard index + 4 <= bytes.count, bytes[index..<index + 4].allSatisfy({ Character(Unicode.Scalar($0)).isHexDigit }),
                let text = String(bytes: bytes[index..<index + 4], encoding: .ascii),
                let code = UInt32(text, radix: 16)
            else { throw fail("bad \\u escape") }
            index += 4
            return code
        }
    }
}
