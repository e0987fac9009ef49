import Glibc

/// A mutex and condition variable whose timed waits run on CLOCK_MONOTONIC: a deadline is a
/// point on the same clock as `SystemClock.now()`, never converted into a wall-clock date, so
/// setting the system time neither shortens nor stretches a wait.
///
/// Owns its `pthread_mutex_t` and `pthread_cond_t` (heap-allocated: they must not move),
/// destroyed in `deinit`.
///
/// # Thread safety
/// `@unchecked Sendable`: the pthread objects are the synchronization.
package final class Condition: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    package init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    package func lock() { pthread_mutex_lock(mutex) }
    package func unlock() { pthread_mutex_unlock(mutex) }
    package func broadcast() { pthread_cond_broadcast(condition) }

    /// Waits (locked by the caller) until signalled or a spurious wake-up.
    package func wait() { pthread_cond_wait(condition, mutex) }

    /// Waits (locked by the caller) until signalled, a spurious wake-up, or the monotonic
    /// clock reaches `deadline` (nanoseconds, `SystemClock`'s origin).
    package func wait(untilMonotonic deadline: UInt64) {
        let seconds = deadline / 1_000_000_000
        var time = timespec(
            tv_sec: Int(clamping: min(seconds, UInt64(Int.max))), tv_nsec: Int(deadline % 1_000_000_000))
        _ = pthread_cond_timedwait(condition, mutex, &time)
    }
}
