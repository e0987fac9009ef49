import HostModel
import HostSupport
import HostCapture
/// The exactly-once rule of one callback's completion (SPEC H-7), shared by libffi
/// closures (plugins) and Swift closures (in-process handlers).
///
/// The first call before the host stopped waiting completes the callback; every other call
/// is ignored and reported through `onIgnored` (a second completion, or a late one).
///
/// # Thread safety
/// Behind one `Locked`; `fire` may be called from any thread and never blocks for long.
package final class CallbackCompletion: Sendable {
    /// Why a call was ignored.
    package enum Ignored: Sendable, Equatable {
        /// The callback had already completed.
        case second
        /// The host had stopped waiting (timed out, abandoned, bundled) before the call.
        case late
    }

    private struct State {
        var completed = false
        var closed = false
        var calls = 0
    }

    /// A closure's raw libffi arguments (`void **`), valid only during the call.
    package typealias Arguments = UnsafeMutablePointer<UnsafeMutableRawPointer?>

    private let state = Locked(State())
    private let onFirst: @Sendable (Arguments?) -> Void
    private let onIgnored: @Sendable (Ignored) -> Void

    /// - Parameter onFirst: runs for the first call, during it (so it may copy arguments).
    package init(onFirst: @escaping @Sendable (Arguments?) -> Void, onIgnored: @escaping @Sendable (Ignored) -> Void) {
        self.onFirst = onFirst
        self.onIgnored = onIgnored
    }

    package convenience init(onFirst: @escaping @Sendable () -> Void, onIgnored: @escaping @Sendable (Ignored) -> Void) {
        self.init(onFirst: { (_: Arguments?) in onFirst() }, onIgnored: onIgnored)
    }

    /// One call of the completion; `arguments` are the decision closure's, if any.
    package func fire(arguments: Arguments? = nil) {
        fire { onFirst(arguments) }
    }

    /// One call, where the first runs `first` instead of `onFirst` (a Swift decision
    /// carries its items as Swift values).
    package func fire(_ first: () -> Void) {
        let outcome: Ignored? = state.withLock { state in
            state.calls += 1
            if state.completed { return .second }
            if state.closed { return .late }
            state.completed = true
            return nil
        }
        if let outcome { onIgnored(outcome) } else { first() }
    }

    /// The host stopped waiting: later calls are late, not completions.
    package func close() { state.withLock { $0.closed = true } }

    package var isCompleted: Bool { state.withLock { $0.completed } }
    package var callCount: Int { state.withLock { $0.calls } }

    /// A Swift closure with the same exactly-once rule, for in-process handlers.
    package var swiftClosure: @Sendable () -> Void { { [self] in fire() } }
}
