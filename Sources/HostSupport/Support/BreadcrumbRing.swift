import Breadcrumbs
import FoundationEssentials
import Glibc

/// A session's breadcrumb ring file (SPEC B-1), mapped shared: what is written is in the page
/// cache at once, so the next launch reads it back after a SIGKILL (breadcrumb_ring.h has
/// the layout and the write protocol).
///
/// The mapping is never unmapped: the embedding program's threads may hold its address a
/// moment after a stop (`rh_crumb_deactivate`), and a ring is a few hundred kilobytes. The
/// file is removed once its session's reports carry what it held (`Repository`).
///
/// # Thread safety
/// Writes are lock-free (one atomic add per breadcrumb); reads copy each slot and skip one
/// being written: any thread.
package final class BreadcrumbRing: Sendable {
    package let path: String
    /// The mapping's address (an integer: the mapping is shared by design, see above).
    private let base: UInt
    private let bytes: Int

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
        package var sequence: UInt64
        package var timestampMs: Int64
        /// An `RH_LOG_*` value.
        package var level: Int32
        package var category: String
        package var message: String
    }

    /// Makes the ring of `slots` slots at `path` (0600; replacing a file there) and maps it.
    package static func create(at path: String, slots: Int, system: SystemCalls) -> Result<BreadcrumbRing, SystemError> {
        let slots = UInt32(clamping: max(1, slots))
        let bytes = rh_crumb_ring_bytes(slots)
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
        rh_crumb_ring_format(mapped, slots)
        return .success(BreadcrumbRing(path: path, base: mapped, bytes: bytes))
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

    /// The sequences of the last `limit` breadcrumbs, oldest first, each with its breadcrumb
    /// unless `isKnown` says the caller holds it already: a slot keeps its breadcrumb unchanged
    /// until the ring laps it, so a reader that keeps what it read copies only the breadcrumbs
    /// written since. The same breadcrumbs as `read(last:)`, but for one being written over
    /// meanwhile.
    package func read(last limit: Int, isKnown: (UInt64) -> Bool) -> [(sequence: UInt64, entry: Entry?)] {
        let base = UnsafeRawPointer(address)
        var sequences = [UInt64](repeating: 0, count: (bytes - Int(RH_CRUMB_HEADER_BYTES)) / Int(RH_CRUMB_SLOT_BYTES))
        let count = sequences.withUnsafeMutableBufferPointer { rh_crumb_ring_sequences(base, bytes, $0.baseAddress, $0.count) }
        var newestFirst: [(sequence: UInt64, entry: Entry?)] = []  // oldest first once reversed
        newestFirst.reserveCapacity(min(limit, count))
        var text = rh_crumb_text()
        for sequence in sequences[..<count].sorted(by: >) where newestFirst.count < limit {
            if isKnown(sequence) {
                newestFirst.append((sequence, nil))
                continue
            }
            var crumb = rh_crumb()
            guard rh_crumb_ring_read_one(base, bytes, sequence, &text, &crumb) else { continue }  // torn
            newestFirst.append((sequence, Entry(crumb)))
        }
        newestFirst.reverse()
        return newestFirst
    }

    /// The last `limit` breadcrumbs of the ring file at `path`, oldest first, and how many
    /// slots were torn (skipped); nil when there is no readable ring there.
    package static func read(fileAt path: String, last limit: Int, system: SystemCalls) -> (entries: [Entry], torn: Int)? {
        guard case .success(let file) = system.openRegular(path), file.size > 0 else { return nil }
        defer { system.close(file.fd) }
        guard file.size <= Int64(rh_crumb_ring_bytes(UInt32(Self.maxSlots))) else { return nil }
        let bytes = Int(file.size)
        guard let mapped = system.mapShared(file.fd, bytes: bytes, writable: false) else { return nil }
        defer { system.unmap(mapped, bytes: bytes) }
        guard rh_crumb_ring_valid(mapped, bytes, nil) else { return nil }
        return read(UnsafeRawPointer(mapped), bytes: bytes, last: limit)
    }

    /// The most slots a ring may have (`breadcrumbs.max`): 10,000 slots are 10 MB.
    package static let maxSlots = 10_000

    private static func read(_ base: UnsafeRawPointer, bytes: Int, last limit: Int) -> (entries: [Entry], torn: Int) {
        final class Collected {
            var entries: [Entry] = []
        }
        let collected = Collected()
        var torn: UInt64 = 0
        withExtendedLifetime(collected) {
            rh_crumb_ring_read(base, bytes, { context, crumb in
                guard let context, let crumb = crumb?.pointee else { return }
                Unmanaged<Collected>.fromOpaque(context).takeUnretainedValue().entries.append(Entry(crumb))
            }, Unmanaged.passUnretained(collected).toOpaque(), &torn)
        }
        let ordered = collected.entries.sorted { $0.sequence < $1.sequence }
        return (Array(ordered.suffix(max(0, limit))), Int(torn))
    }
}

extension BreadcrumbRing.Entry {
    /// A breadcrumb the ring's reader handed over (its text points into the reader's copy).
    fileprivate init(_ crumb: rh_crumb) {
        func text(_ pointer: UnsafePointer<CChar>?, _ count: Int) -> String {
            guard let pointer else { return "" }
            return String(decoding: UnsafeRawBufferPointer(start: pointer, count: count), as: UTF8.self)
        }
        self.init(
            sequence: crumb.sequence, timestampMs: crumb.timestamp_ms, level: crumb.level,
            category: text(crumb.category, crumb.category_len), message: text(crumb.message, crumb.message_len))
    }
}
