import Glibc

/// Runs `body` on a new detached thread (the default stack of the process: 8 MB on Debian),
/// what Foundation's `Thread.detachNewThread` did, without Foundation. False when the system
/// refused the thread (`pthread_create` failed: too many threads, no memory); then `body`
/// never runs.
@discardableResult
package func startThread(_ body: @escaping @Sendable () -> Void) -> Bool {
    let context = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    var thread = pthread_t()
    let started = pthread_create(&thread, &attributes, { context in
        Unmanaged<ThreadBody>.fromOpaque(context!).takeRetainedValue().body()
        return nil
    }, context)
    guard started == 0 else {
        Unmanaged<ThreadBody>.fromOpaque(context).release()
        return false
    }
    return true
}

/// A function run on a thread of its own while the thread that started it goes on, such as
/// unlinking one batch of files while the next is read; `result()` waits for its end. When the
/// system refuses a thread, the function runs at once on the starter's. What the function
/// holds is let go before its result is given: nothing it captured outlives `result()` on
/// its thread.
///
/// # Thread safety
/// The result is a `WaitableState`, set once: by the function's thread, or by the starter's
/// when no thread could be made.
package final class Overlapped<Value: Sendable>: Sendable {
    private let value = WaitableState<Value?>(nil)

    /// Starts `body` on a thread named `name` (the kernel keeps its first 15 bytes).
    package init(name: String, _ body: @escaping @Sendable () -> Value) {
        let value = value
        let job = Job(body)
        let started = startThread {
            nameCurrentThread(name)
            let result = job.run()
            value.update { $0 = result }
        }
        if !started {
            let result = job.run()
            value.update { $0 = result }
        }
    }

    /// What the function returned, once it has.
    package func result() -> Value {
        let result = value.wait(until: nil, clock: SystemClock(), for: { $0 != nil }, then: { value, _ in value })
        guard let result else { preconditionFailure("Overlapped: woken without a result") }
        return result
    }

    /// The function, dropped (with what it captured) as it returns.
    ///
    /// # Thread safety
    /// `@unchecked Sendable`: run once, by one thread.
    private final class Job: @unchecked Sendable {
        private var body: (@Sendable () -> Value)?

        init(_ body: @escaping @Sendable () -> Value) { self.body = body }

        func run() -> Value {
            guard let body else { preconditionFailure("Overlapped: run twice") }
            self.body = nil
            return body()
        }
    }
}

/// Makes the calling thread one whose wake-ups need not be prompt (Linux's `SCHED_BATCH`, at
/// the same priority): woken, it does not take the processor from the thread that woke it,
/// but runs once a processor is free. For a thread that only waits on the disk for others
/// (the log's flusher): asking it for a flush cost the asker a switch to it and back, a tenth
/// of a report (`report-full-ring`). Best effort: refused, the thread stays as it was.
package func yieldCurrentThreadsWakeUps() {
    var parameters = sched_param()
    _ = pthread_setschedparam(pthread_self(), batchScheduling, &parameters)
}

/// `SCHED_BATCH` (`<sched.h>`; Glibc does not export it to Swift).
package let batchScheduling: Int32 = 3

private final class ThreadBody {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}

/// A recursive lock: the thread that holds it may take it again (a transaction's statements).
///
/// # Thread safety
/// `@unchecked Sendable`: the pthread mutex is the synchronization.
package final class RecursiveLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    package init() {
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_RECURSIVE))
        pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    package func lock() { pthread_mutex_lock(mutex) }
    package func unlock() { pthread_mutex_unlock(mutex) }
}
