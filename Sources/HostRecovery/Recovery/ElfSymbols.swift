import Symbolize
import HostModel
import HostSupport
import HostPlugins
import HostStore

/// Symbols for one crash's frames from the modules' files on this machine (elfutils' libdw):
/// function names (demangled), DWARF file:line with inlined frames expanded, or the ELF
/// symbol table where there is no DWARF. A module is used only when its file still has the
/// build id the crash recorded; otherwise its frames stay unsymbolicated and `refusals` says
/// why (the report's internal log carries it). Runs at recovery, never in the handler.
final class ElfSymbols: Symbolicating {
    private let handle: OpaquePointer
    /// Outlives the symbolizer that uses it.
    private let cache: SymbolCache?
    /// The crash whose frames these are: which module holds an address.
    private let crash: CrashFile
    /// One line per module whose frames are not symbolicated, and why.
    private(set) var refusals: [String] = []

    /// Why there is no symbolizer (libdw could not be loaded), for the report's note.
    static var unavailable: String { rh_symbolize_load_failure().map { String(cString: $0) } ?? "out of memory" }

    /// Opens the modules that hold any of `crash`'s frames, through `cache` when given (the
    /// files a recovery has opened already are not read again).
    init?(for crash: CrashFile, cache: SymbolCache? = nil) {
        guard let handle = cache.map({ rh_symbolizer_new_cached($0.handle) }) ?? rh_symbolizer_new() else { return nil }
        self.handle = handle
        self.cache = cache
        self.crash = crash
        var seen: Set<String> = []
        for address in crash.crashedStack {
            guard let module = crash.object(containing: address), seen.insert(module.path).inserted else { continue }
            var why = [CChar](repeating: 0, count: 512)
            if !rh_symbolizer_add_module(handle, module.path, module.start, module.buildID ?? "", &why, why.count) {
                // A note sent with the report: the module by its file name.
                let text = String(decoding: why.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                refusals.append(text.replacing(module.path, with: LocalPaths.fileName(module.path)))
            }
        }
    }

    deinit { rh_symbolizer_free(handle) }

    func symbols(at address: UInt64, isReturnAddress: Bool) -> [FrameSymbol] {
        // The same code at another load address in another crash of the same program is
        // looked up once per recovery.
        guard let cache, let module = crash.object(containing: address) else { return lookUp(address, isReturnAddress) }
        let key = SymbolCache.Frame(
            module: module.path, buildID: module.buildID ?? "", offset: address &- module.start, isReturnAddress: isReturnAddress)
        if let known = cache.frames[key] { return known }
        let found = lookUp(address, isReturnAddress)
        cache.frames[key] = found
        return found
    }

    private func lookUp(_ address: UInt64, _ isReturnAddress: Bool) -> [FrameSymbol] {
        var found = [rh_symbol](repeating: rh_symbol(), count: 8)
        let count = Int(rh_symbolizer_lookup(handle, address, isReturnAddress, &found, Int32(found.count)))
        return found.prefix(max(0, min(count, found.count))).compactMap { symbol in
            var symbol = symbol
            let function = String(fixedCBuffer: &symbol.function)
            guard !function.isEmpty else { return nil }
            let file = String(fixedCBuffer: &symbol.file)
            return FrameSymbol(
                function: function, file: file.isEmpty ? nil : file, line: symbol.line > 0 ? Int(symbol.line) : nil,
                inlined: symbol.inlined)
        }
    }
}

/// The module files one recovery opens for symbolication, each read once for all its crash
/// files (a crash loop leaves thousands with the same libraries at other addresses).
/// Freed with the recovery, after every `ElfSymbols` made with it.
///
/// # Thread safety
/// `@unchecked Sendable`: used by one thread at a time, each taking it after the last one's
/// end was waited for (`BatchPipeline`).
final class SymbolCache: @unchecked Sendable {
    let handle: OpaquePointer
    /// Frames found so far, by module file (path and recorded build id) and offset in it.
    var frames: [Frame: [FrameSymbol]] = [:]

    struct Frame: Hashable {
        let module: String
        let buildID: String
        let offset: UInt64
        let isReturnAddress: Bool
    }

    /// How a debug file's compressed DWARF is read (`rh_debug_reading`): into a copy inflated by
    /// libdeflate, or by libelf, every section (the yardstick).
    enum Reading {
        case inflated, byLibelf
    }

    init?(reading: Reading = .inflated) {
        guard let handle = rh_symbol_cache_new() else { return nil }
        self.handle = handle
        rh_symbol_cache_set_reading(handle, reading == .inflated ? RH_DEBUG_INFLATED : RH_DEBUG_AS_LIBELF)
    }

    /// What inflated the last debug file opened: "libdeflate", "libelf", or "".
    var lastInflater: String { String(cString: rh_symbol_cache_last_inflater(handle)) }

    deinit { rh_symbol_cache_free(handle) }
}
