/// Compact JSON written straight into bytes, for a value written too often to be built as a
/// `JSONValue` first: a report's document is written twice per report, and most of it is
/// breadcrumbs. What it writes is what `JSONValue.serialized()` writes for the same value;
/// a writer that builds one must say so in a test.
package struct JSONWriter {
    private var bytes: [UInt8] = []
    /// Whether the next value or key follows another in the same object or array.
    private var follows = false

    package init(reservingCapacity capacity: Int) { bytes.reserveCapacity(capacity) }

    package mutating func openObject() { open(UInt8(ascii: "{")) }
    package mutating func closeObject() { close(UInt8(ascii: "}")) }
    package mutating func openArray() { open(UInt8(ascii: "[")) }
    package mutating func closeArray() { close(UInt8(ascii: "]")) }

    /// An object's key; its value comes next.
    package mutating func key(_ key: String) {
        separate()
        JSONValue.writeString(key, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        follows = false
    }

    /// An object's member whose value is a string, null (`optional`) or a number (`int`).
    package mutating func member(_ key: String, _ value: String) {
        self.key(key)
        string(value)
    }

    package mutating func member(_ key: String, optional value: String?) {
        self.key(key)
        optional(value)
    }

    package mutating func member<I: BinaryInteger>(_ key: String, int value: I) {
        self.key(key)
        int(value)
    }

    package mutating func string(_ value: String) {
        separate()
        JSONValue.writeString(value, to: &bytes)
        follows = true
    }

    /// A string, or null.
    package mutating func optional(_ value: String?) { self.value(.optional(value)) }

    /// A number as `JSONValue.int` writes it.
    package mutating func int<I: BinaryInteger>(_ value: I) {
        separate()
        JSONValue.writeNumber(Double(value), to: &bytes)
        follows = true
    }

    package mutating func value(_ value: JSONValue) {
        separate()
        value.write(to: &bytes, pretty: false, indent: 0)
        follows = true
    }

    /// A value another `JSONWriter` wrote (its `utf8`), as it stands.
    package mutating func written(_ json: [UInt8]) {
        json.withUnsafeBytes { written($0) }
    }

    /// A value written before, as it stands.
    package mutating func written(_ json: UnsafeRawBufferPointer) {
        separate()
        bytes.append(contentsOf: json)
        follows = true
    }

    package var text: String { String(decoding: bytes, as: UTF8.self) }
    package var utf8: [UInt8] { bytes }

    private mutating func open(_ bracket: UInt8) {
        separate()
        bytes.append(bracket)
        follows = false
    }

    private mutating func close(_ bracket: UInt8) {
        bytes.append(bracket)
        follows = true
    }

    private mutating func separate() {
        if follows { bytes.append(UInt8(ascii: ",")) }
    }
}
