import FoundationEssentials
import Glibc
import HostModel
import HostSupport
import HostPlugins
import HostStore

/// A crash file as the recovery read it, before anything is asked of the repository: parsed,
/// its frames symbolicated and its payload serialized, or why it could not be read.
struct ReadCrash: Sendable {
    let path: String
    let modified: Date
    let outcome: Result<Found, CrashFile.Rejection>

    struct Found: Sendable {
        let crash: CrashFile
        /// One line per module whose frames are not symbolicated, and why (the report's note).
        let refusals: [String]
        /// The crash payload (`CrashFile.payload`), serialized.
        let payload: String
        /// `CrashFile.fingerprint`: its frames' part of what makes two crashes the same.
        let fingerprint: String?
    }
}

/// A backlog's batches in a pipeline: while the recovery's thread saves batch k, batch k+1 is
/// read and symbolicated on a thread of its own, and batch k-1's files are unlinked on another
/// (an unlink frees the file's blocks: a fifth of a backlog's time, on a disk that discards
/// them). What touches the repository stays on the recovery's thread, in batch order: a
/// batch's records are marked purged after the next batch is saved, and never before their
/// files are gone and their folder synced.
///
/// At most one read and one unlink run at a time, each started after the last one's end was
/// taken: the symbol cache is used by one thread at a time, in that order.
struct BatchPipeline {
    private let system: SystemCalls
    private let host: ReportHost
    /// The module files a recovery opened for symbolication, read once for all its crash files.
    private let cache = SymbolCache()
    private var reading: Overlapped<[ReadCrash]>?
    private var unlinking: Overlapped<[Int64]>?

    init(system: SystemCalls, host: ReportHost) {
        self.system = system
        self.host = host
    }

    /// Reads `files` on the calling thread, in order. SIGINT or SIGTERM ends the batch: what is
    /// read is saved, the rest waits for the next launch.
    func read(_ files: ArraySlice<(path: String, modified: Date)>) -> [ReadCrash] {
        Self.read(files, cache: cache, system: system, host: host)
    }

    /// Starts reading `files` on a thread of its own (`takeRead` gives them).
    mutating func startReading(_ files: ArraySlice<(path: String, modified: Date)>) {
        precondition(reading == nil, "BatchPipeline: a read started before the last one was taken")
        let (cache, system, host) = (cache, system, host)
        reading = Overlapped(name: "rh-recover-read") { Self.read(files, cache: cache, system: system, host: host) }
    }

    /// The batch `startReading` read, once it is; nil when no read was started.
    mutating func takeRead() -> [ReadCrash]? {
        defer { reading = nil }
        return reading?.result()
    }

    /// Starts unlinking saved files on a thread of its own (`Recovery.unlink`; `takeUnlinked`
    /// gives the records to mark).
    mutating func startUnlinking(_ saved: [(path: String?, record: Repository.CrashSaved)]) {
        precondition(unlinking == nil, "BatchPipeline: an unlink started before the last one was taken")
        let (system, log) = (system, host.logger)
        unlinking = Overlapped(name: "rh-purge") { Recovery.unlink(saved, system: system, log: log) }
    }

    /// The records whose files `startUnlinking` unlinked, once it has; nil when none was started.
    mutating func takeUnlinked() -> [Int64]? {
        defer { unlinking = nil }
        return unlinking?.result()
    }

    /// Waits for whatever still runs (a save that failed leaves its pipeline running).
    mutating func wait() {
        _ = takeRead()
        _ = takeUnlinked()
    }

    private static func read(
        _ files: ArraySlice<(path: String, modified: Date)>, cache: SymbolCache?, system: SystemCalls, host: ReportHost
    ) -> [ReadCrash] {
        var read: [ReadCrash] = []
        for (path, modified) in files {
            if host.isInterrupted { break }
            let outcome = CrashFile.read(path, modifiedAt: modified, system: system).map { crash in
                // Symbolicated here, on the machine that crashed, while its files are the ones
                // that ran (each checked by build id).
                let symbols = ElfSymbols(for: crash, cache: cache)
                return ReadCrash.Found(
                    crash: crash, refusals: symbols?.refusals ?? [ElfSymbols.unavailable], payload: crash.payload(symbols: symbols).serialized(),
                    fingerprint: crash.fingerprint)
            }
            read.append(ReadCrash(path: path, modified: modified, outcome: outcome))
        }
        return read
    }
}
