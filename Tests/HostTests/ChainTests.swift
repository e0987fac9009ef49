import Dispatch
import Foundation
import Host
import HostPlugins
import HostTestSupport
import PluginAPI
import Testing

/// The first run path through real C plugins: order, completions, late writes.
@Suite struct ChainTests {
    /// Appends "<name>.<step>" as a label in each callback and completes from a new thread.
    static func tracer(_ name: String) -> String {
        fixtureHandler(
            name: name, before: "on_before", after: "on_after",
            extra: """
                static void *finish(void *done) { ((rh_completion)done)(); return NULL; }
                static void trace(rh_report *r, const char *step, rh_completion done) {
                    char label[64];
                    snprintf(label, sizeof label, "%s.%s", "\(name)", step);
                    host->add_label(r, label);
                    pthread_t thread;
                    pthread_create(&thread, NULL, finish, (void *)done);
                    pthread_detach(thread);
                }
                static void on_before(void *c, rh_report *r, bool t, rh_completion done) { (void)c; (void)t; trace(r, "before", done); }
                static void on_after(void *c, rh_report *r, bool t, rh_completion done) { (void)c; (void)t; trace(r, "after", done); }
                """)
    }

    @Test("H-6: wrapper.before, handler.before, wrapper.after, handler.after; completions from other threads are awaited")
    func orderThroughPlugins() throws {
        let host = try TestHost.make()
        try host.loadPlugin(at: Fixtures.plugin("tracer-w", source: Self.tracer("w")).path, into: .wrapper)
        try host.loadPlugin(at: Fixtures.plugin("tracer-h", source: Self.tracer("h")).path, into: .handler)
        let document = try host.raiseDocument(ReportRequest(trigger: .logException))
        #expect(document.content.labels == ["w.before", "h.before", "w.after", "h.after"])
        #expect(document.internalLog.isEmpty)
    }

    @Test("H-14: a timeout is noted under the plugin's name, and the internal log is written from the typed rule events")
    func timeoutNamesThePlugin() throws {
        let source = fixtureHandler(
            name: "silent", before: "on_before",
            extra: """
                static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                    (void)c; (void)t; (void)done;
                    host->set_summary(r, "\\xff");  /* not UTF-8: a refused argument, noted too */
                }
                """)
        let events = EventRecorder()
        let host = try TestHost.make(events: events) { $0.limits.callbackTimeoutMs = 300 }
        try host.loadPlugin(at: Fixtures.plugin("silent", source: source).path, into: .handler)
        let document = try host.raiseDocument(ReportRequest(trigger: .upload))
        let noted = document.internalLog.filter { $0.handler == "silent" }
        #expect(noted.contains { $0.message.contains("did not complete within 300 ms") })
        #expect(!document.internalLog.contains { $0.handler == "host" }, "\(document.internalLog)")
        let broke = events.ruleEvents.filter { $0.handler == "silent" }
        #expect(broke.map(\.event.kind) == [.refusedArgument, .notCompleted])
        #expect(broke.map(\.event.message) == noted.map(\.message))
    }

    @Test("H-3: a plugin implementing neither callback is valid and changes nothing")
    func noCallbacks() throws {
        let host = try TestHost.make()
        try host.loadPlugin(at: Fixtures.plugin("empty", source: fixtureHandler(name: "empty")).path, into: .handler)
        var request = ReportRequest(trigger: .upload)
        request.summary = "same"
        let document = try host.raiseDocument(request)
        #expect(document.content.summary == "same")
        #expect(document.internalLog.isEmpty)
    }

    @Test("H-7: a second completion is ignored and noted with the plugin's name; changes after completion are ignored")
    func twiceAndWriteAfter() throws {
        let source = fixtureHandler(
            name: "sloppy", before: "on_before",
            extra: """
                static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                    (void)c; (void)t;
                    host->set_summary(r, "set before completion");
                    done();
                    done();
                    if (host->set_summary(r, "set after completion") != RH_ERR_CLOSED) abort();
                }
                """)
        let host = try TestHost.make()
        try host.loadPlugin(at: Fixtures.plugin("sloppy", source: source).path, into: .handler)
        let document = try host.raiseDocument(ReportRequest(trigger: .upload))
        #expect(document.content.summary == "set before completion")
        #expect(document.internalLog.contains { $0.handler == "sloppy" && $0.message.contains("completion called again") })
        #expect(document.internalLog.contains { $0.handler == "sloppy" && $0.message.contains("set_summary through a closed handle") })
    }

    @Test("H-8: a callback that never completes is given up after the callback limit (manual clock); its late completion is noted")
    func neverCompletes() throws {
        let source = fixtureHandler(
            name: "stuck", before: "on_before", after: "on_after",
            extra: """
                static rh_completion saved;
                static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                    (void)c; (void)t; saved = done; host->set_summary(r, "from before");
                }
                static void on_after(void *c, rh_report *r, bool t, rh_completion done) {
                    (void)c; (void)t;
                    saved();  /* late: the host stopped waiting for before */
                    host->set_description(r, "from after");
                    done();
                }
                """)
        let clock = ManualClock()
        let events = EventRecorder()
        let host = try TestHost.make(clock: clock, events: events)
        try host.loadPlugin(at: Fixtures.freshCopy(of: Fixtures.plugin("stuck", source: source)).path, into: .handler)
        let run = clock.start { try? host.raiseDocument(ReportRequest(trigger: .upload)) }
        let deadline = events.awaitFinishWait(of: "stuck.on_before_report_created")
        #expect(deadline == clock.now().advanced(byMilliseconds: 30_000))
        events.awaitReturn(of: "stuck.on_before_report_created")  // its change is made before the limit
        clock.advance(byMilliseconds: 29_999)
        // The host looked at the time again and went back to waiting.
        #expect(run.awaitParkOrReturn())
        clock.advance(byMilliseconds: 1)
        let document = try #require(run.result() ?? nil)
        #expect(document.content.summary == "from before")
        #expect(document.content.description == "from after")
        #expect(document.internalLog.contains { $0.handler == "stuck" && $0.message.contains("did not complete within 30000 ms") })
        #expect(document.internalLog.contains { $0.handler == "stuck" && $0.message.contains("after the host stopped waiting") })
    }

