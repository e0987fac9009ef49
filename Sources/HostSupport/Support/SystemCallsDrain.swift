import FoundationEssentials

/// Which bytes of a drained stream are kept.
package enum DrainKeep: Sendable {
    /// The first bytes, up to the count.
    case first(Int)
    /// The last bytes, up to the count.
    case last(Int)
}

extension SystemCalls {
    /// Reads `fd` to its end, keeping at most the chosen bytes (the rest is read and
    /// dropped): whatever the writer sends, memory stays bounded, and the writer never
    /// blocks on a full pipe.
    package func drain(_ fd: Int32, keep: DrainKeep) -> Data {
        var kept = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while case .success(let count) = buffer.withUnsafeMutableBytes({ read(fd, into: $0) }), count > 0 {
            switch keep {
            case .first(let limit): if kept.count < limit { kept.append(contentsOf: buffer[0..<min(count, limit - kept.count)]) }
            case .last(let limit):
                kept.append(contentsOf: buffer[0..<count])
                if kept.count > limit { kept = Data(kept.suffix(limit)) }
            }
        }
        return kept
    }
}
