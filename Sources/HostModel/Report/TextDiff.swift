import HostSupport
/// Where one text was changed into another, as byte ranges: what the change trail records
/// (SPEC T-1), never the text itself.
///
/// The texts are compared as tokens (runs of letters and digits, runs of white space, and
/// each other byte alone), so a scrubber's `alice@example.com` → `[email]` is one range,
/// not a scatter of single bytes that happen to match. After a difference, the comparison
/// picks up again at the nearest place where `resyncTokens` tokens agree, looking at most
/// `window` tokens ahead in each text: linear in the texts' length for a scrubber's edits,
/// and never worse than one range over the rest when the texts have nothing more in common.
package enum TextDiff {
    /// One changed stretch: bytes `old` of the old text became bytes `new` of the new one.
    package struct Hunk: Equatable {
        package var old: Range<Int>
        package var new: Range<Int>
    }

    static let window = 64
    static let resyncTokens = 3

    /// The stretches that differ, in order.
    package static func hunks(from old: [UInt8], to new: [UInt8]) -> [Hunk] {
        var prefix = 0
        while prefix < old.count, prefix < new.count, old[prefix] == new[prefix] { prefix += 1 }
        var suffix = 0
        while suffix < old.count - prefix, suffix < new.count - prefix, old[old.count - 1 - suffix] == new[new.count - 1 - suffix] {
            suffix += 1
        }
        let oldMiddle = prefix..<(old.count - suffix)
        let newMiddle = prefix..<(new.count - suffix)
        if oldMiddle.isEmpty && newMiddle.isEmpty { return [] }
        if oldMiddle.isEmpty || newMiddle.isEmpty { return [Hunk(old: oldMiddle, new: newMiddle)] }
        // Widened to whole tokens, so that a token the common prefix or suffix cut in two
        // compares whole; by as many bytes in both texts, as those bytes are the same in both.
        let start = min(tokenStart(old, before: prefix), tokenStart(new, before: prefix))
        let widen = min(suffix, max(
            tokenEnd(old, after: oldMiddle.upperBound) - oldMiddle.upperBound,
            tokenEnd(new, after: newMiddle.upperBound) - newMiddle.upperBound))
        var known: [ArraySlice<UInt8>: Int] = [:]
        let oldTokens = Tokens(old, start..<(oldMiddle.upperBound + widen), known: &known)
        let newTokens = Tokens(new, start..<(newMiddle.upperBound + widen), known: &known)
        return compare(oldTokens, newTokens).map { hunk in
            Hunk(old: oldTokens.bytes(hunk.old), new: newTokens.bytes(hunk.new))
        }
    }

    /// `ranges` of a text carried through the change `hunks` made to it, joined with the
    /// ranges that change wrote (`adding`: a coalesced trail entry's changes), or alone (an
    /// earlier entry's, which the change moved). A range the change replaced whole is gone.
    package static func carry(_ ranges: [Range<Int>], through hunks: [Hunk], adding: Bool = true) -> [Range<Int>] {
        func moved(_ position: Int, isEnd: Bool) -> Int {
            var shift = 0
            for hunk in hunks {
                if position < hunk.old.lowerBound || (position == hunk.old.lowerBound && !isEnd && !hunk.old.isEmpty) {
                    return position + shift
                }
                if position > hunk.old.upperBound || (position == hunk.old.upperBound && isEnd && !hunk.old.isEmpty) {
                    shift += hunk.new.count - hunk.old.count
                    continue
                }
                return isEnd ? hunk.new.upperBound : hunk.new.lowerBound
            }
            return position + shift
        }
        let carried = ranges.compactMap { range -> Range<Int>? in
            let start = moved(range.lowerBound, isEnd: false)
            let moved = start..<max(start, moved(range.upperBound, isEnd: true))
            return moved.isEmpty && !range.isEmpty ? nil : moved
        }
        return joined(carried + (adding ? hunks.map(\.new) : []))
    }

    /// Sorted, with overlapping ranges made one (an empty range inside another is dropped).
    static func joined(_ ranges: [Range<Int>]) -> [Range<Int>] {
        var result: [Range<Int>] = []
        for range in ranges.sorted(by: { ($0.lowerBound, $0.upperBound) < ($1.lowerBound, $1.upperBound) }) {
            if let last = result.last, range.lowerBound < last.upperBound || (range.isEmpty && range.lowerBound == last.upperBound && !last.isEmpty)
                || (last.isEmpty && last.lowerBound == range.lowerBound)
            {
                result[result.count - 1] = last.lowerBound..<max(last.upperBound, range.upperBound)
            } else {
                result.append(range)
            }
        }
        return result
    }

    // MARK: Tokens

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
                let next = min(tokenEnd(bytes, after: at + 1), span.upperBound)
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

    enum TokenClass { case word, space, other }

    static func tokenClass(_ byte: UInt8) -> TokenClass {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "_"), 0x80...:
            .word
        case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"): .space
        default: .other
        }
    }

    /// Where the token holding `bytes[position - 1]` ends (a position inside a run: the run's end).
    static func tokenEnd(_ bytes: [UInt8], after position: Int) -> Int {
        guard position > 0, position < bytes.count else { return min(max(position, 0), bytes.count) }
        let kind = tokenClass(bytes[position - 1])
        guard kind != .other else { return position }
        var end = position
        while end < bytes.count, tokenClass(bytes[end]) == kind { end += 1 }
        return end
    }

    /// Where the token holding `bytes[position]` starts.
    static func tokenStart(_ bytes: [UInt8], before position: Int) -> Int {
        guard position > 0, position < bytes.count else { return min(max(position, 0), bytes.count) }
        let kind = tokenClass(bytes[position])
        guard kind != .other, tokenClass(bytes[position - 1]) == kind else { return position }
        var start = position
        while start > 0, tokenClass(bytes[start - 1]) == kind { start -= 1 }
        return start
    }

    // MARK: Comparing

    /// The differing stretches of two token lists, as token ranges.
    static func compare(_ old: Tokens, _ new: Tokens) -> [Hunk] {
        let a = old.ids
        let b = new.ids
        var hunks: [Hunk] = []
        var i = 0
        var j = 0
        while i < a.count || j < b.count {
            if i < a.count, j < b.count, a[i] == b[j] {
                i += 1
                j += 1
                continue
            }
            let (skipOld, skipNew) = resync(a, i, b, j) ?? (a.count - i, b.count - j)
            hunks.append(Hunk(old: i..<(i + skipOld), new: j..<(j + skipNew)))
            i += skipOld
            j += skipNew
        }
        return hunks
    }

    /// The nearest skip (fewest tokens in all) after which both lists agree again for
    /// `resyncTokens` tokens (fewer where a list ends first, but at least one), or both are
    /// at their ends; nil when there is none within `window`.
    static func resync(_ a: [Int], _ i: Int, _ b: [Int], _ j: Int) -> (Int, Int)? {
        func agrees(_ p: Int, _ q: Int) -> Bool {
            if p == a.count && q == b.count { return true }
            let count = min(resyncTokens, a.count - p, b.count - q)
            return count > 0 && (0..<count).allSatisfy { a[p + $0] == b[q + $0] }
        }
        for total in 1...(2 * window) {
            for skipOld in max(0, total - window)...min(total, window) {
                let skipNew = total - skipOld
                guard i + skipOld <= a.count, j + skipNew <= b.count else { continue }
                if agrees(i + skipOld, j + skipNew) { return (skipOld, skipNew) }
            }
        }
        return nil
    }
}
