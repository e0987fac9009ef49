import Foundation

extension String {
    /// A NUL-terminated C buffer of a fixed size (a tuple in Swift), up to its first NUL.
    init<T>(fixedCBuffer buffer: inout T) {
        self = withUnsafeBytes(of: &buffer) { bytes in String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self) }
    }
}
