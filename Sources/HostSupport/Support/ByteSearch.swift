import FoundationEssentials
import Glibc

extension Data {
    /// The first range of `needle` in this data at or after `start` (one of its indices; its
    /// start when nil), found with `memchr` and `memcmp` over the bytes. The generic
    /// `firstRange(of:)` compares byte by byte through `DataProtocol`'s witnesses: it was a
    /// quarter of the local receiver's time per request. (Glibc's `memmem` is not imported.)
    package func firstRange(ofBytes needle: Data, from start: Index? = nil) -> Range<Index>? {
        let from = start ?? startIndex
        guard !needle.isEmpty, from >= startIndex, from <= endIndex else { return nil }
        let offset = withUnsafeBytes { (haystack: UnsafeRawBufferPointer) -> Int? in
            needle.withUnsafeBytes { (wanted: UnsafeRawBufferPointer) -> Int? in
                guard let base = haystack.baseAddress, let wantedBase = wanted.baseAddress else { return nil }
                let first = Int32(wanted[0])
                var at = from - startIndex
                while haystack.count - at >= wanted.count {
                    guard let hit = memchr(base + at, first, haystack.count - at - wanted.count + 1) else { return nil }
                    at = base.distance(to: UnsafeRawPointer(hit))
                    if memcmp(hit, wantedBase, wanted.count) == 0 { return at }
                    at += 1
                }
                return nil
            }
        }
        return offset.map { (startIndex + $0)..<(startIndex + $0 + needle.count) }
    }
}
