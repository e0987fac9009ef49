/// `%XX` escapes, as crash files write their values and URLs their paths.
package enum PercentEncoding {
    /// `text` with its `%XX` escapes decoded (an escape that is not two hex digits stays as is).
    package static func decoded(_ text: some StringProtocol) -> String {
        guard text.utf8.contains(UInt8(ascii: "%")) else { return String(text) }
        var bytes: [UInt8] = []
        var input = Array(text.utf8)[...]
        while let byte = input.popFirst() {
            if byte == UInt8(ascii: "%"), input.count >= 2, input.prefix(2).allSatisfy({ Character(UnicodeScalar($0)).isHexDigit }),
                let value = UInt8(String(decoding: input.prefix(2), as: UTF8.self), radix: 16)
            {
                bytes.append(value)
                input = input.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
