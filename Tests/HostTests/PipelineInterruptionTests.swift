import Dispatch
import Foundation
import Host
import HostPlugins
import HostSupport
import HostTestSupport
import Testing

/// The pipeline (continued): async handlers and interrupted chains.
extension PipelineTests {
    @Test("H-4: an async Swift handler runs on a thread of its own, never the cooperative pool a program may have filled with blocking work")
    func asyncHandlerThread() async throws {
        let host = try TestHost.make()
        let thread = Locked<String?>(nil)
        host.setHandler(SwiftHandler(name: "async", before: .async { report, _ in
            // The kernel's name of the running thread (at most 15 bytes and a newline).
            var name = [UInt8](repeating: 0, count: 32)
            let fd = open("/proc/thread-self/comm", O_RDONLY)
            let count = fd < 0 ? 0 : name.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if fd >= 0 { close(fd) }
            let text = String(decoding: name.prefix(max(0, count)), as: UTF8.self).trimmingCharacters(in: .newlines)
            thread.withLock { $0 = text }
            try? report.setSummary("set by async")
        }), for: .handler)
        let document = try await offPool { try host.raiseDocument(ReportRequest(trigger: .upload)) }
        #expect(document.content.summary == "set by async")
        // A pool thread would carry the pool's name (or none), never this one.
        #expect(thread.withLock { $0 } == "rh-async")
    }

    @Test("H-12: an async handler on a recovered report counts only if it finishes before bundling")
    func asyncRecovered() async throws {
        let host = try TestHost.make()
        let resume = Gate()
        let finished = Gate()
        host.setHandler(SwiftHandler(name: "async", before: .async { report, _ in
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                Thread.detachNewThread {
                    resume.wait()
                    continuation.resume()
                }
            }
            try? report.setSummary("after bundling")
            finished.release()
        }), for: .handler)
        let document = try #require(try await offPool { try host.runChain(host.makeReport(ReportRequest(trigger: .crash)), mode: .recovered) })
        resume.release()
        #expect(try await offPool { finished.wait() })
        #expect(document.content.summary == nil)

        // Finishing before bundling counts: the next step waits until the host completed it.
        let events = EventRecorder()
        let quick = try TestHost.make(events: events)
        quick.setHandler(SwiftHandler(name: "async", before: .async { report, _ in
            try? report.setSummary("in time")
        }, after: .completion { _, _, done in
            events.awaitCompletion(of: "async.on_before_report_created")
            done()
        }), for: .handler)
        let inTime = try #require(try await offPool { try quick.runChain(quick.makeReport(ReportRequest(trigger: .crash)), mode: .recovered) })
        #expect(inTime.content.summary == "in time")
    }

    @Test("H-15, H-5: a dialog report interrupted before its dialog was never sent: no document, the dialog is not shown")
    func interruptedBeforeDialog() throws {
        let events = EventRecorder()
        let host = try TestHost.make(events: events)
        let recorder = Recorder()
        host.setHandler(SwiftHandler(name: "stuck", before: .completion { _, _, _ in }), for: .handler)
        var request = ReportRequest(trigger: .dialog)
        request.dialog = RecordingDialog(recorder: recorder, decision: nil, spendMs: 0, clock: nil)
        let dialogRequest = request
        let run = ManualClock().start { (try? host.raise(dialogRequest)) ?? nil }
        events.awaitReturn(of: "stuck.on_before_report_created")
        host.interrupt()
        #expect(run.result() == .some(nil))
        #expect(recorder.all.isEmpty)
    }

    @Test("H-15: an interruption during the chain skips the remaining calls, logs them, and bundles")
    func interruption() throws {
        let events = EventRecorder()
        let host = try TestHost.make(events: events)
        let recorder = Recorder()
        host.setHandler(SwiftHandler(name: "stuck", before: .completion { report, _, _ in try? report.setSummary("kept") }), for: .wrapper)
        host.setHandler(.recording("h", into: recorder), for: .handler)
        let run = ManualClock().start { try? host.raiseDocument(ReportRequest(trigger: .upload)) }
        events.awaitReturn(of: "stuck.on_before_report_created")
        host.interrupt()
        let document = try #require(run.result() ?? nil)
        #expect(recorder.all.isEmpty)
        #expect(document.content.summary == "kept")
        let messages = document.internalLog.map(\.message)
        #expect(messages.contains("stuck.on_before_report_created skipped: the host is stopping"))
        #expect(messages.contains("h.on_before_report_created skipped: the host is stopping"))
        #expect(messages.contains("h.on_after_report_created skipped: the host is stopping"))
    }
}
