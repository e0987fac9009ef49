import Foundation
import Host
import HostSupport

/// A clock that moves only when a test advances it. Waiters blocked on it wake when it
/// moves, so deadline logic is tested without sleeping.
///
/// A test runs the host with `start`, learns what the host waits for from its pipeline
/// events, advances exactly to the edge of a deadline, and uses `awaitParkOrReturn` to see
/// the host react, so no deadline passes before the code under test has reached it.
///
/// # Thread safety
/// State is a `WaitableState`; `advance` wakes every condition parked on this clock.
package final class ManualClock: HostClock {
    fileprivate struct Parked {
        var condition: Condition
        /// The number of advances when it parked.
        var generation: Int
    }

    fileprivate struct State {
        var now: UInt64
        var parked: [Int: Parked] = [:]
        var nextPark = 0
        var advances = 0
        var runs = 0
        var finishedRuns: Set<Int> = []

        var someoneParkedSinceLastAdvance: Bool { parked.values.contains { $0.generation == advances } }
    }

    fileprivate let state: WaitableState<State>

    package init(start: UInt64 = 1_000_000_000) { state = WaitableState(State(now: start)) }

    package func now() -> HostInstant { HostInstant(nanoseconds: state.read { $0.now }) }

    package func advance(byMilliseconds ms: Int) {
        let parked = state.update { state in
            state.now += UInt64(ms) * 1_000_000
            state.advances += 1
            return state.parked.values.map(\.condition)
        }
        for condition in parked {
            condition.lock()
            condition.broadcast()
            condition.unlock()
        }
    }

    /// Work started with `start`: its result, once it has returned.
    package final class Run<T: Sendable>: Sendable {
        fileprivate let clock: ManualClock
        fileprivate let number: Int
        fileprivate let value = Locked<T?>(nil)

        fileprivate init(clock: ManualClock, number: Int) {
            self.clock = clock
            self.number = number
        }

        /// Blocks until some thread has parked on the clock since the last advance (true), or
        /// the work has returned or 30 s of real time passed (false).
        @discardableResult
        package func awaitParkOrReturn() -> Bool {
            let clock = SystemClock()
            return self.clock.state.wait(
                until: clock.now().advanced(byMilliseconds: 30_000), clock: clock,
                for: { $0.someoneParkedSinceLastAdvance || $0.finishedRuns.contains(self.number) },
                then: { state, _ in state.someoneParkedSinceLastAdvance && !state.finishedRuns.contains(self.number) })
        }

        /// Blocks until the work has returned, or gives up after `watchdogSeconds` of real
        /// time (nil), so a host that wrongly keeps waiting fails the test instead of hanging it.
        package func result(watchdogSeconds: Double = 30) -> T? {
            let clock = SystemClock()
            let watchdog = clock.now().advanced(byMilliseconds: Int(watchdogSeconds * 1000))
            return self.clock.state.wait(until: watchdog, clock: clock, for: { $0.finishedRuns.contains(self.number) }) { _, returned in
                returned ? value.withLock { $0 } : nil
            }
        }

        /// The result if the work has returned, else nil.
        package var resultIfReturned: T? { value.withLock { $0 } }
    }

    /// Runs `body` on a thread of its own.
    package func start<T: Sendable>(_ body: @escaping @Sendable () -> T) -> Run<T> {
        let run = Run<T>(clock: self, number: state.update { state in
            state.runs += 1
            return state.runs
        })
        Thread.detachNewThread { [state] in
            let value = body()
            run.value.withLock { $0 = value }
            state.update { $0.finishedRuns.insert(run.number) }
        }
        return run
    }

    package func wait(on condition: Condition, until deadline: HostInstant) {
        // The caller holds `condition`, so an `advance` that follows cannot broadcast before
        // this thread is parked in `condition.wait()`.
        let id = state.update { state -> Int? in
            guard state.now < deadline.nanoseconds else { return nil }
            state.nextPark += 1
            state.parked[state.nextPark] = Parked(condition: condition, generation: state.advances)
            return state.nextPark
        }
        guard let id else { return }
        condition.wait()
        state.update { _ = $0.parked.removeValue(forKey: id) }
    }
}

/// A wall clock that stands still until a test sets it: every stamp falls in the same
/// millisecond, as two reads do on a fast machine.
///
/// # Thread safety
/// The time is behind a `Locked`.
package final class ManualWallClock: WallClock {
    private let time: Locked<Date>

    package init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { time = Locked(start) }

    package func now() -> Date { time.withLock { $0 } }

    package func set(_ date: Date) { time.withLock { $0 = date } }
}
