import Glibc
import HostSupport

/// Flushes a database's write-ahead log on a thread of its own, so that a commit made without
/// waiting for the disk reaches it while its caller goes on: a running-app report's journal is
/// flushed while the callbacks run, and `raise` waits for that flush before it returns (SPEC
/// H-13 asks the journal to be committed before the first callback: against a killed process
/// a commit is enough, the log holds it; the flush is against a power loss, and until it is
/// done the caller has not been told the report is stored).
///
/// A flush of a file through any descriptor of it flushes the file: the thread keeps one of
/// its own, and syncs the folder once (a log SQLite has just made is not durable until its
/// name is).
///
/// # Thread safety
/// The counts are a `WaitableState`; the log's descriptor is the thread's own.
final class LogFlusher: Sendable {
    /// Flushes asked for and done, counted in order: a flush started after ask `n` covers it.
    private struct Counts {
        var asked: UInt64 = 0
        var done: UInt64 = 0
        /// The highest ask a flush that succeeded covers.
        var durable: UInt64 = 0
        /// Why the last flush that failed failed.
        var failure: SystemError?
        var finished = false
    }

    /// A flush asked for: `wait(for:)` returns once it is done.
    struct Ticket: Sendable {
        fileprivate let number: UInt64
    }

    private let counts = WaitableState(Counts())
    private let path: String

    /// Opens the log at `path` (a connection in WAL mode has made it) and starts the thread;
    /// flushes go through `system`, and the first that succeeds syncs `folder` too.
    init(logAt path: String, folder: String, system: SystemCalls) throws(StorageError) {
        self.path = path
        let log: Int32
        switch system.open(path, O_RDONLY | O_NOFOLLOW) {
        case .success(let fd): log = fd
        case .failure(let failure): throw StorageError(path: path, message: "cannot open the log to flush it: \(failure)")
        }
        let counts = counts
        let started = startThread {
            nameCurrentThread("rh-log-flush")
            // Asked for a flush, it never takes the processor from the report that asked.
            yieldCurrentThreadsWakeUps()
            var folderSynced = false
            while let target = counts.wait(
                until: nil, clock: SystemClock(), for: { $0.asked > $0.done || $0.finished },
                then: { state, _ in state.asked > state.done ? state.asked : nil })
            {
                var result = system.fdatasync(log)
                if case .success = result, !folderSynced {
                    result = system.syncDirectory(folder)
                    folderSynced = true
                }
                counts.update { state in
                    state.done = target
                    switch result {
                    case .success: state.durable = target
                    case .failure(let failure): state.failure = failure
                    }
                }
            }
            _ = system.close(log)
        }
        guard started else {
            _ = system.close(log)
            throw StorageError(path: path, message: "cannot start a thread to flush the log")
        }
    }

    /// Asks for a flush of everything written to the log so far.
    func flush() -> Ticket {
        Ticket(number: counts.update { state in
            state.asked += 1
            return state.asked
        })
    }

    /// Waits until the flush `ticket` asked for is done; throws when it failed (what was
    /// committed before it may not be on the disk).
    func wait(for ticket: Ticket) throws(StorageError) {
        let failure = counts.wait(
            until: nil, clock: SystemClock(), for: { $0.done >= ticket.number },
            then: { state, _ in state.durable >= ticket.number ? nil : state.failure })
        if let failure {
            throw StorageError(path: path, message: "cannot flush the log to the disk: \(failure)", outOfSpace: failure.errno == ENOSPC)
        }
    }

    /// Ends the thread once the flushes asked for are done.
    func finish() { counts.update { $0.finished = true } }
}

extension Repository {
    /// A flush of the log asked for and not yet waited for (`journalFlushingBehind`).
    package struct PendingFlush: Sendable {
        let flusher: LogFlusher
        let ticket: LogFlusher.Ticket
    }
}
