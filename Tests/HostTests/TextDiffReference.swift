@testable import HostModel

/// The trail's comparison by tokens as it was before it read them lazily (every token of both
/// texts interned, then compared as lists): the oracle the lazy one must agree with, hunk for
/// hunk. Where the texts differ (`TextDiff.middle`) and the classes of bytes are shared;
/// tokens are split and compared here, byte for byte.
enum ReferenceTextDiff {
    static func hunks(from old: [UInt8], to new: [UInt8]) -> [TextDiff.Hunk] {
        let (start, oldEnd, newEnd): (Int, Int, Int)
        let middle = old.withUnsafeBufferPointer { old in new.withUnsafeBufferPointer { new in TextDiff.middle(of: old, new) } }
        switch middle {
        case .equal: return []
        case .oneSided(let hunk): return [hunk]
        case .tokens(let first, let oldStop, let newStop): (start, oldEnd, newEnd) = (first, oldStop, newStop)
        }
        var known: [ArraySlice<UInt8>: Int] = [:]
        let oldTokens = Tokens(old, start..<oldEnd, known: &known)
        let newTokens = Tokens(new, start..<newEnd, known: &known)
        return compare(oldTokens, newTokens).map { hunk in
            TextDiff.Hunk(old: oldTokens.bytes(hunk.old), new: newTokens.bytes(hunk.new))
        }
    }

    /// The tokens of `bytes[span]`, each as an id and where it starts; `known` gives the ids,
    /// so that equal tokens of two texts read with it have equal ids.
    struct Tokens {
        var ids: [Int] = []
        var starts: [Int] = []
        let end: Int

        init(_ bytes: [UInt8], _ span: Range<Int>, known: inout [ArraySlice<UInt8>: Int]) {
            end = span.upperBound
            var at = span.lowerBound
            while at < span.upperBound {
                let kind = TextDiff.tokenClass(bytes[at])
                var next = at + 1
                while kind != .other, next < span.upperBound, TextDiff.tokenClass(bytes[next]) == kind { next += 1 }
                let token = bytes[at..<next]
                let id = known[token] ?? known.count
                known[token] = id
                ids.append(id)
                starts.append(at)
                at = next
            }
        }

        /// The bytes of tokens `range`.
        func bytes(_ range: Range<Int>) -> Range<Int> {
            let start = range.lowerBound < starts.count ? starts[range.lowerBound] : end
            let stop = range.upperBound < starts.count ? starts[range.upperBound] : end
            return start..<stop
        }
    }

    /// The differing stretches of two token lists, as token ranges.
    static func compare(_ old: Tokens, _ new: Tokens) -> [TextDiff.Hunk] {
        let a = old.ids
        let b = new.ids
        var hunks: [TextDiff.Hunk] = []
        var i = 0
        var j = 0
        while i < a.count || j < b.count {
            if i < a.count, j < b.count, a[i] == b[j] {
                i += 1
                j += 1
                continue
            }
            let (skipOld, skipNew) = resync(a, i, b, j) ?? (a.count - i, b.count - j)
            hunks.append(TextDiff.Hunk(old: i..<(i + skipOld), new: j..<(j + skipNew)))
            i += skipOld
            j += skipNew
        }
        return hunks
    }

    /// The nearest skip (fewest tokens in all) after which both lists agree again for
    /// `TextDiff.resyncTokens` tokens (fewer where a list ends first, but at least one), or both are
    /// at their ends; nil when there is none within `window`.
    static func resync(_ a: [Int], _ i: Int, _ b: [Int], _ j: Int) -> (Int, Int)? {
        func agrees(_ p: Int, _ q: Int) -> Bool {
            if p == a.count && q == b.count { return true }
            let count = min(TextDiff.resyncTokens, a.count - p, b.count - q)
            return count > 0 && (0..<count).allSatisfy { a[p + $0] == b[q + $0] }
        }
        for total in 1...(2 * TextDiff.window) {
            for skipOld in max(0, total - TextDiff.window)...min(total, TextDiff.window) {
                let skipNew = total - skipOld
                guard i + skipOld <= a.count, j + skipNew <= b.count else { continue }
                if agrees(i + skipOld, j + skipNew) { return (skipOld, skipNew) }
            }
        }
        return nil
    }
}
