import Foundation
import Host
import HostPlugins
import HostSupport

/// An ordered, thread-safe list of what happened, for order and "was it called" checks.
package final class Recorder: Sendable {
    private let entries = Locked<[String]>([])
    package init() {}
    package func record(_ entry: String) { entries.withLock { $0.append(entry) } }
    package var all: [String] { entries.withLock { $0 } }
}

/// A gate a test opens once: threads that wait on it block until then.
package final class Gate: Sendable {
    private let open = WaitableState(false)
    package init() {}
    package func release() { open.update { $0 = true } }
    /// Waits until released, at most `seconds` of real time; false on time-out.
    @discardableResult
    package func wait(seconds: Double = 30) -> Bool {
        let clock = SystemClock()
        return open.wait(until: clock.now().advanced(byMilliseconds: Int(seconds * 1000)), clock: clock, for: { $0 }) { _, opened in opened }
    }
}

extension SwiftHandler {
    /// A handler whose callbacks record "<name>.<step>" and complete at once.
    package static func recording(_ name: String, into recorder: Recorder) -> SwiftHandler {
        SwiftHandler(
            name: name,
            before: .completion { _, _, done in
                recorder.record("\(name).before")
                done()
            },
            after: .completion { _, _, done in
                recorder.record("\(name).after")
                done()
            })
    }
}

/// Runs blocking host work on a thread of its own and awaits it, so an `async` test does not
/// hold one of the few cooperative threads that `async` handlers need.
///
/// The body stays in the test's task (a task executor preference, not a detached thread), so
/// an `#expect` that fails inside it is recorded against its test by name.
package func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    let executor = OwnThreadExecutor()
    defer { executor.finish() }
    return try await withTaskExecutorPreference(executor) { try body() }
}

/// A task executor with one thread of its own: runs the jobs given to it in order, until
/// `finish()` and the queue is empty.
///
/// # Thread safety
/// The queue is a `WaitableState`.
final class OwnThreadExecutor: TaskExecutor {
    private let jobs = WaitableState<(queue: [UnownedJob], finished: Bool)>(([], false))

    init() {
        let thread = Thread { [self] in
            while let job = next() { job.runSynchronously(on: asUnownedTaskExecutor()) }
        }
        thread.name = "test-off-pool"
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        jobs.update { $0.queue.append(job) }
    }

    func finish() { jobs.update { $0.finished = true } }

    private func next() -> UnownedJob? {
        jobs.wait(until: nil, clock: SystemClock(), for: { !$0.queue.isEmpty || $0.finished }) { state, _ in
            state.queue.isEmpty ? nil : state.queue.removeFirst()
        }
    }
}
