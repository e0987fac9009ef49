import HostModel
import HostSupport

/// Reads a session's breadcrumb ring for each of its reports (SPEC B-1). Consecutive reports
/// carry mostly the same breadcrumbs, so those the last report carried and the ring still
/// holds are reused, rendered already (`Breadcrumb.init(_:)`), and only those written since
/// are copied from the ring.
///
/// # Thread safety
/// What the last report carried is a `Locked`: reports raised on several threads at once
/// read the ring one after another.
final class BreadcrumbReader: Sendable {
    private let ring: BreadcrumbRing
    private let kept = Locked(Kept())

    /// The breadcrumbs the last report carried, oldest first, and their positions in the ring
    /// (in the same order: looked up by bisection, without copying a breadcrumb).
    private struct Kept {
        var positions: [BreadcrumbRing.Position] = []
        var breadcrumbs: [Breadcrumb] = []
    }

    init(_ ring: BreadcrumbRing) { self.ring = ring }

    /// The last `limit` breadcrumbs in the ring, oldest first.
    func current(last limit: Int) -> [Breadcrumb] {
        kept.withLock { kept in
            let positions = kept.positions
            let breadcrumbs = kept.breadcrumbs
            let read = ring.read(last: limit) { positions.bisecting($0) != nil }
            var current = Kept()
            current.positions.reserveCapacity(read.count)
            current.breadcrumbs.reserveCapacity(read.count)
            var known = 0  // both in ascending order: the kept one found walks forward
            for slot in read {
                if let entry = slot.entry {
                    current.breadcrumbs.append(Breadcrumb(entry))
                } else {
                    while known < positions.count && positions[known] < slot.position { known += 1 }
                    guard known < positions.count && positions[known] == slot.position else { continue }
                    // Its id, counted again: lower while older breadcrumbs were being written.
                    var breadcrumb = breadcrumbs[known]
                    breadcrumb.sequence = slot.sequence
                    current.breadcrumbs.append(breadcrumb)
                }
                current.positions.append(slot.position)
            }
            kept = current
            return current.breadcrumbs
        }
    }
}

extension [BreadcrumbRing.Position] {
    /// The index of `value` in these values in ascending order, found by bisection.
    fileprivate func bisecting(_ value: BreadcrumbRing.Position) -> Int? {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if self[middle] < value { low = middle + 1 } else { high = middle }
        }
        return low < count && self[low] == value ? low : nil
    }
}
