import Synchronization

/// The one lock box for shared state: a `Mutex` that classes can hold and share.
///
/// # Thread safety
/// Every access goes through `withLock`; never call back into other locked objects from
/// inside `body` unless their lock always comes after this one.
package final class Locked<Value>: Sendable {
    private let mutex: Mutex<Value>

    package init(_ value: sending Value) { mutex = Mutex(value) }

    package func withLock<T>(_ body: (inout sending Value) throws -> sending T) rethrows -> sending T {
        try mutex.withLock(body)
    }
}
