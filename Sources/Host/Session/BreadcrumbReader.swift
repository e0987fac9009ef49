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

    /// The breadcrumbs the last report carried, oldest first, and their sequences (looked up
    /// without copying a breadcrumb).
    private struct Kept {
        var sequences: [UInt64] = []
        var breadcrumbs: [Breadcrumb] = []
    }

    init(_ ring: BreadcrumbRing) { self.ring = ring }

    /// The last `limit` breadcrumbs in the ring, oldest first.
    func current(last limit: Int) -> [Breadcrumb] {
        kept.withLock { kept in
            let sequences = kept.sequences
            let breadcrumbs = kept.breadcrumbs
            let read = ring.read(last: limit) { sequences.bisecting($0) != nil }
            var current: [Breadcrumb] = []
            current.reserveCapacity(read.count)
            for slot in read {
                if let entry = slot.entry {
                    current.append(Breadcrumb(entry))
                } else if let index = sequences.bisecting(slot.sequence) {
                    current.append(breadcrumbs[index])
                }
            }
            kept = Kept(sequences: current.map(\.sequence), breadcrumbs: current)
            return current
        }
    }
}

extension [UInt64] {
    /// The index of `value` in these values in ascending order, found by bisection.
    fileprivate func bisecting(_ value: UInt64) -> Int? {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if self[middle] < value { low = middle + 1 } else { high = middle }
        }
        return low < count && self[low] == value ? low : nil
    }
}