    @Test("R-9: a plugin that keeps a handle and writes through it later from a thread changes nothing and never crashes the host")
    func keptHandle() throws {
        let source = fixtureHandler(
            name: "keeper", before: "on_before",
            extra: """
                static rh_report *kept;
                static int statuses[4];
                static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                    (void)c; (void)t; kept = r; host->set_summary(r, "inside"); done();
                }
                static void *write_late(void *unused) {
                    (void)unused;
                    char buffer[16];
                    size_t length = 99;
                    statuses[0] = host->set_summary(kept, "late write");
                    statuses[1] = host->add_label(kept, "late");
                    statuses[2] = host->summary(kept, buffer, sizeof buffer, &length);
                    statuses[3] = host->has_label(kept, "late") ? 1 : (int)length;
                    return NULL;
                }
                /* Called by the test after the report was bundled. */
                int *rh_fixture_write_late(void) {
                    pthread_t thread;
                    pthread_create(&thread, NULL, write_late, NULL);
                    pthread_join(thread, NULL);
                    return statuses;
                }
                """)
        let library = try Fixtures.freshCopy(of: Fixtures.plugin("keeper", source: source))
        let log = MemoryDestination()
        let host = try TestHost.make(log: log)
        try host.loadPlugin(at: library.path, into: .handler)
        let document = try host.raiseDocument(ReportRequest(trigger: .upload))
        let image = try #require(dlopen(library.path, RTLD_NOW | RTLD_NOLOAD))
        typealias WriteLate = @convention(c) () -> UnsafeMutablePointer<Int32>
        let writeLate = unsafeBitCast(try #require(dlsym(image, "rh_fixture_write_late")), to: WriteLate.self)
        let statuses = writeLate()
        #expect(Array(UnsafeBufferPointer(start: statuses, count: 4)) == [RH_ERR_CLOSED, RH_ERR_CLOSED, RH_ERR_CLOSED, 0])
        #expect(document.content.summary == "inside")
        #expect(document.content.labels.isEmpty)
    }

    @Test("H-11: with --terminating each handle closes when its method returns; the host does not wait for completion")
    func terminating() throws {
        let source = fixtureHandler(
            name: "term", before: "on_before",
            extra: """
                static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                    (void)c; (void)done;  /* never completes */
                    host->set_summary(r, t ? "terminating" : "normal");
                }
                """)
        let library = try Fixtures.freshCopy(of: Fixtures.plugin("term", source: source))
        let host = try TestHost.make()  // 30 s limit: the test would hang if the host waited for completion
        try host.loadPlugin(at: library.path, into: .handler)
        var request = ReportRequest(trigger: .logException)
        request.isTerminating = true
        let document = try host.raiseDocument(request)
        #expect(document.content.summary == "terminating")
        #expect(!document.internalLog.contains { $0.message.contains("did not") })
    }
}

/// A plugin is never called after its `destroy` (ABI: "destroy runs after no callback of it
/// runs"), even when a chain read the slot before the plugin was replaced.
@Suite struct DestroyedPluginTests {
    @Test("H-1: a handler replaced between the before and after steps is not called after its destroy")
    func replacedBetweenSteps() throws {
        let source = fixtureHandler(
            name: "replaced", before: "on_before", after: "on_after", destroy: "on_destroy",
            extra: """
                static int destroyed;
                static void on_destroy(void *c) { (void)c; destroyed = 1; }
                static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                    (void)c; (void)t;
                    host->set_attribute(r, "before.ran", "yes");
                    done();
                }
                static void on_after(void *c, rh_report *r, bool t, rh_completion done) {
                    (void)c; (void)t;
                    host->set_attribute(r, destroyed ? "after.after_destroy" : "after.ran", "yes");
                    done();
                }
                """)
        let library = try Fixtures.freshCopy(of: Fixtures.plugin("replaced", source: source))
        let host = try TestHost.make()
        try host.loadPlugin(at: library.path, into: .handler)
        // The wrapper's after-callback runs between the two steps of the handler: it removes
        // the handler, whose destroy then runs (no call of it is in flight).
        host.setHandler(
            SwiftHandler(name: "remover", after: .completion { [host] _, _, done in
                host.setHandler(nil, for: .handler)
                done()
            }), for: .wrapper)
        let document = try host.raiseDocument(ReportRequest(trigger: .crash))
        #expect(document.content.attributes["before.ran"] == "yes")
        #expect(document.content.attributes["after.after_destroy"] == nil)
        #expect(document.content.attributes["after.ran"] == nil)
        #expect(document.internalLog.contains {
            $0.handler == "replaced" && $0.message.contains("not called: the plugin was replaced and destroyed")
        })
    }
}
