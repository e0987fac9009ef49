import FoundationEssentials
import HostSupport

extension LiveReport {
    /// The internal log of one report, bounded: a plugin that logs in a loop (or misuses a
    /// handle a million times) cannot grow the report, and the repository row, without end.
    struct BoundedLog {
        /// Entries kept; later ones are counted, and one entry says how many went.
        static let capacity = 1_000
        private(set) var kept: [InternalLogEntry] = []
        private(set) var dropped = 0

        mutating func append(_ entry: InternalLogEntry) {
            if kept.count < Self.capacity { kept.append(entry) } else { dropped += 1 }
        }

        var entries: [InternalLogEntry] {
            dropped == 0 ? kept
                : kept + [InternalLogEntry(level: .warn, handler: "host", message: "\(dropped) further internal-log entries dropped (at most \(Self.capacity) are kept)")]
        }
    }
}
