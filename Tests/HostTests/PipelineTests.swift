import Dispatch
import Foundation
import Host
import HostPlugins
import HostSupport
import HostTestSupport
import Testing

/// The chain's order, threads and time limits (SPEC H-1 … H-12, H-15) with in-process
/// handlers and a manual clock.
@Suite struct PipelineTests {
    final class RecordingDelegate: ReportDelegate {
        let name = "recording-delegate"
        let implements: DelegateMethods
        let recorder: Recorder
        init(_ recorder: Recorder, implements: DelegateMethods = [.addFields, .checkFields, .attachments]) {
            self.recorder = recorder
            self.implements = implements
        }
        func addFields(_ report: ReportHandle) {
            recorder.record("delegate.addFields summary=\((try? report.summary()) ?? "absent") labels=\((try? report.labels()) ?? [])")
            try? report.setSummary("from delegate")
            try? report.addLabel("delegate")
        }
        func checkFields(_ report: ReportHandle) { recorder.record("delegate.checkFields") }
        func attachments(_ report: ReportHandle) { recorder.record("delegate.attachments") }
        func attachments(_ report: ReportHandle, decide: @escaping @Sendable ([OfferedAttachment]?) -> Void) {
            recorder.record("delegate.attachmentsAsync")
            decide(nil)
        }
    }

    struct RecordingDialog: DialogPresenter {
        let recorder: Recorder
        let decision: DialogDecision?
        let spendMs: Int
        let clock: ManualClock?
        func present(_ fields: DialogFields) -> DialogDecision {
            recorder.record("dialog summary=\(fields.summary ?? "absent") labels=\(fields.labels)")
            clock?.advance(byMilliseconds: spendMs)
            return decision ?? .send(fields)
        }
    }

