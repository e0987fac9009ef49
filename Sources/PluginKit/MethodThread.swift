import Glibc

/// A thread of its own for one `async` plugin method, as a task executor: the method never
/// waits for the program's cooperative pool, which the program (or the host) may have filled
/// with blocking work, so it cannot miss its limit through no fault of its own. The thread
/// ends once `finish()` was called and the jobs queued before it have run.
///
/// # Thread safety
/// `@unchecked Sendable`: the queue and the flag are only touched under `mutex`.
final class MethodThread: TaskExecutor, @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var jobs: [UnownedJob] = []
    private var finished = false

    /// Nil when no thread could be made (the caller then uses the default executor).
    static func start() -> MethodThread? {
        let executor = MethodThread()
        var thread = pthread_t()
        // The thread keeps the executor alive until it ends.
        let context = Unmanaged.passRetained(executor).toOpaque()
        guard pthread_create(&thread, nil, { context in
            guard let context else { return nil }
            let executor = Unmanaged<MethodThread>.fromOpaque(context).takeRetainedValue()
            executor.run()
            return nil
        }, context) == 0 else {
            Unmanaged<MethodThread>.fromOpaque(context).release()
            return nil
        }
        pthread_detach(thread)
        return executor
    }

    private init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        pthread_mutex_lock(mutex)
        jobs.append(job)
        pthread_cond_signal(condition)
        pthread_mutex_unlock(mutex)
    }

    func finish() {
        pthread_mutex_lock(mutex)
        finished = true
        pthread_cond_signal(condition)
        pthread_mutex_unlock(mutex)
    }

    private func run() {
        while true {
            pthread_mutex_lock(mutex)
            while jobs.isEmpty && !finished { pthread_cond_wait(condition, mutex) }
            let job = jobs.isEmpty ? nil : jobs.removeFirst()
            pthread_mutex_unlock(mutex)
            guard let job else { return }
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
