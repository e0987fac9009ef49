import Dispatch

/// Runs work on the host's main thread (SPEC H-8: running-app callbacks run there).
///
/// The CLI uses `DispatchQueue.main`, drained by the main thread's run loop, so plugins that
/// hop to the main queue themselves work; an embedding program gets a thread of the host's
/// own; tests inject their own serial executor, because test runners keep the real main
/// thread.
public protocol MainExecutor: Sendable {
    func execute(_ job: @escaping @Sendable () -> Void)
}

extension DispatchQueue: MainExecutor {
    public func execute(_ job: @escaping @Sendable () -> Void) { async(execute: job) }
}

extension MainExecutor {
    /// Runs `body` on the main executor and waits for its result. Never call it on the
    /// main executor itself.
    package func sync<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        sync(timeoutMilliseconds: nil, body)!
    }

    /// `sync`, giving up after `timeoutMilliseconds` (nil if so; `body` may still run later).
    package func sync<T: Sendable>(timeoutMilliseconds: Int?, _ body: @escaping @Sendable () -> T) -> T? {
        let result = WaitableState<T?>(nil)
        // `body` runs outside the lock: the waiter must be able to give up while it runs.
        execute {
            let value = body()
            result.update { $0 = value }
        }
        let clock = SystemClock()
        let deadline = timeoutMilliseconds.map { clock.now().advanced(byMilliseconds: $0) }
        return result.wait(until: deadline, clock: clock, for: { $0 != nil }, then: { state, _ in state })
    }
}
