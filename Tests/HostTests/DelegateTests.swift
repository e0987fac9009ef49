import Foundation
import Host
import HostPlugins
import HostSupport
import HostTestSupport
import PluginAPI
import Testing

/// The delegate (SPEC A-1 … A-5), in Swift and through a real C plugin.
@Suite struct DelegateTests {
    final class AttachingDelegate: ReportDelegate {
        let name = "attacher"
        let implements: DelegateMethods
        let recorder: Recorder
        let main: ThreadExecutor
        let decideWith: [OfferedAttachment]?
        let decides: Bool
        init(
            _ implements: DelegateMethods, recorder: Recorder, main: ThreadExecutor, decideWith: [OfferedAttachment]? = nil,
            decides: Bool = true
        ) {
            self.implements = implements
            self.recorder = recorder
            self.main = main
            self.decideWith = decideWith
            self.decides = decides
        }
        func attachments(_ report: ReportHandle) {
            recorder.record("sync on \(main.isCurrentThread ? "main" : "background")")
            try? report.addAttachment(name: "sync.txt", filename: "sync.txt", data: Data("s".utf8))
        }
        func attachments(_ report: ReportHandle, decide: @escaping @Sendable ([OfferedAttachment]?) -> Void) {
            recorder.record("async on \(main.isCurrentThread ? "main" : "background")")
            try? report.addAttachment(name: "during-call.txt", filename: "during-call.txt", data: Data("d".utf8))
            if decides { decide(decideWith) }
        }
    }

    let main = ThreadExecutor(name: "test-main")

    func offer(_ name: String) -> OfferedAttachment { OfferedAttachment(name: name, filename: name, data: Data(name.utf8)) }

    @Test("A-1: the synchronous attachments form runs on a background thread and the host waits for it to return")
    func synchronousForm() throws {
        let recorder = Recorder()
        let host = try TestHost.make(mainExecutor: main)
        let delegate = AttachingDelegate(.attachments, recorder: recorder, main: main)
        host.setDelegate(.weak(delegate))
        let document = try host.raiseDocument(ReportRequest(trigger: .logError))
        #expect(recorder.all.count == 1)
        #expect(recorder.all.first == "sync on background")
        #expect(document.content.attachments.map(\.name) == ["sync.txt"])
        #expect(document.content.attachments.first?.source == .delegate)
        withExtendedLifetime(delegate) {}
    }

    @Test("A-2: the asynchronous form runs on the main thread; its decision adds attachments; null is accepted")
    func asynchronousForm() throws {
        let recorder = Recorder()
        let host = try TestHost.make(mainExecutor: main)
        let delegate = AttachingDelegate(.attachmentsAsync, recorder: recorder, main: main, decideWith: [offer("a"), offer("b")])
        host.setDelegate(.weak(delegate))
        let document = try host.raiseDocument(ReportRequest(trigger: .upload))
        #expect(recorder.all == ["async on main"])
        #expect(document.content.attachments.map(\.name) == ["during-call.txt", "a", "b"])
        // The three attachments share the delegate's budget of three.
        let full = AttachingDelegate(.attachmentsAsync, recorder: recorder, main: main, decideWith: [offer("a"), offer("b"), offer("c")])
        host.setDelegate(.weak(full))
        let capped = try host.raiseDocument(ReportRequest(trigger: .upload))
        #expect(capped.content.attachments.map(\.name) == ["during-call.txt", "a", "b"])
        #expect(capped.internalLog.contains { $0.handler == "attacher" && $0.message.contains("'c' dropped") })
        let none = AttachingDelegate(.attachmentsAsync, recorder: recorder, main: main, decideWith: nil)
        host.setDelegate(.weak(none))
        #expect(try host.raiseDocument(ReportRequest(trigger: .upload)).content.attachments.map(\.name) == ["during-call.txt"])
        withExtendedLifetime([delegate, full, none]) {}
    }

