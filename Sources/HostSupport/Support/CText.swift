extension String {
    /// A NUL-terminated C buffer of a fixed size (a tuple in Swift), up to its first NUL.
    package init<T>(fixedCBuffer buffer: inout T) {
        self = withUnsafeBytes(of: &buffer) { bytes in String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self) }
    }

    /// `value` in decimal, with zeros in front up to `width` digits (what `%0*d` gives).
    package init(_ value: some BinaryInteger, zeroPaddedTo width: Int) {
        self = Self.zeroPadded(Self(describing: value), to: width)
    }

    /// `value` in lower-case hexadecimal, with zeros in front up to `width` digits (`%0*x`).
    package init(hex value: some BinaryInteger, width: Int) {
        self = Self.zeroPadded(Self(value, radix: 16), to: width)
    }

    private static func zeroPadded(_ digits: String, to width: Int) -> String {
        String(repeating: "0", count: Swift.max(0, width - digits.count)) + digits
    }
}

extension StringProtocol {
    /// Cut or filled with spaces to `length` characters (a column of a table).
    package func padded(toLength length: Int) -> String {
        let count = count
        return count >= length ? String(prefix(length)) : String(self) + String(repeating: " ", count: length - count)
    }

    /// Without the white space (spaces, tabs, line ends) at either end.
    package var trimmed: String {
        guard let first = firstIndex(where: { !$0.isWhitespace }), let last = lastIndex(where: { !$0.isWhitespace }) else {
            return ""
        }
        return String(self[first...last])
    }
}

/// A random (version 4) UUID in lower case, `xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx`, from one
/// call of glibc's `arc4random_buf` (`getrandom` underneath; Foundation's `UUID()` opens,
/// reads and closes `/dev/urandom` each time), written digit by digit (a recovered backlog
/// takes two for each of its reports).
package func randomUUID() -> String {
    let (random, more) = SystemCalls.random128()
    let high = random & 0xFFFF_FFFF_FFFF_0FFF | 0x4000  // version 4
    let low = more & 0x3FFF_FFFF_FFFF_FFFF | 0x8000_0000_0000_0000  // variant 10
    return String(unsafeUninitializedCapacity: 36) { text in
        var at = 0
        func put(_ value: UInt64, digits: Int) {
            for shift in stride(from: (digits - 1) * 4, through: 0, by: -4) {
                let nibble = UInt8(truncatingIfNeeded: value >> UInt64(shift) & 0xF)
                text[at] = nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
                at += 1
            }
        }
        for (value, digits) in [(high >> 32, 8), (high >> 16, 4), (high, 4), (low >> 48, 4), (low, 12)] {
            if at > 0 {
                text[at] = UInt8(ascii: "-")
                at += 1
            }
            put(value, digits: digits)
        }
        return at
    }
}
