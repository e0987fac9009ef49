import Foundation
import Host

/// A clock that moves only when a test advances it. Waiters blocked on it wake when it
/// moves, so deadline logic is tested without sleeping.
///
/// Tests that block on the host use `drive`: time moves only while some thread is parked
/// on the clock since the last move, so no deadline passes before the code under test has
/// reached it.
///
/// # Thread safety
/// State is a `WaitableState`; `advance` wakes every condition parked on this clock.
public final class ManualClock: HostClock {
    private struct Parked {
        var condition: NSCondition
        /// The number of advances when it parked.
        var generation: Int
    }

    private struct State {
        var now: UInt64
        var parked: [Int: Parked] = [:]
        var nextPark = 0
        var advances = 0
        var finishedRuns = 0

        var someoneParkedSinceLastAdvance: Bool { parked.values.contains { $0.generation == advances } }
    }

    private let state: WaitableState<State>

    public init(start: UInt64 = 1_000_000_000) { state = WaitableState(State(now: start)) }

    public func now() -> HostInstant { HostInstant(nanoseconds: state.read { $0.now }) }

    public func advance(byMilliseconds ms: Int) {
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

    /// Blocks until some thread has parked on the clock since the last advance.
    public func awaitPark() {
        state.wait(until: nil, clock: SystemClock(), for: { $0.someoneParkedSinceLastAdvance }, then: { _, _ in })
    }

    /// Runs `body` on a thread of its own and advances the clock by `stepMilliseconds`
    /// whenever a thread has parked on the clock since the last advance, until `body`
    /// returns; then returns its result and how far the clock moved.
    public func drive<T: Sendable>(stepMilliseconds: Int, _ body: @escaping @Sendable () -> T) -> (result: T, elapsedMs: Int) {
        let start = now()
        let result = Locked<T?>(nil)
        let mark = state.read { $0.finishedRuns }
        Thread.detachNewThread { [state] in
            let value = body()
            result.withLock { $0 = value }
            state.update { $0.finishedRuns += 1 }
        }
        while true {
            let finished = state.wait(
                until: nil, clock: SystemClock(), for: { $0.someoneParkedSinceLastAdvance || $0.finishedRuns > mark },
                then: { state, _ in state.finishedRuns > mark })
            if finished { return (result.withLock { $0! }, now().milliseconds(since: start)) }
            advance(byMilliseconds: stepMilliseconds)
        }
    }

    public func wait(on condition: NSCondition, until deadline: HostInstant) {
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
