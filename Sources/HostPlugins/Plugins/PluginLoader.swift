import FoundationEssentials
import Glibc
import PluginAPI
import HostModel
import HostSupport
import HostCapture

/// Loads plugins with `dlopen(RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)` and validates what
/// their entry returns. Never calls `dlclose`: unloading Swift code crashes the Swift
/// runtime, and RTLD_NODELETE keeps the image even if someone else does.
package enum PluginLoader {
    /// Loads the plugin at `path` into `slot`, handing it `table`. Call on the host's main
    /// thread ([main-thread] entry). `identity`: the file's, when the caller has read it
    /// already (the quarantine check), so it is hashed once.
    static func load(
        path: String, slot: PluginSlot, table: UnsafePointer<rh_host_api>, capture: CrashCapture,
        identity known: PluginIdentity? = nil, system: SystemCalls
    ) throws(PluginLoadError) -> LoadedPlugin {
        let path = Paths.absolute(path)
        func fail(_ reason: PluginLoadError.Reason) -> PluginLoadError { PluginLoadError(path: path, reason: reason) }

        guard system.fileExists(path) else { throw fail(.missingFile) }
        guard system.access(path, R_OK) == 0 else { throw fail(.unreadable) }
        // Registered with the crash writer before it is opened: a crash in its constructors
        // or its entry names it too.
        let identity = known ?? PluginIdentity(path: path, system: system)
        let crashID = capture.registerPlugin(path: identity.realPath, digest: identity.digest)
        // Opened by its real path: the module map then names the file the crash attribution
        // names (a plugin reached through a symbolic link is still recognised as itself).
        let opened = capture.inPlugin(crashID, .load) {
            system.dlopen(identity.realPath, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)
        }
        guard let image = opened else {
            throw fail(.notLoadable(dlerror: dlerror().map { String(cString: $0) } ?? "unknown dlopen error"))
        }
        capture.refreshModules()
        guard let symbol = system.dlsym(image, "rh_plugin_entry") else { throw fail(.noEntry) }
        let entry = unsafeBitCast(symbol, to: rh_plugin_entry_fn.self)
        guard let descriptor = capture.inPlugin(crashID, .entry, { entry(table) }) else {
            throw fail(.entryReturnedNull)
        }

        let handler = try validated(descriptor, name: "rh_handler", path: path)
        guard let namePointer = handler.name, let name = String(validatingCString: namePointer), !name.isEmpty else {
            throw fail(.missingName)
        }
        let version = handler.version.flatMap { String(validatingCString: $0) }

        var delegate: rh_delegate?
        if slot == .delegate {
            guard let pointer = handler.delegate else { throw fail(.missingDelegate) }
            delegate = try validated(pointer, name: "rh_delegate", path: path)
        }
        capture.namePlugin(crashID, name)
        return LoadedPlugin(
            path: path, slot: slot, name: name, version: version, handler: handler, delegate: delegate, identity: identity,
            crashID: crashID, capture: capture)
    }

    /// The host's ABI version.
    package static let hostVersion = (major: UInt32(RH_ABI_VERSION_MAJOR), minor: UInt32(RH_ABI_VERSION_MINOR))

    /// The ABI version a plugin's entry declares, read without validating anything else (the
    /// conformance check of version negotiation); nil when there is no entry or it refuses.
    /// The library is opened and its entry run on `mainExecutor`, as `load` is (a plugin's
    /// constructors may start Foundation, which takes the thread it starts on for the main
    /// thread), for at most `timeoutMs` (an entry that never returns is a load failure, as in
    /// `ReportHost.loadPlugin`).
    package static func declaredVersion(
        path: String, table: UnsafePointer<rh_host_api>, on mainExecutor: any MainExecutor, timeoutMs: Int, system: SystemCalls
    ) throws(HostError) -> (major: UInt32, minor: UInt32)? {
        let path = Paths.absolute(path)
        let table = SendableTable(pointer: table)
        // nil: timed out.
        let declared = mainExecutor.sync(timeoutMilliseconds: timeoutMs) { () -> DeclaredVersion in
            guard let image = system.dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE) else {
                return .notLoadable(dlerror().map { String(cString: $0) } ?? "dlopen failed")
            }
            guard let symbol = system.dlsym(image, "rh_plugin_entry") else { return .noEntry }
            let entry = unsafeBitCast(symbol, to: rh_plugin_entry_fn.self)
            guard let descriptor = entry(table.pointer) else { return .noEntry }
            let header = UnsafeRawPointer(descriptor).bindMemory(to: UInt32.self, capacity: 2)
            return .declared(major: header[0], minor: header[1])
        }
        switch declared {
        case nil: throw .plugin(PluginLoadError(path: path, reason: .entryTimedOut(milliseconds: timeoutMs)))
        case .notLoadable(let reason): throw .plugin(PluginLoadError(path: path, reason: .notLoadable(dlerror: reason)))
        case .noEntry: return nil
        case .declared(let major, let minor): return (major, minor)
        }
    }

    /// What opening a plugin and calling its entry came to.
    private enum DeclaredVersion: Sendable {
        case notLoadable(String)
        /// No entry, or it refused.
        case noEntry
        case declared(major: UInt32, minor: UInt32)
    }

    /// Checks the version header of a plugin struct, then copies it once (ABI: "a reader
    /// never reads past the struct_size it was given").
    private static func validated<T>(_ pointer: UnsafePointer<T>, name: String, path: String) throws(PluginLoadError) -> T {
        let header = UnsafeRawPointer(pointer).bindMemory(to: UInt32.self, capacity: 3)
        let (major, minor, size) = (header[0], header[1], header[2])
        let hostMajor = UInt32(RH_ABI_VERSION_MAJOR)
        let hostMinor = UInt32(RH_ABI_VERSION_MINOR)
        guard major == hostMajor else {
            throw PluginLoadError(path: path, reason: .abiMajorMismatch(plugin: major, host: hostMajor))
        }
        guard minor <= hostMinor else {
            throw PluginLoadError(path: path, reason: .abiMinorNewer(plugin: minor, host: hostMinor))
        }
        // Version 1.0 has no optional tail: the whole struct is required.
        let needed = UInt32(MemoryLayout<T>.size)
        guard size >= needed else {
            throw PluginLoadError(path: path, reason: .structTooSmall(name: name, size: size, needed: needed))
        }
        return pointer.pointee
    }
}

