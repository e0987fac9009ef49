import CFFI
import PluginAPI

/// libffi closures handed to plugins as `rh_completion` (ABI: "Handles and completions").
///
/// A closure carries no argument, so each is prepared once with its slot number as user
/// data, and the slot says which callback it currently serves. A closure is never freed;
/// it is reused only after its validity window (`limits.completionWindowMs`) has passed
/// since its callback ended, so calls inside the window are ignored and logged, and the
/// number of live closures stays bounded by (callbacks per window) + 1.
///
/// # Thread safety
/// Behind one `Locked`; the trampoline looks the slot up under it and fires the binding
/// outside it.
public final class ClosurePool: Sendable {
    private struct Slot {
        let code: rh_completion
        var binding: CallbackCompletion?
    }

    private struct Cooling {
        var slot: Int
        var reusableAt: HostInstant
    }

    private struct State {
        var slots: [Slot] = []
        /// Released slots in release order; with one window per pool, that is also the order
        /// in which they become reusable.
        var cooling: [Cooling] = []
        var coolingHead = 0
    }

    public let windowMilliseconds: Int
    private let clock: any HostClock
    private let poolID: UInt32
    private let state = Locked(State())

    /// - Parameter windowMilliseconds: how long a closure stays reserved after its callback ends.
    public init(windowMilliseconds: Int, clock: any HostClock) {
        self.windowMilliseconds = windowMilliseconds
        self.clock = clock
        self.poolID = ClosurePool.directory.withLock { state in
            state.next += 1
            return state.next
        }
        ClosurePool.directory.withLock { $0.pools[poolID] = self }
    }

    /// A closure bound to `binding`; throws when libffi cannot allocate one (SPEC I-4, exit 1).
    public func acquire(for binding: CallbackCompletion) throws(HostError) -> (slot: Int, code: rh_completion) {
        let now = clock.now()
        return try state.withLock { state -> Result<(slot: Int, code: rh_completion), HostError> in
            if state.coolingHead < state.cooling.count, state.cooling[state.coolingHead].reusableAt <= now {
                let slot = state.cooling[state.coolingHead].slot
                state.coolingHead += 1
                if state.coolingHead >= 1024 && state.coolingHead * 2 >= state.cooling.count {
                    state.cooling.removeFirst(state.coolingHead)
                    state.coolingHead = 0
                }
                state.slots[slot].binding = binding
                return .success((slot, state.slots[slot].code))
            }
            // Allocated under the lock: the slot number is baked into the closure.
            let slot = state.slots.count
            return Self.makeClosure(userData: (UInt64(poolID) << 32) | UInt64(slot + 1)).map { code in
                state.slots.append(Slot(code: code, binding: binding))
                return (slot, code)
            }
        }.get()
    }

    /// The callback behind `slot` has ended: later calls are late, and the closure may
    /// serve another callback once the window has passed.
    public func release(_ slot: Int) {
        let reusableAt = clock.now().advanced(byMilliseconds: windowMilliseconds)
        let binding = state.withLock { state -> CallbackCompletion? in
            state.cooling.append(Cooling(slot: slot, reusableAt: reusableAt))
            return state.slots[slot].binding
        }
        binding?.close()
    }

    /// Closures ever allocated by this pool (they are never freed).
    public var allocatedCount: Int { state.withLock { $0.slots.count } }

    // MARK: libffi

    private static let directory = Locked<(next: UInt32, pools: [UInt32: ClosurePool])>((0, [:]))

    private static func fire(userData: UInt64) {
        let poolID = UInt32(truncatingIfNeeded: userData >> 32)
        let slot = Int(truncatingIfNeeded: userData & 0xffff_ffff) - 1
        guard let pool = directory.withLock({ $0.pools[poolID] }) else { return }
        let binding = pool.state.withLock { state in slot < state.slots.count ? state.slots[slot].binding : nil }
        binding?.fire()
    }

    /// The call interface of `void (*)(void)`, prepared once for every closure.
    private static let completionInterface: SendablePointer<ffi_cif>? = {
        let cif = UnsafeMutablePointer<ffi_cif>.allocate(capacity: 1)
        guard ffi_prep_cif(cif, rh_ffi_default_abi(), 0, rh_ffi_type_void(), nil) == FFI_OK else { return nil }
        return SendablePointer(pointer: cif)
    }()

    private static func makeClosure(userData: UInt64) -> Result<rh_completion, HostError> {
        guard let cif = completionInterface?.pointer else {
            return .failure(.runtime("libffi could not prepare the completion call interface"))
        }
        var code: UnsafeMutableRawPointer?
        guard ClosureAllocation.isAllowed, let raw = ffi_closure_alloc(MemoryLayout<ffi_closure>.size, &code), let code
        else { return .failure(ClosureAllocation.failure) }
        let closure = raw.assumingMemoryBound(to: ffi_closure.self)
        let trampoline: @convention(c) (
            UnsafeMutablePointer<ffi_cif>?, UnsafeMutableRawPointer?,
            UnsafeMutablePointer<UnsafeMutableRawPointer?>?, UnsafeMutableRawPointer?
        ) -> Void = { _, _, _, userData in
            ClosurePool.fire(userData: UInt64(UInt(bitPattern: userData)))
        }
        let status = ffi_prep_closure_loc(
            closure, cif, trampoline, UnsafeMutableRawPointer(bitPattern: UInt(userData)), code)
        guard status == FFI_OK else {
            return .failure(.runtime("libffi could not prepare a completion closure (status \(status.rawValue))"))
        }
        return .success(unsafeBitCast(code, to: rh_completion.self))
    }
}

/// A pointer to memory that is written once before publication and never freed.
struct SendablePointer<T>: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<T>
}
