import Glibc

/// A serial executor on a thread of its own: the main thread of a host embedded in a program
/// that has no run loop to lend (embed.h), and the tests' stand-in for the main thread. Unlike
/// a dispatch queue it never waits for a pool thread, which a blocked program may have used up.
///
/// # Thread safety
/// The job queue is a `WaitableState`.
public final class ThreadExecutor: MainExecutor {
    private struct Queue {
        /// Jobs in order; nil tells the thread to end.
        var jobs: [(@Sendable () -> Void)?] = []
        /// Callers inside `expectingJobs`: their jobs come soon, one after another.
        var expected = 0
    }

    private let queue = WaitableState(Queue())
    private let threadID = WaitableState<pthread_t?>(nil)

    /// - Parameter name: the thread's name (the kernel keeps its first 15 bytes).
    public convenience init(name: String) { self.init(name: name, expectedSpinMicroseconds: 1_000) }

    /// - Parameter expectedSpinMicroseconds: how long the idle thread looks for a job a caller
    ///   expects (`expectingJobs`) before it sleeps: a bound on what an expectation costs when
    ///   its jobs come late, or never.
    package init(name: String, expectedSpinMicroseconds: UInt64) {
        let queue = self.queue
        let threadID = self.threadID
        let started = startThread {
            nameCurrentThread(name)
            threadID.update { $0 = pthread_self() }
            // A report's callbacks come one after another: the next is usually queued within
            // microseconds of the last one's end. While a caller expects jobs, the thread looks
            // for them for up to `expectedSpinMicroseconds` each time it is idle, rather than
            // sleep and be woken for each.
            let spin = WaitableState<Queue>.Spin.expecting(short: 50, long: expectedSpinMicroseconds, while: { $0.expected > 0 })
            while let job = queue.wait(
                until: nil, clock: SystemClock(), spinning: spin, for: { !$0.jobs.isEmpty },
                then: { queue, _ in queue.jobs.removeFirst() })
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
    public func finish() { queue.update { $0.jobs.append(nil) } }

    deinit { finish() }

    public func execute(_ job: @escaping @Sendable () -> Void) { queue.update { $0.jobs.append(job) } }

    /// Runs `body`, which queues jobs one after another (a report's callbacks, after its
    /// journal): the thread is woken now, while `body` prepares them, and looks for them
    /// instead of sleeping between them. Waking a sleeping thread for each job cost a report
    /// tens of microseconds on a virtual machine.
    package func expectingJobs<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        queue.update { $0.expected += 1 }
        // A change too: a thread looking for jobs sees it, and stops looking.
        defer { queue.update { $0.expected -= 1 } }
        return try body()
    }
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