    @Test("H-5: dialog order: wrapper.before, handler.before, addFields, dialog, wrapper.after, handler.after, checkFields, attachments")
    func dialogOrder() throws {
        let recorder = Recorder()
        let host = try TestHost.make()
        host.setHandler(.recording("wrapper", into: recorder), for: .wrapper)
        host.setHandler(.recording("handler", into: recorder), for: .handler)
        let delegate = RecordingDelegate(recorder)
        host.setDelegate(.weak(delegate))
        var request = ReportRequest(trigger: .dialog)
        request.summary = "seeded"
        request.labels = ["seed"]
        request.severity = 2
        request.dialog = RecordingDialog(recorder: recorder, decision: nil, spendMs: 0, clock: nil)
        let document = try host.raiseDocument(request)
        #expect(recorder.all == [
            "wrapper.before", "handler.before", "delegate.addFields summary=absent labels=[]",
            "dialog summary=from delegate labels=[\"delegate\"]", "wrapper.after", "handler.after", "delegate.checkFields",
            "delegate.attachments",
        ])
        // Summary, description and labels were replaced outright; the severity was not set, so it stays.
        #expect(document.content.summary == "from delegate")
        #expect(document.content.description == nil)
        #expect(document.content.labels == ["delegate"])
        #expect(document.content.severity == 2)
        withExtendedLifetime(delegate) {}
    }

    @Test("H-5: cancelling the dialog runs nothing further and gives no document")
    func dialogCancel() throws {
        let recorder = Recorder()
        let host = try TestHost.make()
        host.setHandler(.recording("handler", into: recorder), for: .handler)
        let delegate = RecordingDelegate(recorder)
        host.setDelegate(.weak(delegate))
        var request = ReportRequest(trigger: .dialog)
        request.dialog = RecordingDialog(recorder: recorder, decision: .cancel, spendMs: 0, clock: nil)
        #expect(try host.raise(request) == nil)
        #expect(recorder.all.last == "dialog summary=from delegate labels=[\"delegate\"]")
        #expect(!recorder.all.contains("handler.after"))
        #expect(!recorder.all.contains("delegate.attachments"))
        withExtendedLifetime(delegate) {}
    }

    @Test("H-5: the user's dialog edits reach the report before the after-callbacks")
    func dialogEdits() throws {
        let host = try TestHost.make()
        let seen = Recorder()
        host.setHandler(SwiftHandler(name: "h", after: .completion { report, _, done in
            seen.record("\((try? report.summary()) ?? "-") \((try? report.severity()) ?? -1)")
            done()
        }), for: .handler)
        var request = ReportRequest(trigger: .dialog)
        request.dialog = RecordingDialog(
            recorder: Recorder(), decision: .send(DialogFields(summary: "edited", description: "d", labels: ["x"], severity: 5)),
            spendMs: 0, clock: nil)
        let document = try host.raiseDocument(request)
        #expect(seen.all == ["edited 5"])
        #expect(document.content.labels == ["x"] && document.content.description == "d")
    }

    @Test("H-6: every other report: wrapper first in each step, then the delegate's attachments; no fields hooks")
    func otherOrder() throws {
        let recorder = Recorder()
        let host = try TestHost.make()
        host.setHandler(.recording("wrapper", into: recorder), for: .wrapper)
        host.setHandler(.recording("handler", into: recorder), for: .handler)
        let delegate = RecordingDelegate(recorder)
        host.setDelegate(.weak(delegate))
        _ = try host.raiseDocument(ReportRequest(trigger: .upload))
        #expect(recorder.all == ["wrapper.before", "handler.before", "wrapper.after", "handler.after", "delegate.attachments"])
        withExtendedLifetime(delegate) {}
    }

    @Test("H-1: the host holds a handler strongly until it is replaced or removed; setting none removes it")
    func strongReference() throws {
        final class Owner: Sendable {}
        weak var weakOwner: Owner?
        let host = try TestHost.make()
        do {
            let owner = Owner()
            weakOwner = owner
            host.setHandler(SwiftHandler(name: "held", before: .completion { _, _, done in
                withExtendedLifetime(owner) {}
                done()
            }), for: .handler)
        }
        #expect(weakOwner != nil)
        let replaced = Recorder()
        host.setHandler(SwiftHandler(name: "second", destroy: { replaced.record("destroyed") }), for: .handler)
        #expect(weakOwner == nil)
        host.setHandler(nil, for: .handler)
        #expect(host.handler(in: .handler) == nil)
        #expect(replaced.all == ["destroyed"])
    }

    @Test("H-2: recovered reports are processed during launch with the handlers set before; one set after sees later reports only")
    func handlersBeforeLaunch() throws {
        let recorder = Recorder()
        let host = try TestHost.make()
        host.setHandler(.recording("early", into: recorder), for: .wrapper)
        let recovered = host.makeReport(ReportRequest(trigger: .crash))
        _ = try host.runChain(recovered, mode: .recovered)  // what recovery does at launch
        host.setHandler(.recording("late", into: recorder), for: .handler)
        #expect(recorder.all == ["early.before", "early.after"])
        _ = try host.raiseDocument(ReportRequest(trigger: .logError))
        #expect(recorder.all.suffix(4) == ["early.before", "late.before", "early.after", "late.after"])
    }

    @Test("H-4: an async Swift handler is done when it returns; the host completes for it")
    func asyncHandler() async throws {
        let host = try TestHost.make()
        host.setHandler(SwiftHandler(name: "async", before: .async { report, _ in
            await Task.yield()
            try? report.setSummary("set by async")
        }), for: .handler)
        let document = try await offPool { try host.raiseDocument(ReportRequest(trigger: .upload)) }
        #expect(document.content.summary == "set by async")
        #expect(document.internalLog.isEmpty)
    }

    @Test("H-8: a callback the main thread cannot start within the limit is skipped, never called late")
    func blockedMainThread() throws {
        let clock = ManualClock()
        let events = EventRecorder()
        let main = ThreadExecutor(name: "blocked-main")
        let host = try ReportHost(
            configuration: Configuration(), logger: .silent, clock: clock, mainExecutor: main, observer: events.observer)
        let called = Recorder()
        host.setHandler(SwiftHandler(name: "late", before: .completion { _, _, done in
            called.record("called")
            done()
        }), for: .handler)
        let unblock = Gate()
        main.execute { unblock.wait() }  // a hang on the main thread
        let run = clock.start { try? host.raiseDocument(ReportRequest(trigger: .upload)) }
        let deadline = events.awaitStartWait(of: "late.on_before_report_created")
        #expect(deadline == clock.now().advanced(byMilliseconds: 30_000))
        clock.advance(byMilliseconds: 30_000)
        let document = try #require(run.result() ?? nil)
        unblock.release()
        let drained = Gate()
        main.execute { drained.release() }
        #expect(drained.wait())
        #expect(called.all.isEmpty)
        #expect(document.internalLog.contains { $0.message == "late.on_before_report_created skipped: the main thread could not start it within 30000 ms" })
    }

    @Test("H-8: a callback still waiting when the host is stopped is skipped")
    func stopWhileWaiting() throws {
        let events = EventRecorder()
        let host = try TestHost.make(clock: ManualClock(), events: events)
        host.setHandler(SwiftHandler(name: "never", before: .completion { _, _, _ in }), for: .handler)
        let run = ManualClock().start { try? host.raiseDocument(ReportRequest(trigger: .upload)) }
        events.awaitFinishWait(of: "never.on_before_report_created")
        host.stop()
        let document = try #require(run.result() ?? nil)
        #expect(document.internalLog.contains { $0.message == "never.on_before_report_created skipped: the host is stopping" })
    }

    @Test("H-9: recovered callbacks run off the main thread; the host waits for return, not for completion")
    func recoveredOffMain() throws {
        let main = ThreadExecutor(name: "test-main")
        let host = try TestHost.make(mainExecutor: main)
        let threads = Recorder()
        host.setHandler(SwiftHandler(name: "rec", before: .completion { report, terminating, _ in
            threads.record(main.isCurrentThread ? "main" : "background")
            threads.record("terminating=\(terminating)")
            try? report.setSummary("before return")
            // Never completes: the host must not wait for it.
        }), for: .handler)
        let report = host.makeReport(ReportRequest(trigger: .crash))
        let document = try #require(try host.runChain(report, mode: .recovered))
        #expect(threads.all == ["background", "terminating=false"])
        #expect(document.content.summary == "before return")
        #expect(!document.internalLog.contains { $0.message.contains("did not") })
    }

    @Test("H-9: a change after return counts only if completion arrives before bundling")
    func recoveredLateChanges() throws {
        let host = try TestHost.make()
        let saved = Locked<(ReportHandle, @Sendable () -> Void)?>(nil)
        // The wrapper returns without completing; the handler (next step, before bundling)
        // writes through the wrapper's handle and completes it.
        host.setHandler(SwiftHandler(name: "wrapper", before: .completion { report, _, done in
            saved.withLock { $0 = (report, done) }
        }, after: .completion { report, _, done in
            // Another callback that returned without completing: its write is dropped.
            try? report.setAttribute("after.late", "dropped")
            done()
        }), for: .wrapper)
        host.setHandler(SwiftHandler(name: "handler", before: .completion { _, _, done in
            if let (handle, complete) = saved.withLock({ $0 }) {
                try? handle.setAttribute("wrapper.late", "kept")
                complete()
            }
            done()
        }), for: .handler)
        let kept = try #require(try host.runChain(host.makeReport(ReportRequest(trigger: .crash)), mode: .recovered))
        #expect(kept.content.attributes["wrapper.late"] == "kept")

        let dropHost = try TestHost.make()
        let leftOpen = Locked<ReportHandle?>(nil)
        dropHost.setHandler(SwiftHandler(name: "lazy", before: .completion { report, _, _ in
            leftOpen.withLock { $0 = report }
        }, after: .completion { _, _, done in
            // Written after lazy.before returned; lazy never completes before bundling.
            if let handle = leftOpen.withLock({ $0 }) { try? handle.setSummary("too late") }
            done()
        }), for: .handler)
        let dropped = try #require(try dropHost.runChain(dropHost.makeReport(ReportRequest(trigger: .crash)), mode: .recovered))
        #expect(dropped.content.summary == nil)
        #expect(dropped.internalLog.contains { $0.handler == "lazy" && $0.message.contains("1 change(s) made after the method returned were dropped") })
    }

    @Test("H-9: a recovered method still running after 3 s is abandoned: its handle closes and it is logged")
    func recoveredAbandoned() throws {
        let clock = ManualClock()
        let events = EventRecorder()
        let host = try TestHost.make(clock: clock, events: events)
        let release = Gate()
        let wrote = Gate()
        let lateStatus = Locked<ReportError?>(nil)
        host.setHandler(SwiftHandler(name: "slow", before: .completion { report, _, done in
            release.wait()
            do throws(ReportError) { try report.setSummary("after abandon") } catch { lateStatus.withLock { $0 = error } }
            done()
            wrote.release()
        }), for: .handler)
        let run = clock.start { try? host.runChain(host.makeReport(ReportRequest(trigger: .crash)), mode: .recovered) }
        let deadline = events.awaitFinishWait(of: "slow.on_before_report_created")
        #expect(deadline == clock.now().advanced(byMilliseconds: 3_000))
        clock.advance(byMilliseconds: 3_000)
        let document = try #require(run.result() ?? nil)
        release.release()
        #expect(wrote.wait())
        #expect(lateStatus.withLock { $0 } == .closed)
        #expect(document.internalLog.contains { $0.message.contains("slow.on_before_report_created did not return within 3000 ms: abandoned") })
        #expect(document.content.summary == nil)
    }

    @Test("H-10: all calls of a report share one budget; when it is spent the rest are skipped and logged")
    func sharedBudget() throws {
        let clock = ManualClock()
        let events = EventRecorder()
        let host = try TestHost.make(clock: clock, events: events) { $0.limits.callbackTimeoutMs = 40_000 }
        let recorder = Recorder()
        host.setHandler(SwiftHandler(name: "w", before: .completion { _, _, _ in }), for: .wrapper)
        host.setHandler(SwiftHandler(name: "h", before: .completion { _, _, _ in }, after: .completion { _, _, done in
            recorder.record("h.after")
            done()
        }), for: .handler)
        let delegate = RecordingDelegate(recorder)
        host.setDelegate(.weak(delegate))
        let run = clock.start { try? host.raiseDocument(ReportRequest(trigger: .upload)) }
        #expect(events.awaitFinishWait(of: "w.on_before_report_created") == clock.now().advanced(byMilliseconds: 40_000))
        clock.advance(byMilliseconds: 40_000)
        // h.before gets what is left of the 60 s, not its own 40 s.
        let budgetEnd = events.awaitFinishWait(of: "h.on_before_report_created")
        #expect(budgetEnd == clock.now().advanced(byMilliseconds: 20_000))
        clock.advance(byMilliseconds: 20_000)
        let document = try #require(run.result() ?? nil)
        #expect(recorder.all.isEmpty)
        let messages = document.internalLog.map(\.message)
        #expect(messages.contains("h.on_before_report_created did not complete before the report's 60000 ms budget was spent: the report goes on without it; its later changes are ignored"))
        #expect(messages.contains("h.on_after_report_created skipped: the report's 60000 ms budget was spent"))
        #expect(messages.contains("recording-delegate.attachments_for_report skipped: the report's 60000 ms budget was spent"))
        withExtendedLifetime(delegate) {}
    }

    @Test("H-10: time the user spends in the dialog does not count against the budget")
    func dialogTimeDoesNotCount() throws {
        let clock = ManualClock()
        let host = try TestHost.make(clock: clock)
        let recorder = Recorder()
        host.setHandler(.recording("h", into: recorder), for: .handler)
        var request = ReportRequest(trigger: .dialog)
        request.dialog = RecordingDialog(recorder: recorder, decision: nil, spendMs: 600_000, clock: clock)
        let document = try host.raiseDocument(request)
        #expect(recorder.all.contains("h.after"))
        #expect(!document.internalLog.contains { $0.message.contains("budget") })
    }

    @Test("H-11: terminating: the host waits for return only; a method that does not return within the limit is abandoned")
    func terminatingAbandoned() throws {
        let clock = ManualClock()
        let events = EventRecorder()
        let host = try TestHost.make(clock: clock, events: events)
        let release = Gate()
        host.setHandler(SwiftHandler(name: "t", before: .completion { _, terminating, done in
            #expect(terminating)
            done()
        }, after: .completion { _, _, _ in release.wait() }), for: .handler)
        var terminating = ReportRequest(trigger: .logException)
        terminating.isTerminating = true
        let request = terminating
        let run = clock.start { try? host.raiseDocument(request) }
        events.awaitFinishWait(of: "t.on_after_report_created")
        clock.advance(byMilliseconds: 30_000)
        let document = try #require(run.result() ?? nil)
        release.release()
        #expect(document.internalLog.map(\.message) == ["t.on_after_report_created did not return within 30000 ms: abandoned; its later changes are ignored"])
    }
}

/// Waits run on the monotonic clock the deadlines are taken from.
struct MonotonicWaitTests {
    @Test("H-8: a timed wait ends at its monotonic deadline: not at once (a wall-clock reading would put it in 1970), not late")
    func waitsOnTheMonotonicClock() {
        let clock = SystemClock()
        let state = WaitableState(false)
        let start = clock.now()
        let satisfied = state.wait(until: start.advanced(byMilliseconds: 50), clock: clock, for: { $0 }) { _, satisfied in satisfied }
        let waited = clock.now().milliseconds(since: start)
        #expect(!satisfied)
        #expect(waited >= 50 && waited < 5_000, "waited \(waited) ms")
    }
}