    @Test("A-2: without a decision in 10 s the report is bundled without the delegate's attachments, those added during the call included")
    func decisionTimeout() throws {
        let clock = ManualClock()
        let events = EventRecorder()
        let host = try TestHost.make(clock: clock, events: events, mainExecutor: main)
        let delegate = AttachingDelegate(.attachmentsAsync, recorder: Recorder(), main: main, decides: false)
        host.setDelegate(.weak(delegate))
        var withAttachment = ReportRequest(trigger: .upload)
        withAttachment.attachments = [.init(name: "ext.txt", filename: "ext.txt", data: Data("e".utf8))]
        let request = withAttachment
        let run = clock.start { try? host.raiseDocument(request) }
        let deadline = events.awaitFinishWait(of: "attacher.attachments_for_report_async")
        #expect(deadline == clock.now().advanced(byMilliseconds: 10_000))
        events.awaitReturn(of: "attacher.attachments_for_report_async")  // it added an attachment, then returned
        clock.advance(byMilliseconds: 9_999)
        #expect(run.awaitParkOrReturn())
        clock.advance(byMilliseconds: 1)
        let document = try #require(run.result() ?? nil)
        #expect(document.content.attachments.map(\.name) == ["ext.txt"])
        #expect(document.internalLog.contains { $0.message == "attacher.attachments_for_report_async did not decide within 10000 ms; its later changes are ignored" })
        withExtendedLifetime(delegate) {}
    }

    final class DecideThenWrite: ReportDelegate {
        let name = "decide-then-write"
        let implements: DelegateMethods = [.attachmentsAsync]
        let status = Locked<ReportError?>(nil)
        func attachments(_ report: ReportHandle, decide: @escaping @Sendable ([OfferedAttachment]?) -> Void) {
            decide(nil)
            do throws(ReportError) { try report.setSummary("after the decision") } catch { status.withLock { $0 = error } }
        }
    }

    @Test("R-8, A-2: the asynchronous form's handle closes at the decision; later changes are ignored")
    func handleClosesAtDecision() throws {
        let host = try TestHost.make(mainExecutor: main)
        let delegate = DecideThenWrite()
        host.setDelegate(.weak(delegate))
        var request = ReportRequest(trigger: .upload)
        request.summary = "before"
        let document = try host.raiseDocument(request)
        #expect(document.content.summary == "before")
        #expect(delegate.status.withLock { $0 } == .closed)
    }

    @Test("A-3: the asynchronous form is not called for recovered or terminating reports; the step is skipped and logged")
    func asyncNotForRecoveredOrTerminating() throws {
        let recorder = Recorder()
        let host = try TestHost.make(mainExecutor: main)
        let delegate = AttachingDelegate(.attachmentsAsync, recorder: recorder, main: main, decideWith: [offer("a")])
        host.setDelegate(.weak(delegate))
        let recovered = try #require(try host.runChain(host.makeReport(ReportRequest(trigger: .crash)), mode: .recovered))
        var terminating = ReportRequest(trigger: .logException)
        terminating.isTerminating = true
        let fatal = try host.raiseDocument(terminating)
        #expect(recorder.all.isEmpty)
        for document in [recovered, fatal] {
            #expect(document.content.attachments.isEmpty)
            #expect(document.internalLog.contains { $0.message.hasPrefix("attacher.attachments_for_report_async not called") })
        }
        // The synchronous form is called for both.
        let sync = AttachingDelegate(.attachments, recorder: recorder, main: main)
        host.setDelegate(.weak(sync))
        _ = try host.runChain(host.makeReport(ReportRequest(trigger: .crash)), mode: .recovered)
        _ = try host.raiseDocument(terminating)
        #expect(recorder.all.count == 2)
        withExtendedLifetime([delegate, sync]) {}
    }

