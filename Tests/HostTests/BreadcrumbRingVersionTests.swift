import Breadcrumbs
import Foundation
@testable import HostSupport
import HostTestSupport
import Testing

/// The ring file's format across versions (SPEC B-1): a ring an older host left is read after
/// an upgrade.
@Suite struct BreadcrumbRingVersionTests {
    let folder = makeTemporaryDirectory("breadcrumb-versions")

    @Test("B-1: a ring an older host left (version 1, whose checksum took the sequence first) is still read after an upgrade")
    func versionOneRingRead() throws {
        let ring = try BreadcrumbRing.create(at: folder.appendingPathComponent("old.ring").path, slots: 4).get()
        for index in 1...3 { ring.write(level: 1, category: "app", "before the upgrade \(index)") }
        // Rewrite the file as version 1 wrote it: its version and each slot's checksum.
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: ring.path)))
        bytes[4] = 1
        for slot in 0..<3 {
            let at = Int(RH_CRUMB_HEADER_BYTES) + slot * Int(RH_CRUMB_SLOT_BYTES)
            let word = { (offset: Int, count: Int) in (0..<count).reduce(UInt64(0)) { $0 | UInt64(bytes[at + offset + $1]) << (8 * $1) } }
            let categoryLength = Int(word(20, 2)), messageLength = Int(word(22, 2))
            let text = Int(RH_CRUMB_SLOT_FIELDS)
            var hash = Self.v1Mix(0xcbf2_9ce4_8422_2325, word(0, 8))
            hash = Self.v1Mix(hash, word(8, 8))
            hash = Self.v1Mix(hash, word(16, 4) | word(20, 2) << 32 | word(22, 2) << 48)
            hash = Self.v1MixBytes(hash, Array(bytes[(at + text)..<(at + text + categoryLength)]))
            hash = Self.v1MixBytes(hash, Array(bytes[(at + text + categoryLength)..<(at + text + categoryLength + messageLength)]))
            for index in 0..<8 { bytes[at + 24 + index] = UInt8(truncatingIfNeeded: hash >> (8 * UInt64(index))) }
        }
        try Data(bytes).write(to: URL(fileURLWithPath: ring.path))
        let read = try #require(BreadcrumbRing.read(fileAt: ring.path, last: 10))
        #expect(read.torn == 0)
        #expect(read.entries.map(\.message) == (1...3).map { "before the upgrade \($0)" })
    }

    static func v1Mix(_ hash: UInt64, _ word: UInt64) -> UInt64 {
        let mixed = (hash ^ word) &* 0x9E37_79B9_7F4A_7C15
        return mixed ^ (mixed >> 29)
    }

    static func v1MixBytes(_ hash: UInt64, _ bytes: [UInt8]) -> UInt64 {
        var hash = hash
        var at = 0
        while at + 8 <= bytes.count {
            hash = v1Mix(hash, (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[at + $1]) << (8 * $1) })
            at += 8
        }
        let tail = (0..<(bytes.count - at)).reduce(UInt64(0)) { $0 | UInt64(bytes[at + $1]) << (8 * $1) }
        return v1Mix(hash, tail ^ (UInt64(bytes.count - at) << 56))
    }
}
