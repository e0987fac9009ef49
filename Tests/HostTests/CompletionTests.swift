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
        pool.methodReturned(slot)
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
            pool.methodReturned(slot)
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
            pool.methodReturned(slot)
            pool.release(slot)
        }
        #expect(pool.allocatedCount == 50)
    }

    @Test("ABI: a closure whose method is still running is never reused, however long past the window; its window starts at the return")
    func heldWhileTheMethodRuns() throws {
        let clock = ManualClock()
        let pool = ClosurePool(windowMilliseconds: 10, clock: clock)
        let (slot, code) = try pool.acquire(for: CallbackCompletion(onFirst: {}, onIgnored: { _ in }))
        pool.release(slot)  // the host gave up on the call; the method goes on
        clock.advance(byMilliseconds: 10_000)
        let other = try pool.acquire(for: CallbackCompletion(onFirst: {}, onIgnored: { _ in }))
        #expect(other.slot != slot)
        pool.methodReturned(other.slot)
        pool.release(other.slot)
        // The abandoned method completes late: ignored, not taken for another callback's.
        let later = Locked<[String]>([])
        let third = try pool.acquire(for: CallbackCompletion(onFirst: { later.withLock { $0.append("completed") } }, onIgnored: { _ in }))
        code()
        #expect(later.withLock { $0 }.isEmpty)
        pool.methodReturned(third.slot)
        pool.release(third.slot)
        // Returned now: reusable once the window has passed since.
        pool.methodReturned(slot)
        clock.advance(byMilliseconds: 9)
        #expect(try pool.acquire(for: CallbackCompletion(onFirst: {}, onIgnored: { _ in })).slot != slot)
        clock.advance(byMilliseconds: 10)
        let reused = try (0..<3).map { _ in try pool.acquire(for: CallbackCompletion(onFirst: {}, onIgnored: { _ in })).slot }
        #expect(reused.contains(slot))
    }

    @Test("ABI: a recovered method that outlives both limits and completes late never completes another report's callback")
    func abandonedMethodCompletesLate() throws {
        let source = fixtureHandler(
            name: "outlives", before: "on_before",
            extra: """
                #include <unistd.h>
                static int calls;
                static rh_completion second_done;
                static rh_report *second_report;
                static void *complete_later(void *unused) {
                    (void)unused;
                    usleep(300 * 1000);
                    /* Lands only if report 2 is still open: nothing else completed it. */
                    host->set_attribute(second_report, "completed.by", "its own callback");
                    second_done();
                    return NULL;
                }
                static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                    (void)c; (void)r; (void)t;
                    if (__atomic_fetch_add(&calls, 1, __ATOMIC_SEQ_CST) == 0) {
                        usleep(350 * 1000);  /* past recoveredReturnMs (100) and the window (50) */
                        done();              /* late: report 1 was bundled long ago */
                        return;
                    }
                    second_done = done;
                    second_report = r;
                    pthread_t thread;
                    pthread_create(&thread, NULL, complete_later, NULL);
                    pthread_detach(thread);
                }
                """)
        let library = try Fixtures.freshCopy(of: Fixtures.plugin("outlives", source: source))
        let log = MemoryDestination()
        let host = try TestHost.make(log: log) {
            $0.limits.recoveredReturnMs = 100
            $0.limits.completionWindowMs = 50
            $0.limits.callbackTimeoutMs = 5_000
        }
        try host.loadPlugin(at: library.path, into: .handler)
        // Past the window of the start-up probe closure: report 1 reuses it, so it is the one
        // closure cooling when report 2 asks for one.
        Thread.sleep(forTimeInterval: 0.1)
        let first = try host.raiseDocument(ReportRequest(trigger: .crash))
        #expect(first.internalLog.contains { $0.message.contains("abandoned") })
        // Past the window as the host once counted it (from the abandonment), before the
        // abandoned method completes.
        Thread.sleep(forTimeInterval: 0.1)
        let second = try host.raiseDocument(ReportRequest(trigger: .logError))
        #expect(second.content.attributes["completed.by"] == "its own callback", "\(second.internalLog)")
        #expect(!second.internalLog.contains { $0.message.contains("did not") }, "\(second.internalLog)")
    }
}
