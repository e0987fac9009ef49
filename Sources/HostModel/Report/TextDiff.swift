import Glibc
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
        old.withUnsafeBufferPointer { old in new.withUnsafeBufferPointer { new in hunks(from: old, to: new) } }
    }

    /// The stretches that differ between two texts (nil: absent, compared as empty), read in
    /// place where the strings hold their bytes contiguously, as native strings do.
    package static func hunks(from old: String?, to new: String?) -> [Hunk] {
        var old = old ?? ""
        var new = new ?? ""
        return old.withUTF8 { old in new.withUTF8 { new in hunks(from: old, to: new) } }
    }

    static func hunks(from old: UnsafeBufferPointer<UInt8>, to new: UnsafeBufferPointer<UInt8>) -> [Hunk] {
        switch middle(of: old, new) {
        case .equal: return []
        case .oneSided(let hunk): return [hunk]
        case .tokens(let start, let oldEnd, let newEnd):
            return withUnsafeTemporaryAllocation(of: Reader.Token.self, capacity: 2 * Reader.capacity) { tokens in
                var a = Reader(old, from: start, to: oldEnd, tokens: tokens.baseAddress!)
                var b = Reader(new, from: start, to: newEnd, tokens: tokens.baseAddress! + Reader.capacity)
                var hunks: [Hunk] = []
                while true {
                    skipEqual(&a, &b)
                    if a.atEnd && b.atEnd { return hunks }
                    // Where both agree again; with none within the window, the rest of both is one change.
                    let skip = resync(&a, &b)
                    let oldEnd = skip.flatMap { a.boundary($0.0) } ?? a.end
                    let newEnd = skip.flatMap { b.boundary($0.1) } ?? b.end
                    hunks.append(Hunk(old: a.position..<oldEnd, new: b.position..<newEnd))
                    a.move(to: oldEnd)
                    b.move(to: newEnd)
                }
            }
        }
    }

    /// What lies between the bytes two texts share at their start and at their end.
    enum Middle: Equatable {
        /// The texts are the same.
        case equal
        /// Only one text has bytes there: that is the one change.
        case oneSided(Hunk)
        /// Both have: they are compared by tokens from `start` to their ends, widened to whole
        /// tokens so that a token the shared bytes cut in two compares whole (by as many bytes
        /// in both texts, as those bytes are the same in both).
        case tokens(start: Int, oldEnd: Int, newEnd: Int)
    }

    static func middle(of old: UnsafeBufferPointer<UInt8>, _ new: UnsafeBufferPointer<UInt8>) -> Middle {
        var prefix = 0
        while prefix < old.count, prefix < new.count, old[prefix] == new[prefix] { prefix += 1 }
        var suffix = 0
        while suffix < old.count - prefix, suffix < new.count - prefix, old[old.count - 1 - suffix] == new[new.count - 1 - suffix] {
            suffix += 1
        }
        let oldMiddle = prefix..<(old.count - suffix)
        let newMiddle = prefix..<(new.count - suffix)
        if oldMiddle.isEmpty && newMiddle.isEmpty { return .equal }
        if oldMiddle.isEmpty || newMiddle.isEmpty { return .oneSided(Hunk(old: oldMiddle, new: newMiddle)) }
        let start = min(tokenStart(old, before: prefix), tokenStart(new, before: prefix))
        let widen = min(suffix, max(
            tokenEnd(old, after: oldMiddle.upperBound) - oldMiddle.upperBound,
            tokenEnd(new, after: newMiddle.upperBound) - newMiddle.upperBound))
        return .tokens(start: start, oldEnd: oldMiddle.upperBound + widen, newEnd: newMiddle.upperBound + widen)
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

    /// One text's tokens from `position` on, read as the comparison needs them: equal
    /// stretches are passed byte for byte, and only the tokens after a difference are read
    /// (at most `window` + `resyncTokens` of them), so a scrubber's few edits in a long text
    /// cost about a pass over its bytes. Tokens end at `end`.
    struct Reader {
        /// Where a read token ends, and a digest of its bytes: tokens with different digests
        /// differ, so most comparisons are one of integers.
        struct Token {
            var end: Int
            var digest: UInt64
        }

        /// The most tokens one difference reads in each text.
        static let capacity = window + resyncTokens + 1

        /// The text (alive while `hunks` runs).
        let bytes: UnsafeBufferPointer<UInt8>
        let end: Int
        /// Where the current token starts.
        private(set) var position: Int
        /// The first `read` tokens after `position` (room for `capacity`, alive while `hunks` runs).
        let tokens: UnsafeMutablePointer<Token>
        private(set) var read = 0

        init(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int, to end: Int, tokens: UnsafeMutablePointer<Token>) {
            self.bytes = bytes
            self.end = end
            self.tokens = tokens
            position = start
        }

        var atEnd: Bool { position >= end }

        mutating func move(to start: Int) {
            position = start
            read = 0
        }

        /// Where the text is after `count` tokens from `position`; nil when fewer are left.
        mutating func boundary(_ count: Int) -> Int? {
            precondition(count <= Self.capacity, "TextDiff.Reader: \(count) tokens asked for, room for \(Self.capacity)")
            while read < count {
                let from = start(of: read)
                guard from < end else { return nil }
                tokens[read] = TextDiff.token(in: bytes, at: from, before: end)
                read += 1
            }
            return start(of: count)
        }

        /// Reads up to `count` tokens after `position` (fewer when the text ends first).
        mutating func readAhead(_ count: Int) { _ = boundary(count) }

        /// Whether the tokens read reach the end.
        var readsToEnd: Bool { start(of: read) >= end }

        /// Where read token `i` starts (`i` == `read`: where the last one read ends).
        private func start(of i: Int) -> Int { i > 0 ? tokens[i - 1].end : position }

        /// Whether read tokens `i` of this text and `j` of `other` hold the same bytes.
        func same(_ i: Int, as other: Reader, _ j: Int) -> Bool {
            guard tokens[i].digest == other.tokens[j].digest else { return false }
            let x = start(of: i)..<tokens[i].end
            let y = other.start(of: j)..<other.tokens[j].end
            return x.count == y.count && memcmp(bytes.baseAddress! + x.lowerBound, other.bytes.baseAddress! + y.lowerBound, x.count) == 0
        }
    }

    /// The token starting at `start`, which ends by `limit`: where it ends, and a digest of its
    /// length and of its first and last 8 bytes.
    static func token(in bytes: UnsafeBufferPointer<UInt8>, at start: Int, before limit: Int) -> Reader.Token {
        let end = min(tokenEnd(bytes, after: start + 1), limit)
        let base = UnsafeRawPointer(bytes.baseAddress! + start)
        let length = end - start
        var head: UInt64 = 0
        var tail: UInt64 = 0
        if length >= 8 {
            head = base.loadUnaligned(as: UInt64.self)
            tail = base.loadUnaligned(fromByteOffset: length - 8, as: UInt64.self)
        } else {
            for offset in 0..<length { head = head << 8 | UInt64(bytes[start + offset]) }
        }
        let digest = (head &* 0x9E37_79B9_7F4A_7C15) ^ (tail &* 0xC2B2_AE3D_27D4_EB4F) ^ UInt64(length)
        return Reader.Token(end: end, digest: digest)
    }

    /// Moves both readers past the tokens they agree on. The bytes are compared first; the
    /// token holding the first difference (or the last equal byte, when its run may go on
    /// differently in the two texts) starts where the comparison by tokens takes over: each
    /// token before it is the same in both, so it is passed as a token comparison would.
    static func skipEqual(_ a: inout Reader, _ b: inout Reader) {
        while !a.atEnd && !b.atEnd {
            let limit = min(a.end - a.position, b.end - b.position)
            var equal = commonPrefix(a.bytes.baseAddress! + a.position, b.bytes.baseAddress! + b.position, limit)
            if equal > 0, tokenClass(a.bytes[a.position + equal - 1]) != .other {
                let kind = tokenClass(a.bytes[a.position + equal - 1])
                while equal > 0, tokenClass(a.bytes[a.position + equal - 1]) == kind { equal -= 1 }
            }
            a.move(to: a.position + equal)
            b.move(to: b.position + equal)
            guard let nextOld = a.boundary(1), let nextNew = b.boundary(1), a.same(0, as: b, 0) else { return }
            a.move(to: nextOld)
            b.move(to: nextNew)
        }
    }

    /// How many of the first `limit` bytes at `x` and `y` are the same, compared 8 at a time.
    static func commonPrefix(_ x: UnsafePointer<UInt8>, _ y: UnsafePointer<UInt8>, _ limit: Int) -> Int {
        var equal = 0
        while equal + 8 <= limit {
            let difference = UnsafeRawPointer(x + equal).loadUnaligned(as: UInt64.self)
                ^ UnsafeRawPointer(y + equal).loadUnaligned(as: UInt64.self)
            if difference != 0 { return equal + UInt64(littleEndian: difference).trailingZeroBitCount / 8 }
            equal += 8
        }
        while equal < limit, x[equal] == y[equal] { equal += 1 }
        return equal
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
    static func tokenEnd(_ bytes: UnsafeBufferPointer<UInt8>, after position: Int) -> Int {
        guard position > 0, position < bytes.count else { return min(max(position, 0), bytes.count) }
        let kind = tokenClass(bytes[position - 1])
        guard kind != .other else { return position }
        var end = position
        while end < bytes.count, tokenClass(bytes[end]) == kind { end += 1 }
        return end
    }

    /// Where the token holding `bytes[position]` starts.
    static func tokenStart(_ bytes: UnsafeBufferPointer<UInt8>, before position: Int) -> Int {
        guard position > 0, position < bytes.count else { return min(max(position, 0), bytes.count) }
        let kind = tokenClass(bytes[position])
        guard kind != .other, tokenClass(bytes[position - 1]) == kind else { return position }
        var start = position
        while start > 0, tokenClass(bytes[start - 1]) == kind { start -= 1 }
        return start
    }

    // MARK: Comparing

    /// The nearest skip (fewest tokens in all) after which both texts agree again for
    /// `resyncTokens` tokens (fewer where a text ends first, but at least one), or both are
    /// at their ends; nil when there is none within `window` tokens of each.
    static func resync(_ a: inout Reader, _ b: inout Reader) -> (Int, Int)? {
        for total in 1...(2 * window) {
            // Each skip of this total compares its first tokens; most differ there.
            a.readAhead(min(total, window) + 1)
            b.readAhead(min(total, window) + 1)
            // The skips both texts have read tokens for, in the order of their old part.
            let first = max(0, total - window, total - b.read)
            let last = min(total, window, a.read)
            guard first <= last else { continue }
            let (oldTokens, newTokens) = (a.tokens, b.tokens)
            for skipOld in first...last {
                let skipNew = total - skipOld
                // Most skips end at tokens that differ: one comparison of their digests.
                if skipOld < a.read, skipNew < b.read, oldTokens[skipOld].digest != newTokens[skipNew].digest { continue }
                // Past the last token read is the end of that text (fewer were left than asked for).
                let atEnds = (skipOld == a.read, skipNew == b.read)
                assert((!atEnds.0 || a.readsToEnd) && (!atEnds.1 || b.readsToEnd))
                if atEnds.0 && atEnds.1 { return (skipOld, skipNew) }
                if atEnds.0 || atEnds.1 || !a.same(skipOld, as: b, skipNew) { continue }
                a.readAhead(skipOld + resyncTokens)
                b.readAhead(skipNew + resyncTokens)
                var agreed = 1
                while agreed < resyncTokens, skipOld + agreed < a.read, skipNew + agreed < b.read,
                    a.same(skipOld + agreed, as: b, skipNew + agreed)
                {
                    agreed += 1
                }
                // All of them, or as many as there are before a text ends (at least one).
                if agreed == resyncTokens || skipOld + agreed == a.read || skipNew + agreed == b.read {
                    return (skipOld, skipNew)
                }
            }
        }
        return nil
    }
}
