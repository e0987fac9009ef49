import Dispatch
import Foundation
import Host
import HostTestSupport
import PluginAPI
import Testing

/// Completions as libffi closures (ABI: "Handles and completions", SPEC H-7) and the
/// memory bound of their validity window.
@Suite struct CompletionTests {
    @Test("H-7: the first call completes; a second is ignored and noted; the closure is callable from any thread")
    func exactlyOnceAtClosureLayer() async throws {
        let clock = ManualClock()
        let pool = ClosurePool(windowMilliseconds: 1_000, clock: clock)
        let events = Locked<[String]>([])
        let completion = CallbackCompletion(
            onFirst: { events.withLock { $0.append("first") } },
            onIgnored: { kind in events.withLock { $0.append("\(kind)") } })
        let (slot, code) = try pool.acquire(for: completion)
        let raw = unsafeBitCast(code, to: UInt.self)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 { group.addTask { unsafeBitCast(raw, to: rh_completion.self)() } }
        }
        #expect(events.withLock { $0 } == ["first", "second", "second", "second"])
        pool.release(slot)
        code()
        #expect(events.withLock { $0.last } == "second")
        #expect(completion.callCount == 5)
    }

    @Test("H-7: a call after the host stopped waiting, inside the window, is late: ignored and noted")
    func lateInsideWindow() throws {
        let clock = ManualClock()
        let pool = ClosurePool(windowMilliseconds: 1_000, clock: clock)
        let events = Locked<[String]>([])
        let completion = CallbackCompletion(
            onFirst: { events.withLock { $0.append("first") } },
            onIgnored: { kind in events.withLock { $0.append("\(kind)") } })
        let (slot, code) = try pool.acquire(for: completion)
        pool.release(slot)  // timed out: the host stopped waiting
        clock.advance(byMilliseconds: 999)
        // Still reserved: a new callback gets a different closure.
        let other = try pool.acquire(for: CallbackCompletion(onFirst: {}, onIgnored: { _ in }))
        #expect(other.slot != slot)
        code()
        #expect(events.withLock { $0 } == ["late"])
        #expect(!completion.isCompleted)
    }

    @Test("ABI: closures are reused only after the window; 200,000 callbacks keep live closures under a fixed bound")
    func boundedByWindow() throws {
        let clock = ManualClock()
        let windowMs = 5
        let pool = ClosurePool(windowMilliseconds: windowMs, clock: clock)
        let completed = Locked(0)
        // One callback per simulated 0.1 ms: at most windowMs * 10 + 1 closures can be cooling.
        let bound = windowMs * 10 + 2
        for i in 0..<200_000 {
            let completion = CallbackCompletion(onFirst: { completed.withLock { $0 += 1 } }, onIgnored: { _ in })
            let (slot, code) = try pool.acquire(for: completion)
            code()
            pool.release(slot)
            if i % 10 == 9 { clock.advance(byMilliseconds: 1) }
            if i % 1_000 == 0 { #expect(pool.allocatedCount <= bound) }
        }
        #expect(completed.withLock { $0 } == 200_000)
        #expect(pool.allocatedCount <= bound)
        #expect(pool.allocatedCount > 1)  // the window really does hold closures back
    }

    @Test("ABI: without the window passing, every callback needs its own closure (the bound is the window, not luck)")
    func noReuseInsideWindow() throws {
        let pool = ClosurePool(windowMilliseconds: 60_000, clock: ManualClock())
        for _ in 0..<50 {
            let (slot, code) = try pool.acquire(for: CallbackCompletion(onFirst: {}, onIgnored: { _ in }))
            code()
            pool.release(slot)
        }
        #expect(pool.allocatedCount == 50)
    }
}
