/// `%XX` escapes, as crash files write their values and URLs their paths.
package enum PercentEncoding {
    /// `text` with its `%XX` escapes decoded (an escape that is not two hex digits stays as is).
    ///
    /// Concrete, not generic over `StringProtocol`: a generic called from another target runs
    /// unspecialized, and recovery calls this for every field of every crash file.
    package static func decoded(_ text: String) -> String {
        var text = text
        return text.withUTF8 { decoded(UnsafeRawBufferPointer($0)) } ?? text
    }

    package static func decoded(_ text: Substring) -> String { decoded(String(text)) }

    /// The decoded text, or nil when it holds no `%`.
    private static func decoded(_ bytes: UnsafeRawBufferPointer) -> String? {
        guard bytes.contains(UInt8(ascii: "%")) else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%"), index + 2 < bytes.count, let high = hexValue(bytes[index + 1]),
                let low = hexValue(bytes[index + 2])
            {
                output.append(high << 4 | low)
                index += 3
            } else {
                output.append(byte)
                index += 1
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
