import Glibc
import Synchronization

/// A point on a host clock, in nanoseconds from an arbitrary origin.
package struct HostInstant: Comparable, Hashable, Sendable {
    package var nanoseconds: UInt64

    package init(nanoseconds: UInt64) { self.nanoseconds = nanoseconds }

    package static func < (a: HostInstant, b: HostInstant) -> Bool { a.nanoseconds < b.nanoseconds }

    /// Saturates at the end of time: no limit, however large, wraps a deadline into the past.
    package func advanced(byMilliseconds ms: Int) -> HostInstant {
        let (delta, overflowed) = UInt64(max(ms, 0)).multipliedReportingOverflow(by: 1_000_000)
        let (sum, wrapped) = nanoseconds.addingReportingOverflow(delta)
        return HostInstant(nanoseconds: overflowed || wrapped ? UInt64.max : sum)
    }

    /// Milliseconds from `earlier` to `self`, 0 when `earlier` is later.
    package func milliseconds(since earlier: HostInstant) -> Int {
        nanoseconds > earlier.nanoseconds ? Int((nanoseconds - earlier.nanoseconds) / 1_000_000) : 0
    }
}

/// The host's source of time. Injected everywhere a deadline is computed, so tests advance
/// a manual clock instead of sleeping.
///
/// # Thread safety
/// Implementations are called from any thread.
package protocol HostClock: Sendable {
    func now() -> HostInstant
    /// Blocks on `condition` (locked by the caller) until it is signalled, `deadline`
    /// passes on this clock, or a spurious wake-up. Callers re-check their predicate.
    func wait(on condition: Condition, until deadline: HostInstant)
}

/// The monotonic system clock (CLOCK_MONOTONIC).
package struct SystemClock: HostClock {
    package init() {}

    package func now() -> HostInstant {
        let ts = SystemCalls.monotonicNow()
        return HostInstant(nanoseconds: UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec))
    }

    package func wait(on condition: Condition, until deadline: HostInstant) {
        guard deadline > now() else { return }
        // The same clock as `now()`: the deadline is waited for as it is.
        condition.wait(untilMonotonic: deadline.nanoseconds)
    }
}

/// State guarded by a condition variable, for threads that wait until the state says so.
///
/// # Thread safety
/// `@unchecked Sendable`: every access to `state` happens while `condition` is locked.
/// `changes` is read without it, by a spinning waiter, only to know when to look again.
package final class WaitableState<State>: @unchecked Sendable {
    private let condition = Condition()
    private var state: State
    /// Counts the changes made under the lock: a waiter that spins watches it, not the lock,
    /// so the thread bringing the change never finds the lock taken by a waiter looking.
    private let changes = Atomic<UInt64>(0)

    package init(_ state: State) { self.state = state }

    /// Reads or changes the state under the lock, then wakes every waiter.
    @discardableResult
    package func update<T>(_ body: (inout State) -> T) -> T {
        condition.lock()
        defer {
            changes.add(1, ordering: .releasing)
            condition.broadcast()
            condition.unlock()
        }
        return body(&state)
    }

    /// Changes the state under the lock and wakes the waiters only if `wake` says the change
    /// can matter to them (fewer thread switches on hot paths).
    @discardableResult
    package func update<T>(wakingIf wake: (State) -> Bool, _ body: (inout State) -> T) -> T {
        condition.lock()
        defer { condition.unlock() }
        let result = body(&state)
        if wake(state) {
            changes.add(1, ordering: .releasing)
            condition.broadcast()
        }
        return result
    }

    /// Reads the state under the lock without waking anyone.
    package func read<T>(_ body: (State) -> T) -> T {
        condition.lock()
        defer { condition.unlock() }
        return body(state)
    }

    /// Waits until `predicate` holds or `deadline` (nil: forever) passes on `clock`; then
    /// runs `body` on the state, still under the lock, and returns its result.
    package func wait<T>(
        until deadline: HostInstant?, clock: any HostClock, spinning: Spin = .none,
        for predicate: (State) -> Bool, then body: (inout State, _ satisfied: Bool) -> T
    ) -> T {
        wait(until: { _ in deadline }, clock: clock, spinning: spinning, for: predicate, then: body)
    }

    /// How long a waiter looks at the state, yielding the processor in between, before it
    /// sleeps: for hand-offs that usually come within microseconds (a callback on the host's
    /// main thread and its completion), where waking a sleeping thread costs more than the
    /// work. Measured on the real monotonic clock, whatever clock the deadline is on.
    package enum Spin: Sendable {
        case none
        case microseconds(UInt64)
        /// `microseconds(short)`, and on up to `long` while `expecting` holds: the state says a
        /// hand-off is coming (a report's callbacks are on their way: `ThreadExecutor.expectingJobs`).
        case expecting(short: UInt64, long: UInt64, while: @Sendable (State) -> Bool)

        /// How long, in nanoseconds from its start, a waiter spins in `state`.
        func nanoseconds(in state: State) -> UInt64 {
            switch self {
            case .none: 0
            case .microseconds(let limit): limit * 1_000
            case .expecting(let short, let long, let expecting): (expecting(state) ? max(short, long) : short) * 1_000
            }
        }

        /// Whether a waiter woken from its sleep spins again: while a hand-off is expected.
        func respins(_ state: State) -> Bool {
            if case .expecting(_, _, let expecting) = self { expecting(state) } else { false }
        }
    }

    /// `wait` with a deadline that depends on the state, re-read after every wake-up.
    package func wait<T>(
        until deadline: (State) -> HostInstant?, clock: any HostClock, spinning: Spin = .none,
        for predicate: (State) -> Bool, then body: (inout State, _ satisfied: Bool) -> T
    ) -> T {
        condition.lock()
        defer {
            changes.add(1, ordering: .releasing)
            condition.broadcast()
            condition.unlock()
        }
        var spinningSince = predicate(state) || spinning.nanoseconds(in: state) == 0 ? nil : SystemClock().now().nanoseconds
        while !predicate(state) {
            if let start = spinningSince {
                let limit = spinning.nanoseconds(in: state)
                if SystemClock().now().nanoseconds &- start < limit {
                    // Looks at the count of changes, without the lock, until one comes or the
                    // time is up; then at the state again, under the lock.
                    let seen = changes.load(ordering: .acquiring)
                    condition.unlock()
                    repeat {
                        sched_yield()
                    } while changes.load(ordering: .acquiring) == seen && SystemClock().now().nanoseconds &- start < limit
                    condition.lock()
                    continue
                }
            }
            spinningSince = nil
            if let deadline = deadline(state) {
                if clock.now() >= deadline { return body(&state, false) }
                clock.wait(on: condition, until: deadline)
            } else {
                condition.wait()
            }
            if spinning.respins(state) { spinningSince = SystemClock().now().nanoseconds }
        }
        return body(&state, true)
    }
}
