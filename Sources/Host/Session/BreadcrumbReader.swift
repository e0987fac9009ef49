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
            let read = ring.read(last: limit) { positions.bisecting($0) }
            var current = Kept()
            current.positions.reserveCapacity(read.count)
            current.breadcrumbs.reserveCapacity(read.count)
            for slot in read {
                switch slot.content {
                case .entry(let entry):
                    current.breadcrumbs.append(Breadcrumb(entry))
                case .known(let index):
                    // Its id, counted again: lower while older breadcrumbs were being written.
                    var breadcrumb = breadcrumbs[index]
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
