import PluginAPI
import HostModel
import HostSupport
import HostCapture

/// Which callback of a handler runs.
package enum HandlerStep: String, Sendable {
    case before, after
}

/// The two handler slots (SPEC H-1): the wrapper's runs first in every step.
package enum HandlerSlot: String, Sendable, CaseIterable {
    case wrapper, handler

    var pluginSlot: PluginSlot {
        switch self {
        case .wrapper: .wrapper
        case .handler: .handler
        }
    }

    func source(_ step: HandlerStep) -> AttachmentSource {
        switch (self, step) {
        case (.wrapper, .before): .wrapperBefore
        case (.wrapper, .after): .wrapperAfter
        case (.handler, .before): .handlerBefore
        case (.handler, .after): .handlerAfter
        }
    }
}

/// An in-process Swift handler (SPEC H-4): each callback optional, in the completion form
/// (call `completion` exactly once, from any thread) or the `async` form (done when it
/// returns; the host completes for it).
package struct SwiftHandler: Sendable {
    package enum Callback: Sendable {
        case completion(@Sendable (_ report: ReportHandle, _ isTerminating: Bool, _ completion: @escaping @Sendable () -> Void) -> Void)
        case async(@Sendable (_ report: ReportHandle, _ isTerminating: Bool) async -> Void)
    }

    package var name: String
    package var before: Callback?
    package var after: Callback?
    package var destroy: (@Sendable () -> Void)?

    package init(name: String, before: Callback? = nil, after: Callback? = nil, destroy: (@Sendable () -> Void)? = nil) {
        self.name = name
        self.before = before
        self.after = after
        self.destroy = destroy
    }
}

/// What sits in a handler slot: a loaded plugin or an in-process Swift handler. The host
/// holds it strongly until it is replaced or removed (SPEC H-1).
package enum Handler: Sendable {
    case plugin(LoadedPlugin)
    case swift(SwiftHandler)

    package var name: String {
        switch self {
        case .plugin(let plugin): plugin.name
        case .swift(let handler): handler.name
        }
    }

    /// The ABI minor the handler was built for (an in-process Swift handler: the host's).
    var declaredMinor: UInt32 {
        switch self {
        case .plugin(let plugin): plugin.handler.abi_minor
        case .swift: UInt32(RH_ABI_VERSION_MINOR)
        }
    }

    func implements(_ step: HandlerStep) -> Bool {
        switch (self, step) {
        case (.plugin(let p), .before): p.handler.on_before_report_created != nil
        case (.plugin(let p), .after): p.handler.on_after_report_created != nil
        case (.swift(let h), .before): h.before != nil
        case (.swift(let h), .after): h.after != nil
        }
    }

    /// Calls the step's callback on the current thread. `completion` is the libffi
    /// closure for plugins; Swift handlers get `swiftCompletion`. False when the callback
    /// was not called: the plugin was destroyed (replaced) after the chain read its slot.
    func invoke(
        _ step: HandlerStep, handle: ReportHandle, isTerminating: Bool, completion: rh_completion?,
        swiftCompletion: @escaping @Sendable () -> Void, capture: CrashCapture
    ) -> Bool {
        switch self {
        case .plugin(let plugin):
            let callback = step == .before ? plugin.handler.on_before_report_created : plugin.handler.on_after_report_created
            let member: PluginCall = step == .before ? .before : .after
            return plugin.call(member) {
                callback?(plugin.handler.context, HostAPITable.pointer(handle), isTerminating, completion)
            } != nil
        case .swift(let handler):
            switch step == .before ? handler.before : handler.after {
            case .completion(let body): body(handle, isTerminating, swiftCompletion)
            case .async(let body):
                // On a thread of its own (ended with the task, when its executor is released),
                // never the cooperative pool: a program may have filled that with blocking
                // work, and the method would miss its limit through no fault of its own. One
                // per call, as for recovered callbacks: a method that blocks keeps only its own
                // thread, and one that raises a report cannot wait on itself.
                Task(executorPreference: ThreadExecutor(name: "rh-async")) {
                    // Give the thread an alternate stack, so a stack overflow in the method is
                    // still captured (after an `await` elsewhere it resumes here again).
                    capture.prepareThread()
                    await body(handle, isTerminating)
                    swiftCompletion()
                }
            case nil: break
            }
            return true
        }
    }

    /// Releases the handler: a plugin's `destroy` (once), a Swift handler's `destroy`.
    /// False when a plugin call is still running, so `destroy` was not called.
    func destroy() -> Bool {
        switch self {
        case .plugin(let plugin): return plugin.destroy()
        case .swift(let handler):
            handler.destroy?()
            return true
        }
    }

    /// Whether `step` is an `async` Swift method: it "returns" as soon as it starts.
    func isAsync(_ step: HandlerStep) -> Bool {
        guard case .swift(let handler) = self, case .async? = (step == .before ? handler.before : handler.after) else { return false }
        return true
    }

    var needsClosure: Bool { if case .plugin = self { true } else { false } }
}
