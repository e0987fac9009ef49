import Dispatch
import Foundation
import Host
import HostPlugins
import HostSupport
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
        // The first call blocks until the test opens its gate: the limits pass on the manual
        // clock, never on a real sleep.
        let source = fixtureHandler(
            name: "outlives", before: "on_before",
            extra: """
                static int calls;
                static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
                static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
                static int gate_open;
                void outlives_open_gate(void) {
                    pthread_mutex_lock(&gate_lock);
                    gate_open = 1;
                    pthread_cond_broadcast(&gate_cond);
                    pthread_mutex_unlock(&gate_lock);
                }
                static rh_completion second_done;
                static rh_report *second_report;
                static void *complete_later(void *unused) {
                    (void)unused;
                    /* Lands only if report 2 is still open: nothing else completed it. */
                    host->set_attribute(second_report, "completed.by", "its own callback");
                    second_done();
                    return NULL;
                }
                static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                    (void)c; (void)r; (void)t;
                    if (__atomic_fetch_add(&calls, 1, __ATOMIC_SEQ_CST) == 0) {
                        pthread_mutex_lock(&gate_lock);
                        while (!gate_open) pthread_cond_wait(&gate_cond, &gate_lock);
                        pthread_mutex_unlock(&gate_lock);
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
        let clock = ManualClock()
        let events = EventRecorder()
        let host = try TestHost.make(clock: clock, log: log, events: events) {
            $0.limits.recoveredReturnMs = 100
            $0.limits.completionWindowMs = 50
            $0.limits.callbackTimeoutMs = 5_000
        }
        try host.loadPlugin(at: library.path, into: .handler)
        let image = try #require(dlopen(library.path, RTLD_NOW | RTLD_NOLOAD))
        let openGate = unsafeBitCast(try #require(dlsym(image, "outlives_open_gate")), to: (@convention(c) () -> Void).self)
        let callback = "outlives.on_before_report_created"
        // Past the window of the start-up probe closure: report 1 reuses it, so it is the one
        // closure cooling when report 2 asks for one.
        clock.advance(byMilliseconds: 100)
        let firstRun = clock.start { try? host.raiseDocument(ReportRequest(trigger: .crash)) }
        let limit = events.awaitFinishWait(of: callback)
        clock.advance(byMilliseconds: limit.milliseconds(since: clock.now()))
        let first = try #require(firstRun.result() ?? nil)
        #expect(first.internalLog.contains { $0.message.contains("abandoned") })
        // Past the window as the host once counted it (from the abandonment), while the
        // abandoned method still runs.
        clock.advance(byMilliseconds: 100)
        let secondRun = clock.start { try? host.raiseDocument(ReportRequest(trigger: .logError)) }
        events.awaitStartWait(of: callback, occurrence: 2)  // its closure is taken; it waits for the main thread
        openGate()  // the abandoned method completes late, then returns
        let second = try #require(secondRun.result() ?? nil)
        #expect(second.content.attributes["completed.by"] == "its own callback", "\(second.internalLog)")
        #expect(!second.internalLog.contains { $0.message.contains("did not") }, "\(second.internalLog)")
    }
}
