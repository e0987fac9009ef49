import Breadcrumbs
import FoundationEssentials
import Glibc

/// A session's breadcrumb ring file (SPEC B-1), mapped shared: what is written is in the page
/// cache at once, so the next launch reads it back after a SIGKILL (breadcrumb_ring.h has
/// the layout and the write protocol).
///
/// The mapping is never unmapped: the embedding program's threads may hold its address a
/// moment after a stop (`rh_crumb_deactivate`), and a ring is 2 MB at most by default (the
/// pages of lanes no thread wrote are never touched). The file is removed once its session's
/// reports carry what it held (`Repository`).
///
/// # Thread safety
/// Writes are lock-free (a lane of the thread's own, or one atomic operation in the shared
/// lane); reads copy each slot and skip one being written: any thread.
package final class BreadcrumbRing: Sendable {
    package let path: String
    /// The mapping's address (an integer: the mapping is shared by design, see above).
    private let base: UInt
    private let bytes: Int
    /// Room for the ring's listing (`rh_crumb_ring_list`), reused by every read of this ring.
    private let listing = Locked<[rh_crumb_ref]>([])

    private init(path: String, base: UnsafeMutableRawPointer, bytes: Int) {
        self.path = path
        self.base = UInt(bitPattern: base)
        self.bytes = bytes
    }

    /// The address the embedding library writes through (`rh_crumb_activate`).
    package var address: UnsafeMutableRawPointer { UnsafeMutableRawPointer(bitPattern: base)! }

    /// One breadcrumb as the ring holds it (the report's `Breadcrumb` is made from it above
    /// this layer).
    package struct Entry: Sendable, Equatable {
        /// Its place among the ring's breadcrumbs (1 for the first), counted when it was read.
        package var sequence: UInt64
        /// Where it is in the ring (its lane and its place there): the same for as long as the
        /// ring holds it.
        package var locator: UInt64
        package var timestampMs: Int64
        /// An `RH_LOG_*` value.
        package var level: Int32
        package var category: String
        package var message: String
    }

    /// Makes the ring that keeps the last `slots` breadcrumbs at `path` (0600; replacing a file
    /// there) and maps it. For `threads` writing at once (an embedding program's), lanes
    /// ordered by the processor's counter where the kernel's own clock runs on it
    /// (`clockOrder`); otherwise, or elsewhere, one lane ordered by its sequence.
    package static func create(at path: String, slots: Int, threads: Bool = false, system: SystemCalls)
        -> Result<BreadcrumbRing, SystemError>
    {
        let slots = UInt32(clamping: max(1, slots))
        let order = threads ? clockOrder(system: system) : RH_CRUMB_ORDER_SEQUENCE
        let bytes = rh_crumb_ring_bytes(slots, order)
        let fd: Int32
        switch system.open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600) {
        case .success(let opened): fd = opened
        case .failure(let error): return .failure(error)
        }
        defer { system.close(fd) }
        // Every block now (not a sparse file): a full disk fails here, never as a SIGBUS
        // on a write into the mapping later.
        let allocated = system.fallocate(fd, length: off_t(bytes))
        guard allocated == 0 else { return .failure(SystemError(.truncate, allocated)) }
        guard let mapped = system.mapShared(fd, bytes: bytes, writable: true) else { return .failure(SystemError(.map, errno)) }
        rh_crumb_ring_format(mapped, slots, order)
        return .success(BreadcrumbRing(path: path, base: mapped, bytes: bytes))
    }

    /// The kernel's current clocksource, which says whether the processor's counter runs in
    /// step on every core (the kernel checked it at boot, and keeps its own clock on it only
    /// then).
    package static let clocksourcePath = "/sys/devices/system/clocksource/clocksource0/current_clocksource"

    /// How a new ring orders breadcrumbs of several threads (breadcrumb_ring.h).
    package static func clockOrder(system: SystemCalls) -> rh_crumb_order {
        guard case .success(let data) = BoundedFile.read(clocksourcePath, limit: 4096, followLinks: true, system: system) else {
            return RH_CRUMB_ORDER_SEQUENCE
        }
        let available = String(decoding: data, as: UTF8.self).withCString { rh_crumb_clock_order_available($0) }
        return available ? RH_CRUMB_ORDER_CLOCK : RH_CRUMB_ORDER_SEQUENCE
    }

    /// Records one breadcrumb now; `level` is an `RH_LOG_*` value.
    package func write(level: Int32, category: String, _ message: String) {
        // withCString holds every UTF-8 byte (a NUL inside included) and one more.
        category.withCString { c in
            message.withCString { m in
                _ = rh_crumb_write(address, rh_crumb_now_ms(), level, c, category.utf8.count, m, message.utf8.count)
            }
        }
    }

    /// The last `limit` breadcrumbs, oldest first.
    package func read(last limit: Int) -> [Entry] {
        Self.read(UnsafeRawPointer(address), bytes: bytes, last: limit).entries
    }

    /// A breadcrumb's place: in the ring's order (its key, then its locator), and where it is.
    package struct Position: Comparable, Sendable {
        package var key: UInt64
        package var locator: UInt64

        @inlinable package static func < (a: Position, b: Position) -> Bool { a.key < b.key || (a.key == b.key && a.locator < b.locator) }
    }

    /// One breadcrumb of `read(last:known:)`: its id, its position, and the breadcrumb or,
    /// when the caller holds it already, where.
    package struct Slot {
        package enum Content {
            case entry(Entry)
            /// The index `known` gave for its position.
            case known(Int)
        }

        package var sequence: UInt64
        package var position: Position
        package var content: Content

        /// The breadcrumb read from the ring; nil when the caller holds it already.
        package var entry: Entry? { if case .entry(let entry) = content { entry } else { nil } }
    }

    /// The last `limit` breadcrumbs, oldest first, each with its breadcrumb unless `known`
    /// gives where the caller holds the one at that position already: a slot keeps its
    /// breadcrumb unchanged until its lane laps it, so a reader that keeps what it read copies
    /// only the breadcrumbs written since. The same breadcrumbs as `read(last:)`, but for one
    /// being written over meanwhile.
    package func read(last limit: Int, known: (Position) -> Int?) -> [Slot] {
        // The listing's room, kept from one read to the next (a report's read allocated and
        // faulted in 100 KB each time).
        listing.withLock { refs in Self.read(UnsafeRawPointer(address), bytes: bytes, last: limit, refs: &refs, known: known).slots }
    }

    /// The last `limit` breadcrumbs of the ring file at `path`, oldest first, and how many
    /// slots were torn (skipped); nil when there is no readable ring there.
    package static func read(fileAt path: String, last limit: Int, system: SystemCalls) -> (entries: [Entry], torn: Int)? {
        guard case .success(let file) = system.openRegular(path), file.size > 0 else { return nil }
        defer { system.close(file.fd) }
        guard file.size <= Int64(rh_crumb_ring_bytes(UInt32(Self.maxSlots), RH_CRUMB_ORDER_CLOCK)) else { return nil }
        let bytes = Int(file.size)
        guard let mapped = system.mapShared(file.fd, bytes: bytes, writable: false) else { return nil }
        defer { system.unmap(mapped, bytes: bytes) }
        guard rh_crumb_ring_valid(mapped, bytes) else { return nil }
        return read(UnsafeRawPointer(mapped), bytes: bytes, last: limit)
    }

    /// The most slots a ring may have (`breadcrumbs.max`): 10,000 slots are 16 MB.
    package static let maxSlots = 10_000

    private static func read(_ base: UnsafeRawPointer, bytes: Int, last limit: Int) -> (entries: [Entry], torn: Int) {
        var refs: [rh_crumb_ref] = []
        let read = read(base, bytes: bytes, last: limit, refs: &refs) { _ in nil }
        return (read.slots.compactMap(\.entry), read.torn)
    }

    /// Lists the ring and reads its newest breadcrumbs back to front until `limit` are whole
    /// (a torn one is skipped and counted), at most as many as the ring answers for
    /// (`rh_crumb_ring_window`).
    private static func read(
        _ base: UnsafeRawPointer, bytes: Int, last limit: Int, refs: inout [rh_crumb_ref], known: (Position) -> Int?
    ) -> (slots: [Slot], torn: Int) {
        let capacity = rh_crumb_ring_capacity(base, bytes)
        let limit = min(limit, rh_crumb_ring_window(base, bytes))
        if refs.count < capacity { refs = [rh_crumb_ref](repeating: rh_crumb_ref(), count: capacity) }
        let count = refs.withUnsafeMutableBufferPointer { rh_crumb_ring_list(base, bytes, $0.baseAddress, $0.count) }
        var slots: [Slot] = []  // newest first until reversed
        slots.reserveCapacity(min(limit, count))
        var torn = 0
        var text = rh_crumb_text()
        for ref in refs[..<count].reversed() where slots.count < limit {
            let position = Position(key: ref.key, locator: ref.locator)
            if let index = known(position) {
                slots.append(Slot(sequence: ref.id, position: position, content: .known(index)))
                continue
            }
            var crumb = rh_crumb()
            guard rh_crumb_ring_read_one(base, bytes, ref.locator, &text, &crumb) else {
                torn += 1
                continue
            }
            slots.append(Slot(sequence: ref.id, position: position, content: .entry(Entry(crumb, sequence: ref.id))))
        }
        slots.reverse()
        return (slots, torn)
    }
}

extension [BreadcrumbRing.Position] {
    /// The index of `value` in these positions in ascending order, found by bisection.
    package func bisecting(_ value: BreadcrumbRing.Position) -> Int? {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if self[middle] < value { low = middle + 1 } else { high = middle }
        }
        return low < count && self[low] == value ? low : nil
    }
}

extension BreadcrumbRing.Entry {
    /// A breadcrumb the ring's reader handed over (its text points into the reader's copy).
    fileprivate init(_ crumb: rh_crumb, sequence: UInt64) {
        func text(_ pointer: UnsafePointer<CChar>?, _ count: Int) -> String {
            guard let pointer else { return "" }
            return String(decoding: UnsafeRawBufferPointer(start: pointer, count: count), as: UTF8.self)
        }
        self.init(
            sequence: sequence, locator: crumb.locator, timestampMs: crumb.timestamp_ms, level: crumb.level,
            category: text(crumb.category, crumb.category_len), message: text(crumb.message, crumb.message_len))
    }
}
