import Breadcrumbs
import Foundation
@testable import HostSupport
import HostTestSupport
import Testing

/// The ring file's format across versions (SPEC B-1): a ring an older host left is read after
/// an upgrade.
@Suite struct BreadcrumbRingVersionTests {
    let folder = makeTemporaryDirectory("breadcrumb-versions")

    @Test("B-1: a ring an older host left (version 1, whose checksum took the sequence first, or version 2, both of one lane) is still read after an upgrade", arguments: [1, 2])
    func olderRingRead(version: Int) throws {
        let path = folder.appendingPathComponent("old-\(version).ring").path
        try Data(Self.olderRing(version: version, messages: (1...6).map { "before the upgrade \($0)" })).write(to: URL(fileURLWithPath: path))
        let read = try #require(BreadcrumbRing.read(fileAt: path, last: 10))
        #expect(read.torn == 0)
        #expect(read.entries.map(\.message) == (3...6).map { "before the upgrade \($0)" }, "a ring of 4 slots keeps the last 4")
        #expect(read.entries.map(\.sequence) == [3, 4, 5, 6])
        // One damaged byte is caught by that version's checksum.
        var damaged = Self.olderRing(version: version, messages: ["intact", "damaged"])
        damaged[Int(RH_CRUMB_HEADER_BYTES) + Int(RH_CRUMB_SLOT_BYTES) + Int(RH_CRUMB_SLOT_FIELDS) + 4] ^= 1
        try Data(damaged).write(to: URL(fileURLWithPath: path))
        let torn = try #require(BreadcrumbRing.read(fileAt: path, last: 10))
        #expect(torn.entries.map(\.message) == ["intact"] && torn.torn == 1)
    }

    /// The bytes of a ring of 4 slots as a version 1 or 2 host wrote it, holding `messages`
    /// (category "app", level 1) in order.
    static func olderRing(version: Int, messages: [String]) -> [UInt8] {
        let slots = 4
        var bytes = [UInt8](repeating: 0, count: Int(RH_CRUMB_HEADER_BYTES) + slots * Int(RH_CRUMB_SLOT_BYTES))
        func put(_ value: UInt64, at offset: Int, count: Int) {
            for index in 0..<count { bytes[offset + index] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(index))) }
        }
        put(0x4342_4852, at: 0, count: 4)
        put(UInt64(version), at: 4, count: 4)
        put(UInt64(RH_CRUMB_SLOT_BYTES), at: 8, count: 4)
        put(UInt64(slots), at: 12, count: 4)
        put(UInt64(messages.count), at: 16, count: 8)
        for (index, message) in messages.enumerated() {
            let sequence = UInt64(index + 1), category = Array("app".utf8), text = Array(message.utf8)
            let at = Int(RH_CRUMB_HEADER_BYTES) + (index % slots) * Int(RH_CRUMB_SLOT_BYTES)
            let timestamp = UInt64(1_700_000_000_000 + index)
            let fields = 1 | UInt64(category.count) << 32 | UInt64(text.count) << 48
            put(sequence, at: at, count: 8)
            put(timestamp, at: at + 8, count: 8)
            put(fields, at: at + 16, count: 8)
            let checksum: UInt64
            if version == 1 {
                checksum = v1MixBytes(v1MixBytes(v1Mix(v1Mix(v1Mix(0xcbf2_9ce4_8422_2325, sequence), timestamp), fields), category), text)
            } else {
                var hash = v2Step(v2Step(v2Step(v2Text(v2Text(0xcbf2_9ce4_8422_2325, category), text), sequence), timestamp), fields)
                hash ^= hash >> 29
                checksum = hash
            }
            put(checksum, at: at + 24, count: 8)
            let textAt = at + Int(RH_CRUMB_SLOT_FIELDS)
            bytes.replaceSubrange(textAt..<(textAt + category.count + text.count), with: category + text)
        }
        return bytes
    }

    static func v2Step(_ hash: UInt64, _ word: UInt64) -> UInt64 { (hash ^ word) &* 0x9E37_79B9_7F4A_7C15 }

    static func v2Text(_ hash: UInt64, _ bytes: [UInt8]) -> UInt64 {
        let words = words(bytes)
        return v2Step(words.whole.reduce(hash, v2Step), words.tail ^ (UInt64(bytes.count) << 56))
    }

    static func v1Mix(_ hash: UInt64, _ word: UInt64) -> UInt64 {
        let mixed = (hash ^ word) &* 0x9E37_79B9_7F4A_7C15
        return mixed ^ (mixed >> 29)
    }

    static func v1MixBytes(_ hash: UInt64, _ bytes: [UInt8]) -> UInt64 {
        let words = words(bytes)
        return v1Mix(words.whole.reduce(hash, v1Mix), words.tail ^ (UInt64(words.tailCount) << 56))
    }

    /// `bytes` as little-endian 8-byte words, and the bytes after the last whole one as a word.
    static func words(_ bytes: [UInt8]) -> (whole: [UInt64], tail: UInt64, tailCount: Int) {
        let word = { (at: Int, count: Int) in (0..<count).reduce(UInt64(0)) { $0 | UInt64(bytes[at + $1]) << (8 * $1) } }
        let rest = bytes.count % 8
        return (stride(from: 0, to: bytes.count - rest, by: 8).map { word($0, 8) }, word(bytes.count - rest, rest), rest)
    }
}
