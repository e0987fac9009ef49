import Foundation
import Host

/// An ordered, thread-safe list of what happened, for order and "was it called" checks.
public final class Recorder: Sendable {
    private let entries = Locked<[String]>([])
    public init() {}
    public func record(_ entry: String) { entries.withLock { $0.append(entry) } }
    public var all: [String] { entries.withLock { $0 } }
}

/// A gate a test opens once: threads that wait on it block until then.
public final class Gate: Sendable {
    private let open = WaitableState(false)
    public init() {}
    public func release() { open.update { $0 = true } }
    /// Waits until released, at most `seconds` of real time; false on time-out.
    @discardableResult
    public func wait(seconds: Double = 30) -> Bool {
        let clock = SystemClock()
        return open.wait(until: clock.now().advanced(byMilliseconds: Int(seconds * 1000)), clock: clock, for: { $0 }) { _, opened in opened }
    }
}

extension SwiftHandler {
    /// A handler whose callbacks record "<name>.<step>" and complete at once.
    public static func recording(_ name: String, into recorder: Recorder) -> SwiftHandler {
        SwiftHandler(
            name: name,
            before: .completion { _, _, done in
                recorder.record("\(name).before")
                done()
            },
            after: .completion { _, _, done in
                recorder.record("\(name).after")
                done()
            })
    }
}

/// Runs blocking host work on a thread of its own and awaits it, so an `async` test does not
/// hold one of the few cooperative threads that `async` handlers need.
public func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}
