import Foundation
import Host

/// A clock that moves only when a test advances it. Waiters blocked on it wake when it
/// moves, so deadline logic is tested without sleeping.
///
/// To advance at the right moment a test notes `waitsStarted`, causes the event it cares
/// about, then calls `awaitWait(after:)`: it returns once a later wait has parked.
///
/// # Thread safety
/// State is a `WaitableState`; `advance` wakes every condition parked on this clock.
public final class ManualClock: HostClock {
    private struct State {
        var now: UInt64
        var waiting: [ObjectIdentifier: NSCondition] = [:]
        var waitCount = 0
    }

    private let state: WaitableState<State>

    public init(start: UInt64 = 1_000_000_000) { state = WaitableState(State(now: start)) }

    public func now() -> HostInstant { HostInstant(nanoseconds: state.read { $0.now }) }

    public func advance(byMilliseconds ms: Int) {
        let waiting = state.update { state in
            state.now += UInt64(ms) * 1_000_000
            return Array(state.waiting.values)
        }
        for condition in waiting {
            condition.lock()
            condition.broadcast()
            condition.unlock()
        }
    }

    /// How many waits have started so far.
    public var waitsStarted: Int { state.read { $0.waitCount } }

    /// Blocks until a wait numbered above `mark` has parked on this clock.
    public func awaitWait(after mark: Int) {
        state.wait(until: nil, clock: SystemClock(), for: { $0.waitCount > mark }, then: { _, _ in })
    }

    public func wait(on condition: NSCondition, until deadline: HostInstant) {
        let id = ObjectIdentifier(condition)
        // The caller holds `condition`, so an `advance` that follows cannot broadcast before
        // this thread is parked in `condition.wait()`.
        let expired = state.update { state -> Bool in
            state.waitCount += 1
            guard state.now < deadline.nanoseconds else { return true }
            state.waiting[id] = condition
            return false
        }
        if expired { return }
        condition.wait()
        state.update { _ = $0.waiting.removeValue(forKey: id) }
    }
}
