import Dispatch
import Foundation
import Host
import HostPlugins
import HostSupport

/// Builds hosts for tests: each with its own serial queue standing in for the main thread
/// (test runners keep the real one), its own clock and an in-memory log.
package enum TestHost {
    package static func make(
        clock: any HostClock = SystemClock(), log: MemoryDestination = MemoryDestination(),
        events: EventRecorder? = nil, mainExecutor: ThreadExecutor? = nil, _ configure: (inout Configuration) -> Void = { _ in }
    ) throws -> ReportHost {
        var configuration = Configuration()
        configure(&configuration)
        return try ReportHost(
            configuration: configuration, logger: HostLogger(destinations: [log]), clock: clock,
            mainExecutor: mainExecutor ?? ThreadExecutor(name: "test-main"), observer: events?.observer)
    }
}

/// Records pipeline events and lets a test wait for one.
///
/// # Thread safety
/// Events are a `WaitableState`.
package final class EventRecorder: Sendable {
    private let events = WaitableState<[PipelineEvent]>([])

    package init() {}

    package var observer: PipelineObserver { { [events] event in events.update { $0.append(event) } } }

    /// The rule events so far (`PipelineEvent.broke`), in order, with the handler each names.
    package var ruleEvents: [(handler: String, event: RuleEvent)] {
        events.read { events in
            events.compactMap { event in
                if case .broke(let handler, let rule) = event { (handler, rule) } else { nil }
            }
        }
    }

    /// Blocks until the host waits for `callback` to finish; returns that wait's deadline.
    @discardableResult
    package func awaitFinishWait(of callback: String) -> HostInstant {
        events.wait(until: nil, clock: SystemClock(), for: { $0.contains { Self.finishDeadline($0, callback) != nil } }) { events, _ in
            events.lazy.compactMap { Self.finishDeadline($0, callback) }.first!
        }
    }

    /// Blocks until `callback`'s method has returned.
    package func awaitReturn(of callback: String) {
        events.wait(until: nil, clock: SystemClock(), for: { $0.contains(.returned(call: callback)) }, then: { _, _ in })
    }

    /// Blocks until `callback`'s completion has been called.
    package func awaitCompletion(of callback: String) {
        events.wait(until: nil, clock: SystemClock(), for: { $0.contains(.completed(call: callback)) }, then: { _, _ in })
    }

    /// Blocks until `callback` is queued for the `occurrence`th time; returns the deadline for
    /// it to start.
    @discardableResult
    package func awaitStartWait(of callback: String, occurrence: Int = 1) -> HostInstant {
        events.wait(
            until: nil, clock: SystemClock(), for: { $0.lazy.compactMap { Self.startDeadline($0, callback) }.count >= occurrence }
        ) { events, _ in
            Array(events.lazy.compactMap { Self.startDeadline($0, callback) })[occurrence - 1]
        }
    }

    private static func startDeadline(_ event: PipelineEvent, _ callback: String) -> HostInstant? {
        if case .awaitingStart(callback, let deadline) = event { deadline } else { nil }
    }

    private static func finishDeadline(_ event: PipelineEvent, _ callback: String) -> HostInstant? {
        if case .awaitingFinish(callback, let deadline) = event { deadline } else { nil }
    }
}

/// The C prelude every fixture plugin starts with.
package let fixturePrelude = """
    #include <reporthost/plugin.h>
    #include <pthread.h>
    #include <stdio.h>
    #include <stdlib.h>
    #include <string.h>
    static const rh_host_api *host;

    """

/// A fixture plugin whose entry returns a handler named `name` with the given callbacks
/// (C function names, or NULL).
package func fixtureHandler(
    name: String = "fixture", before: String = "NULL", after: String = "NULL", destroy: String = "NULL",
    extra: String = ""
) -> String {
    """
    \(fixturePrelude)
    \(extra)
    static rh_handler handler;
    const rh_handler *rh_plugin_entry(const rh_host_api *h) {
        host = h;
        handler.abi_major = RH_ABI_VERSION_MAJOR;
        handler.abi_minor = RH_ABI_VERSION_MINOR;
        handler.struct_size = sizeof handler;
        handler.name = "\(name)";
        handler.version = "1.0";
        handler.on_before_report_created = \(before);
        handler.on_after_report_created = \(after);
        handler.destroy = \(destroy);
        return &handler;
    }
    """
}

extension ReportHost {
    package struct Cancelled: Error {}

    /// `raise`, for reports that cannot be cancelled: a nil document is an error.
    package func raiseDocument(_ request: ReportRequest) throws -> ReportDocument {
        guard let document = try raise(request) else { throw Cancelled() }
        return document
    }
}

extension HostError {
    /// Whether this is a configuration error (the CLI exits 2 for it).
    package var isConfiguration: Bool {
        if case .configuration = self { true } else { false }
    }
}

/// A C handler that marks every report it sees (`changed.by` = `marker`): proof that a
/// report went through the chain.
package let markerHandler = fixtureHandler(
    name: "marker", before: "on_before",
    extra: """
        static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
            (void)c; (void)t;
            host->set_attribute(r, "changed.by", "marker");
            done();
        }
        """)
