import Glibc
// Plugin authors import only PluginKit; the C types of the entry point come with it.
@_exported import PluginAPI

/// Calls a callback's completion: exactly once, from any thread.
public struct Completion: @unchecked Sendable {
    // @unchecked: a libffi closure made by the host, callable from any thread.
    let function: rh_completion

    public func callAsFunction() { function() }
}

/// A report handler plugin written in Swift. Conform to this, and to any of the callback
/// protocols below (a plugin implementing none is valid: SPEC H-3).
///
/// Swift plugins must be built with the host's Swift toolchain: Swift has no stable binary
/// interface on Linux.
public protocol ReportHandlerPlugin: AnyObject, Sendable {
    /// Required and non-empty: the name the host uses in logs and the internal log.
    var name: String { get }
    var version: String? { get }
    /// Called once, when the host replaces or removes the plugin, or stops. [main-thread]
    func destroy()
}

extension ReportHandlerPlugin {
    public var version: String? { nil }
    public func destroy() {}
}

/// The completion form of `on_before_report_created`: call `completion` exactly once, from
/// any thread. Use this form for changes that must reach recovered and terminating reports.
public protocol BeforeReportHandler: ReportHandlerPlugin {
    func onBeforeReportCreated(_ report: Report, isTerminating: Bool, completion: Completion)
}

/// The completion form of `on_after_report_created`.
public protocol AfterReportHandler: ReportHandlerPlugin {
    func onAfterReportCreated(_ report: Report, isTerminating: Bool, completion: Completion)
}

/// The `async` form of `on_before_report_created`: done when it returns; the kit completes
/// for you.
///
/// To the host an `async` method returns at once, so its changes count only if it finishes
/// before the report is bundled: a recovered report is bundled as soon as the chain's
/// methods have returned, and a terminating one does not wait at all (SPEC H-12). Use the
/// completion form for changes that must reach crash reports.
public protocol AsyncBeforeReportHandler: ReportHandlerPlugin {
    func onBeforeReportCreated(_ report: Report, isTerminating: Bool) async
}

/// The `async` form of `on_after_report_created` (see `AsyncBeforeReportHandler`).
public protocol AsyncAfterReportHandler: ReportHandlerPlugin {
    func onAfterReportCreated(_ report: Report, isTerminating: Bool) async
}

/// Adapts a Swift plugin to the C ABI. Export it with one function:
///
///     @_cdecl("rh_plugin_entry")
///     public func entry(_ host: UnsafePointer<rh_host_api>?) -> UnsafePointer<rh_handler>? {
///         PluginExport.entry(host: host, plugin: MyPlugin())
///     }
public enum PluginExport {
    /// Builds the `rh_handler` for `plugin`. The struct, its strings and the plugin live until
    /// `destroy` (the strings and struct stay allocated: the host may read them until then).
    public static func entry(host: UnsafePointer<rh_host_api>?, plugin: some ReportHandlerPlugin) -> UnsafePointer<rh_handler>? {
        guard let host, host.pointee.abi_major == UInt32(RH_ABI_VERSION_MAJOR), !plugin.name.isEmpty else { return nil }
        let box = PluginBox(host: host, plugin: plugin)
        let handler = UnsafeMutablePointer<rh_handler>.allocate(capacity: 1)
        handler.initialize(to: rh_handler())
        handler.pointee.abi_major = UInt32(RH_ABI_VERSION_MAJOR)
        handler.pointee.abi_minor = UInt32(RH_ABI_VERSION_MINOR)
        handler.pointee.struct_size = UInt32(MemoryLayout<rh_handler>.size)
        handler.pointee.name = UnsafePointer(strdup(plugin.name))
        handler.pointee.version = plugin.version.map { UnsafePointer(strdup($0)) }
        // The plugin's own context pointer: a retained box, released by destroy.
        handler.pointee.context = Unmanaged.passRetained(box).toOpaque()
        if plugin is any BeforeReportHandler || plugin is any AsyncBeforeReportHandler {
            handler.pointee.on_before_report_created = { context, report, terminating, completion in
                PluginBox.from(context).before(report, terminating, completion)
            }
        }
        if plugin is any AfterReportHandler || plugin is any AsyncAfterReportHandler {
            handler.pointee.on_after_report_created = { context, report, terminating, completion in
                PluginBox.from(context).after(report, terminating, completion)
            }
        }
        handler.pointee.destroy = { context in
            guard let context else { return }
            Unmanaged<PluginBox>.fromOpaque(context).takeRetainedValue().plugin.destroy()
        }
        return UnsafePointer(handler)
    }
}

/// Holds a plugin instance behind the `context` pointer.
final class PluginBox: @unchecked Sendable {
    // @unchecked: immutable after init; `plugin` is Sendable and `host` is the host's
    // process-long table.
    let host: UnsafePointer<rh_host_api>
    let plugin: any ReportHandlerPlugin

    init(host: UnsafePointer<rh_host_api>, plugin: any ReportHandlerPlugin) {
        self.host = host
        self.plugin = plugin
    }

    static func from(_ context: UnsafeMutableRawPointer?) -> PluginBox {
        Unmanaged<PluginBox>.fromOpaque(context!).takeUnretainedValue()
    }

    func before(_ handle: OpaquePointer?, _ terminating: Bool, _ completion: rh_completion?) {
        call(handle, completion) { report, done in
            if let plugin = plugin as? any BeforeReportHandler {
                plugin.onBeforeReportCreated(report, isTerminating: terminating, completion: done)
                return nil
            }
            guard let plugin = plugin as? any AsyncBeforeReportHandler else { return nil }
            return { await plugin.onBeforeReportCreated(report, isTerminating: terminating) }
        }
    }

    func after(_ handle: OpaquePointer?, _ terminating: Bool, _ completion: rh_completion?) {
        call(handle, completion) { report, done in
            if let plugin = plugin as? any AfterReportHandler {
                plugin.onAfterReportCreated(report, isTerminating: terminating, completion: done)
                return nil
            }
            guard let plugin = plugin as? any AsyncAfterReportHandler else { return nil }
            return { await plugin.onAfterReportCreated(report, isTerminating: terminating) }
        }
    }

    /// Runs a callback: `body` either calls a completion-form method (and returns nil) or
    /// returns the `async` method to run, after which the kit completes.
    private func call(
        _ handle: OpaquePointer?, _ completion: rh_completion?,
        _ body: (Report, Completion) -> (@Sendable () async -> Void)?
    ) {
        guard let handle, let completion else { return }
        let done = Completion(function: completion)
        if let asyncMethod = body(Report(host: host, handle: handle), done) {
            // On a thread of its own (see `MethodThread`), ended when the method is done.
            let thread = MethodThread.start()
            Task(executorPreference: thread) {
                await asyncMethod()
                done()
                thread?.finish()
            }
        }
    }
}