/// A plugin loaded into one slot: a copy of its descriptor, taken once at load.
///
/// # Thread safety
/// `@unchecked Sendable`: the copied structs are never written after load, and the only
/// mutable state (`destroyed`, calls in flight) is behind a `Locked`. The plugin's own
/// pointers are the plugin's to keep valid until `destroy` (ABI).
package final class LoadedPlugin: @unchecked Sendable {
    package let path: String
    package let slot: PluginSlot
    package let name: String
    package let version: String?
    package let identity: PluginIdentity
    let handler: rh_handler
    let delegate: rh_delegate?
    /// The crash writer's id for this plugin (0: not registered).
    let crashID: Int32
    private let capture: CrashCapture
    private let state = Locked((destroyed: false, inFlight: 0))

    init(
        path: String, slot: PluginSlot, name: String, version: String?, handler: rh_handler, delegate: rh_delegate?,
        identity: PluginIdentity, crashID: Int32, capture: CrashCapture
    ) {
        self.path = path
        self.slot = slot
        self.name = name
        self.version = version
        self.handler = handler
        self.delegate = delegate
        self.identity = identity
        self.crashID = crashID
        self.capture = capture
    }

    /// Runs one call into the plugin (`member`), counted, so `destroy` never runs while a
    /// call of it is still running (an abandoned recovered method, say), and marked, so a
    /// crash inside it names the plugin and the member. nil, without calling, once the
    /// plugin is destroyed: a chain that read the slot before the plugin was replaced must
    /// not call into it.
    func call<T>(_ member: PluginCall, _ body: () -> T) -> T? {
        let admitted = state.withLock { state -> Bool in
            guard !state.destroyed else { return false }
            state.inFlight += 1
            return true
        }
        guard admitted else { return nil }
        defer { state.withLock { $0.inFlight -= 1 } }
        return capture.inPlugin(crashID, member, body)
    }

    /// Calls the plugin's `destroy` once; later calls do nothing. Returns false, without
    /// calling it, while a call into the plugin is still running (ABI: destroy runs "after no
    /// callback of it runs"). [main-thread]
    @discardableResult
    package func destroy() -> Bool {
        let outcome: Bool? = state.withLock { state in
            if state.destroyed { return nil }
            if state.inFlight > 0 { return false }
            state.destroyed = true
            return true
        }
        guard let outcome else { return true }
        if outcome, let destroy = handler.destroy {
            capture.inPlugin(crashID, .destroy) { destroy(handler.context) }
        }
        return outcome
    }

    package var isDestroyed: Bool { state.withLock { $0.destroyed } }
}

/// The host table: immutable and valid for the life of the process.
private struct SendableTable: @unchecked Sendable {
    let pointer: UnsafePointer<rh_host_api>
}
