import Foundation
import Host
import HostPlugins
import HostSupport
import HostTestSupport
import Testing

/// Real C plugins that break the contract, run with millisecond limits on the real clock.
/// Margins are generous: each limit is far from the plugin's own timing.
@Suite struct MisbehavingPluginTests {
    func host(_ configure: (inout Configuration) -> Void) throws -> ReportHost {
        try TestHost.make { configuration in
            configuration.limits.callbackTimeoutMs = 200
            configuration.limits.recoveredReturnMs = 200
            configuration.limits.reportBudgetMs = 60_000
            configure(&configuration)
        }
    }

    @Test("H-9: a C plugin that sleeps past the recovered return limit is abandoned; the report is bundled without waiting")
    func sleepsPastRecoveredLimit() throws {
        let source = fixtureHandler(
            name: "sleeper", before: "on_before",
            extra: """
                #include <unistd.h>
                static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                    (void)c; (void)t;
                    usleep(1500 * 1000);
                    host->set_summary(r, "after the sleep");
                    done();
                }
                """)
        let host = try host { _ in }
        try host.loadPlugin(at: Fixtures.plugin("sleeper", source: source).path, into: .handler)
        let clock = SystemClock()
        let start = clock.now()
        let document = try #require(try host.runChain(host.makeReport(ReportRequest(trigger: .crash)), mode: .recovered))
        #expect(clock.now().milliseconds(since: start) < 1_500)
        #expect(document.content.summary == nil)
        #expect(document.internalLog.contains { $0.message == "sleeper.on_before_report_created did not return within 200 ms: abandoned; its later changes are ignored" })
    }

    @Test("H-8: a C plugin that blocks the main thread after completing gets the next callback skipped")
    func blocksMainThread() throws {
        let source = fixtureHandler(
            name: "blocker", before: "on_before", after: "on_after",
            extra: """
                #include <unistd.h>
                static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                    (void)c; (void)r; (void)t;
                    done();
                    usleep(1000 * 1000);  /* holds the main thread well past the 200 ms limit */
                }
                static void on_after(void *c, rh_report *r, bool t, rh_completion done) {
                    (void)c; (void)t; host->set_summary(r, "after ran"); done();
                }
                """)
        let host = try host { _ in }
        try host.loadPlugin(at: Fixtures.plugin("blocker", source: source).path, into: .handler)
        let document = try host.raiseDocument(ReportRequest(trigger: .upload))
        #expect(document.content.summary == nil)
        let messages = document.internalLog.map(\.message)
        #expect(messages.contains("blocker.on_before_report_created completed but its method did not return within 200 ms"))
        #expect(messages.contains("blocker.on_after_report_created skipped: the main thread could not start it within 200 ms"))
    }

    @Test("H-10: C plugins that never complete spend the shared budget; the remaining calls are skipped")
    func spendsBudget() throws {
        let source = fixtureHandler(
            name: "spender", before: "on_cb", after: "on_cb",
            extra: "static void on_cb(void *c, rh_report *r, bool t, rh_completion done) { (void)c; (void)r; (void)t; (void)done; }")
        // The second call starts after the first's 1000 ms and has 500 ms of budget left: a wide
        // margin for a loaded machine.
        let host = try host { $0.limits.callbackTimeoutMs = 1_000; $0.limits.reportBudgetMs = 1_500 }
        try host.loadPlugin(at: Fixtures.plugin("spender-w", source: source.replacingOccurrences(of: "\"spender\"", with: "\"spender-w\"")).path, into: .wrapper)
        try host.loadPlugin(at: Fixtures.plugin("spender", source: source).path, into: .handler)
        let document = try host.raiseDocument(ReportRequest(trigger: .upload))
        let messages = document.internalLog.map(\.message)
        #expect(messages.first == "spender-w.on_before_report_created did not complete within 1000 ms: the report goes on without it; its later changes are ignored")
        #expect(messages.contains("spender.on_before_report_created did not complete before the report's 1500 ms budget was spent: the report goes on without it; its later changes are ignored"))
        #expect(messages.contains("spender-w.on_after_report_created skipped: the report's 1500 ms budget was spent"))
        #expect(messages.contains("spender.on_after_report_created skipped: the report's 1500 ms budget was spent"))
    }

    @Test("H-7: a C plugin that completes from another thread after returning is waited for; its changes count")
    func completesLaterFromThread() throws {
        let source = fixtureHandler(
            name: "later", before: "on_before",
            extra: """
                #include <unistd.h>
                static rh_report *report;
                static rh_completion completion;
                static void *finish(void *unused) {
                    (void)unused;
                    usleep(50 * 1000);
                    host->set_summary(report, "from the thread");
                    completion();
                    return NULL;
                }
                static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                    (void)c; (void)t; report = r; completion = done;
                    pthread_t thread;
                    pthread_create(&thread, NULL, finish, NULL);
                    pthread_detach(thread);
                }
                """)
        let host = try host { $0.limits.callbackTimeoutMs = 10_000 }
        try host.loadPlugin(at: Fixtures.plugin("later", source: source).path, into: .handler)
        let document = try host.raiseDocument(ReportRequest(trigger: .upload))
        #expect(document.content.summary == "from the thread")
        #expect(document.internalLog.isEmpty)
    }

    @Test("ABI destroy: never while a call into the plugin still runs; stopping a host whose main thread hangs ends anyway")
    func destroySafety() throws {
        let source = fixtureHandler(
            name: "lingering", before: "on_before", destroy: "on_destroy",
            extra: """
                #include <unistd.h>
                int rh_fixture_destroyed = 0;
                static void on_destroy(void *c) { (void)c; rh_fixture_destroyed++; }
                static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                    (void)c; (void)r; (void)t; usleep(800 * 1000); done();
                }
                """)
        let library = try Fixtures.freshCopy(of: try Fixtures.plugin("lingering", source: source))
        let log = MemoryDestination()
        let host = try TestHost.make(log: log) { $0.limits.recoveredReturnMs = 100 }
        try host.loadPlugin(at: library.path, into: .handler)
        _ = try host.runChain(host.makeReport(ReportRequest(trigger: .crash)), mode: .recovered)  // abandoned, still sleeping
        host.setHandler(nil, for: .handler)
        let image = try #require(dlopen(library.path, RTLD_NOW | RTLD_NOLOAD))
        let destroyed = try #require(dlsym(image, "rh_fixture_destroyed")).assumingMemoryBound(to: Int32.self)
        #expect(destroyed.pointee == 0)
        #expect(log.lines.contains { $0.contains("lingering: destroy not called: a call into the plugin is still running") })

        // A callback that hangs the main thread: stop() gives up on destroy after the limit.
        let hang = Gate()
        let blocked = try TestHost.make(log: log) { $0.limits.callbackTimeoutMs = 200 }
        blocked.setHandler(SwiftHandler(name: "hangs", before: .completion { _, _, _ in hang.wait() }, destroy: {}), for: .handler)
        _ = try blocked.raiseDocument(ReportRequest(trigger: .upload))
        let clock = SystemClock()
        let start = clock.now()
        blocked.stop()
        #expect(clock.now().milliseconds(since: start) < 5_000)
        #expect(log.lines.contains { $0.contains("hangs: destroy not called within 200 ms: the main thread is blocked") })
        hang.release()
    }
}
