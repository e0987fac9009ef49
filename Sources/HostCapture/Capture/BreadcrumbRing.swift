import Breadcrumbs
import FoundationEssentials
import Glibc
import HostCore

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

    /// Makes the ring of `slots` slots at `path` (0600; replacing a file there) and maps it.
    package static func create(at path: String, slots: Int) -> Result<BreadcrumbRing, SystemError> {
        let slots = UInt32(clamping: max(1, slots))
        let bytes = rh_crumb_ring_bytes(slots)
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { return .failure(SystemError(.create, errno)) }
        defer { close(fd) }
        // Every block now (not a sparse file): a full disk fails here, never as a SIGBUS
        // on a write into the mapping later.
        let allocated = posix_fallocate(fd, 0, off_t(bytes))
        guard allocated == 0 else { return .failure(SystemError(.truncate, allocated)) }
        guard let mapped = mmap(nil, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), mapped != MAP_FAILED else {
            return .failure(SystemError(.open, errno))
        }
        rh_crumb_ring_format(mapped, slots)
        return .success(BreadcrumbRing(path: path, base: mapped, bytes: bytes))
    }

    /// Records one breadcrumb now.
    package func write(_ level: LogLevel, category: String, _ message: String) {
        // withCString holds every UTF-8 byte (a NUL inside included) and one more.
        category.withCString { c in
            message.withCString { m in
                _ = rh_crumb_write(address, rh_crumb_now_ms(), level.rawValue, c, category.utf8.count, m, message.utf8.count)
            }
        }
    }

    /// The last `limit` breadcrumbs, oldest first.
    package func read(last limit: Int) -> [Breadcrumb] {
        Self.read(UnsafeRawPointer(address), bytes: bytes, last: limit).crumbs
    }

    /// The last `limit` breadcrumbs of the ring file at `path`, oldest first, and how many
    /// slots were torn (skipped); nil when there is no readable ring there.
    package static func read(fileAt path: String, last limit: Int) -> (crumbs: [Breadcrumb], torn: Int)? {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG, status.st_size > 0,
            status.st_size <= off_t(rh_crumb_ring_bytes(UInt32(Self.maxSlots)))
        else { return nil }
        let bytes = Int(status.st_size)
        guard let mapped = mmap(nil, bytes, PROT_READ, MAP_SHARED, fd, 0), mapped != MAP_FAILED else { return nil }
        defer { munmap(mapped, bytes) }
        guard rh_crumb_ring_valid(mapped, bytes, nil) else { return nil }
        return read(UnsafeRawPointer(mapped), bytes: bytes, last: limit)
    }

    /// The most slots a ring may have (`breadcrumbs.max`): 10,000 slots are 10 MB.
    package static let maxSlots = 10_000

    private static func read(_ base: UnsafeRawPointer, bytes: Int, last limit: Int) -> (crumbs: [Breadcrumb], torn: Int) {
        final class Collected {
            var crumbs: [Breadcrumb] = []
        }
        let collected = Collected()
        var torn: UInt64 = 0
        withExtendedLifetime(collected) {
            rh_crumb_ring_read(base, bytes, { context, crumb in
                guard let context, let crumb = crumb?.pointee else { return }
                let collected = Unmanaged<Collected>.fromOpaque(context).takeUnretainedValue()
                func text(_ pointer: UnsafePointer<CChar>?, _ count: Int) -> String {
                    guard let pointer else { return "" }
                    return String(decoding: UnsafeRawBufferPointer(start: pointer, count: count), as: UTF8.self)
                }
                collected.crumbs.append(Breadcrumb(
                    sequence: crumb.sequence, timestamp: Date(timeIntervalSince1970: TimeInterval(crumb.timestamp_ms) / 1000),
                    level: LogLevel(rawValue: crumb.level) ?? .info, category: text(crumb.category, crumb.category_len),
                    message: text(crumb.message, crumb.message_len)))
            }, Unmanaged.passUnretained(collected).toOpaque(), &torn)
        }
        let ordered = collected.crumbs.sorted { $0.sequence < $1.sequence }
        return (Array(ordered.suffix(max(0, limit))), Int(torn))
    }
}
