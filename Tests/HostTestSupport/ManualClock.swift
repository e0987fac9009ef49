import Foundation
import Host

/// A clock that moves only when a test advances it. Waiters blocked on it wake when it
/// moves, so deadline logic is tested without sleeping.
///
/// # Thread safety
/// Behind one `Locked`; `advance` wakes every condition currently waiting on this clock.
public final class ManualClock: HostClock {
    private struct State {
        var now: UInt64
        var waiting: [ObjectIdentifier: NSCondition] = [:]
        var waitCount = 0
    }

    private let state: Locked<State>

    public init(start: UInt64 = 1_000_000_000) { state = Locked(State(now: start)) }

    public func now() -> HostInstant { HostInstant(nanoseconds: state.withLock { $0.now }) }

    public func advance(byMilliseconds ms: Int) { advance(byNanoseconds: UInt64(ms) * 1_000_000) }

    public func advance(byNanoseconds ns: UInt64) {
        let waiting = state.withLock { state in
            state.now += ns
            return Array(state.waiting.values)
        }
        for condition in waiting {
            condition.lock()
            condition.broadcast()
            condition.unlock()
        }
    }

    /// How many waits have started so far (tests advance once a waiter is parked).
    public var waitsStarted: Int { state.withLock { $0.waitCount } }

    public func wait(on condition: NSCondition, until deadline: HostInstant) {
        let id = ObjectIdentifier(condition)
        let expired = state.withLock { state -> Bool in
            state.waitCount += 1
            guard state.now < deadline.nanoseconds else { return true }
            state.waiting[id] = condition
            return false
        }
        if expired { return }
        condition.wait()
        state.withLock { _ = $0.waiting.removeValue(forKey: id) }
    }
}
