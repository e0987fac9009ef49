import Glibc

/// A serial executor on a thread of its own: the main thread of a host embedded in a program
/// that has no run loop to lend (embed.h), and the tests' stand-in for the main thread. Unlike
/// a dispatch queue it never waits for a pool thread, which a blocked program may have used up.
///
/// # Thread safety
/// The job queue is a `WaitableState`.
public final class ThreadExecutor: MainExecutor {
    /// Jobs in order; nil tells the thread to end.
    private let jobs = WaitableState<[(@Sendable () -> Void)?]>([])
    private let threadID = WaitableState<pthread_t?>(nil)

    /// - Parameter name: the thread's name (the kernel keeps its first 15 bytes).
    public init(name: String) {
        let jobs = self.jobs
        let threadID = self.threadID
        let started = startThread {
            nameCurrentThread(name)
            threadID.update { $0 = pthread_self() }
            // A report's callbacks come one after another: the next is usually queued within
            // microseconds of the last one's end.
            while let job = jobs.wait(
                until: nil, clock: SystemClock(), spinning: .microseconds(50), for: { !$0.isEmpty },
                then: { queue, _ in queue.removeFirst() })
            {
                job()
            }
        }
        // Without its thread the executor cannot exist: every job would wait forever.
        precondition(started, "ThreadExecutor \(name): the system refused a thread")
    }

    /// Whether the caller runs on this executor's thread.
    public var isCurrentThread: Bool {
        let id = threadID.wait(until: nil, clock: SystemClock(), for: { $0 != nil }, then: { id, _ in id })
        return id.map { pthread_equal($0, pthread_self()) != 0 } ?? false
    }

    /// Ends the thread once the jobs queued so far have run.
    public func finish() { jobs.update { $0.append(nil) } }

    deinit { finish() }

    public func execute(_ job: @escaping @Sendable () -> Void) { jobs.update { $0.append(job) } }
}


/// Jobs of tasks that prefer this executor (`Task(executorPreference:)`) run on its thread
/// too, in order with the rest.
extension ThreadExecutor: TaskExecutor {
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        execute { job.runSynchronously(on: executor) }
    }
}
