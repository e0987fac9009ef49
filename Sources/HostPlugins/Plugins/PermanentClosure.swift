import CFFI
import FoundationEssentials
import HostModel
import HostSupport
import PluginAPI

/// libffi closures that live for the process: the per-host `log` and `set_host_attribute`,
/// and the per-slot `options_json` and `data_folder` (ABI 1.1), whose user data names the host
/// and the slot (`SlotTable.userData`).
enum PermanentClosure {
    enum Function { case log, setHostAttribute, optionsJSON, dataFolder }

    private typealias Trampoline = @convention(c) (
        UnsafeMutablePointer<ffi_cif>?, UnsafeMutableRawPointer?,
        UnsafeMutablePointer<UnsafeMutableRawPointer?>?, UnsafeMutableRawPointer?
    ) -> Void

    private static let logTrampoline: Trampoline = { _, _, args, userData in
        guard let args else { return }
        HostAPITable.log(
            hostID: UInt32(UInt(bitPattern: userData)),
            report: args[0]!.load(as: OpaquePointer?.self),
            level: args[1]!.load(as: Int32.self),
            message: args[2]!.load(as: UnsafePointer<CChar>?.self))
    }

    private static let setHostAttributeTrampoline: Trampoline = { _, result, args, userData in
        guard let args, let result else { return }
        let status = HostAPITable.setHostAttribute(
            hostID: UInt32(UInt(bitPattern: userData)),
            key: args[0]!.load(as: UnsafePointer<CChar>?.self),
            value: args[1]!.load(as: UnsafePointer<CChar>?.self))
        // libffi widens integral results to a full register (ffi_sarg).
        result.assumingMemoryBound(to: Int.self).pointee = Int(status)
    }

    /// `options_json` and `data_folder`: getters with no report, `(char *buf, size_t cap, size_t *len_out)`.
    private static let slotGetterTrampoline: Trampoline = { cif, result, args, userData in
        guard let args, let result else { return }
        let (hostID, slot) = SlotTable.decode(userData)
        let buffer = args[0]!.load(as: UnsafeMutablePointer<CChar>?.self)
        let capacity = args[1]!.load(as: Int.self)
        let length = args[2]!.load(as: UnsafeMutablePointer<Int>?.self)
        let status =
            cif == interfaces?.optionsGetter.pointer
            ? HostAPITable.optionsJSON(hostID: hostID, slot: slot, buffer, capacity, length)
            : HostAPITable.dataFolder(hostID: hostID, slot: slot, buffer, capacity, length)
        result.assumingMemoryBound(to: Int.self).pointee = Int(status)
    }

    /// The call interfaces, prepared once: `void (rh_report *, int32_t, const char *)`,
    /// `int32_t (const char *, const char *)`, and two of `int32_t (char *, size_t, size_t *)`
    /// (one each, so the trampoline tells the getters apart by their interface).
    private static let interfaces:
        (log: SendablePointer<ffi_cif>, set: SendablePointer<ffi_cif>, optionsGetter: SendablePointer<ffi_cif>,
            folderGetter: SendablePointer<ffi_cif>)? = {
        func prepare(_ result: UnsafeMutablePointer<ffi_type>, _ arguments: [UnsafeMutablePointer<ffi_type>])
            -> SendablePointer<ffi_cif>?
        {
            let types = UnsafeMutablePointer<UnsafeMutablePointer<ffi_type>?>.allocate(capacity: arguments.count)
            for (i, type) in arguments.enumerated() { types[i] = type }
            let cif = UnsafeMutablePointer<ffi_cif>.allocate(capacity: 1)
            guard ffi_prep_cif(cif, rh_ffi_default_abi(), UInt32(arguments.count), result, types) == FFI_OK else {
                return nil
            }
            return SendablePointer(pointer: cif)
        }
        let getter: [UnsafeMutablePointer<ffi_type>] = [rh_ffi_type_pointer(), rh_ffi_type_size_t(), rh_ffi_type_pointer()]
        guard let log = prepare(rh_ffi_type_void(), [rh_ffi_type_pointer(), rh_ffi_type_sint32(), rh_ffi_type_pointer()]),
            let set = prepare(rh_ffi_type_sint32(), [rh_ffi_type_pointer(), rh_ffi_type_pointer()]),
            let options = prepare(rh_ffi_type_sint32(), getter), let folder = prepare(rh_ffi_type_sint32(), getter)
        else { return nil }
        return (log, set, options, folder)
    }()

    static func make(_ function: Function, userData: UnsafeMutableRawPointer?, faults: Faults) throws(HostError) -> UnsafeMutableRawPointer {
        guard let interfaces else { throw .runtime("libffi could not prepare the host table's call interfaces") }
        var code: UnsafeMutableRawPointer?
        guard !faults.fails(.closure), let raw = ffi_closure_alloc(MemoryLayout<ffi_closure>.size, &code), let code else {
            throw ClosureAllocation.failure
        }
        let (cif, trampoline) =
            switch function {
            case .log: (interfaces.log.pointer, logTrampoline)
            case .setHostAttribute: (interfaces.set.pointer, setHostAttributeTrampoline)
            case .optionsJSON: (interfaces.optionsGetter.pointer, slotGetterTrampoline)
            case .dataFolder: (interfaces.folderGetter.pointer, slotGetterTrampoline)
            }
        guard ffi_prep_closure_loc(raw.assumingMemoryBound(to: ffi_closure.self), cif, trampoline, userData, code) == FFI_OK
        else { throw .runtime("libffi could not prepare a host-table closure") }
        return code
    }
}

/// The start-up error of systems that forbid writable+executable memory (a plan that fails `.closure`
/// simulates one).
enum ClosureAllocation {
    static let failure = HostError.runtime(
        "libffi cannot allocate closures (ffi_closure_alloc failed): this system forbids writable+executable memory, which plugin completions need")
}
