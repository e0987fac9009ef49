import Foundation
@testable import Host
@testable import HostModel
@testable import HostSupport
import HostTestSupport
import Testing

/// A session's breadcrumb reader (SPEC B-1) over a real ring file: what it keeps between
/// reports never changes what a report carries.
@Suite struct BreadcrumbReaderTests {
    @Test("B-1: report after report, a session's reader gives the last N breadcrumbs a fresh read of the ring gives, rendered once, as the ring laps, from one thread and from four at once")
    func readerMatchesFreshRead() async throws {
        let folder = makeTemporaryDirectory("breadcrumb-reader")
        let ring = try BreadcrumbRing.create(at: folder.appendingPathComponent("session.ring").path, slots: 32).get()
        let reader = BreadcrumbReader(ring)
        var random = SplitMix64(seed: 61)
        var written = 0
        for round in 0..<400 {
            for _ in 0..<random.int(0..<(round % 25 == 0 ? 70 : 4)) {
                written += 1
                ring.write(level: Int32(written % 5), category: "c\(written % 3)", "breadcrumb \(written) \"quoted\"\n")
            }
            let limit = [1, 10, 32][round % 3]
            let carried = reader.current(last: limit)
            let fresh = ring.read(last: limit).map(Breadcrumb.init)
            #expect(carried == fresh, "round \(round): \(carried.map(\.sequence)) against \(fresh.map(\.sequence))")
            // Rendered once: a kept one is not rendered again for every report.
            let unrendered = carried.filter { !$0.isRendered }.count
            #expect(unrendered == 0, "round \(round): \(unrendered) of \(carried.count) not rendered")
            // Kept ones write the document's text a breadcrumb made afresh writes.
            var document = ReportDocument(id: "r", trigger: .logError, content: ReportContent(), internalLog: [], createdAt: Date())
            document.content.breadcrumbs = carried
            let kept = document.serialized()
            document.content.breadcrumbs = fresh
            #expect(kept == document.serialized(), "round \(round)")
        }
        await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    (0..<200).allSatisfy { index in
                        ring.write(level: 1, category: "t", "from a task \(index)")
                        let carried = reader.current(last: 32)
                        return carried.map(\.sequence) == Array(carried.map(\.sequence).sorted()) && carried.count == 32
                    }
                }
            }
            for await ordered in group { #expect(ordered, "a reader shared by four threads gave breadcrumbs out of order or short") }
        }
    }
}

extension BreadcrumbRing.Slot {
    /// Its breadcrumb: read from the ring, or the reader's at the index the ring gave back.
    func entry(or kept: [BreadcrumbRing.Entry]) -> BreadcrumbRing.Entry {
        switch content {
        case .entry(let entry): entry
        case .known(let index): kept[index]
        }
    }
}