    @Test("A-4: when both forms are implemented the synchronous one is used")
    func bothForms() throws {
        let recorder = Recorder()
        let host = try TestHost.make(mainExecutor: main)
        let delegate = AttachingDelegate([.attachments, .attachmentsAsync], recorder: recorder, main: main, decideWith: [offer("a")])
        host.setDelegate(.weak(delegate))
        let document = try host.raiseDocument(ReportRequest(trigger: .upload))
        #expect(recorder.all.count == 1 && recorder.all[0].hasPrefix("sync"))
        #expect(document.content.attachments.map(\.name) == ["sync.txt"])
        withExtendedLifetime(delegate) {}
    }

    @Test("A-5: an in-process delegate is held weakly: once its owner releases it, it is no longer called")
    func weakDelegate() throws {
        let recorder = Recorder()
        let host = try TestHost.make(mainExecutor: main)
        var delegate: AttachingDelegate? = AttachingDelegate(.attachments, recorder: recorder, main: main)
        host.setDelegate(.weak(delegate!))
        _ = try host.raiseDocument(ReportRequest(trigger: .upload))
        #expect(recorder.all.count == 1)
        delegate = nil
        let document = try host.raiseDocument(ReportRequest(trigger: .upload))
        #expect(recorder.all.count == 1)
        #expect(document.content.attachments.isEmpty)
        #expect(delegate == nil)
    }

    static let pluginDelegate = """
        \(fixturePrelude)
        static void add_fields(void *c, rh_report *r) {
            (void)c;
            host->set_summary(r, "summary from plugin delegate");
            host->add_label(r, "plugin-delegate");
            host->set_severity(r, 4);
        }
        static void attachments_async(void *c, rh_report *r, rh_attachments_decision decide) {
            (void)c; (void)r;
            rh_attachment items[4] = {
                {"one.txt", "one.txt", "1", 1}, {"two.txt", "two.txt", "22", 2},
                {"three.txt", "three.txt", "333", 3}, {"four.txt", "four.txt", "4444", 4}};
            decide(items, 4);
            decide(NULL, 0);  /* a second decision: ignored and noted */
        }
        static rh_delegate delegate = {RH_ABI_VERSION_MAJOR, RH_ABI_VERSION_MINOR, sizeof(rh_delegate),
                                       add_fields, NULL, NULL, attachments_async};
        static rh_handler handler = {RH_ABI_VERSION_MAJOR, RH_ABI_VERSION_MINOR, sizeof(rh_handler),
                                     "c-delegate", "1.0", NULL, NULL, NULL, NULL, &delegate};
        const rh_handler *rh_plugin_entry(const rh_host_api *h) { host = h; return &handler; }
        """

    @Test("A-2, R-7: a C delegate's decision closure copies its items, keeps three, drops the fourth, ignores a second call")
    func pluginDelegate() throws {
        let host = try TestHost.make(mainExecutor: main)
        try host.loadPlugin(at: Fixtures.plugin("c-delegate", source: Self.pluginDelegate).path, into: .delegate)
        var request = ReportRequest(trigger: .dialog)
        request.summary = "seeded"
        request.dialog = ScriptedDialogStub()
        let document = try host.raiseDocument(request)
        #expect(document.content.summary == "summary from plugin delegate")
        #expect(document.content.labels == ["plugin-delegate"])
        #expect(document.content.severity == 4)
        #expect(document.content.attachments.map(\.name) == ["one.txt", "two.txt", "three.txt"])
        #expect(document.content.attachments.map(\.data) == [Data("1".utf8), Data("22".utf8), Data("333".utf8)])
        #expect(document.internalLog.contains { $0.handler == "c-delegate" && $0.message.contains("'four.txt' dropped") })
        #expect(document.internalLog.contains { $0.handler == "c-delegate" && $0.message.contains("decision called again") })
    }

    struct ScriptedDialogStub: DialogPresenter {
        func present(_ fields: DialogFields) -> DialogDecision { .send(fields) }
    }
}
