import CFFI
import PluginAPI
import HostModel
import HostSupport
import HostCapture

/// libffi closures handed to plugins as `rh_completion` or `rh_attachments_decision` (ABI:
/// "Handles and completions"); one pool per host and signature.
///
/// A closure carries no argument, so each is prepared once with its slot number as user
/// data, and the slot says which callback it currently serves. A closure is never freed;
/// it is reused only after its validity window (`limits.completionWindowMs`) has passed
/// since its callback ended *and* the method it was given to returned: a method the host
/// abandoned keeps its closure for as long as it runs, so a completion it calls late is
/// ignored and logged, never taken for another callback's. The number of live closures
/// stays bounded by (callbacks per window) + (methods still running) + 1.
///
/// # Thread safety
/// Behind one `Locked`; the trampoline looks the slot up under it and fires the binding
/// outside it.
package final class ClosurePool: Sendable {
    /// The C signature of a pool's closures.
    package enum Signature: Sendable {
        /// `void (*)(void)`: `rh_completion`.
        case completion
        /// `void (*)(const rh_attachment *, size_t)`: `rh_attachments_decision`.
        case decision
    }

    private struct Slot {
        let code: SendableRawPointer
        var binding: CallbackCompletion?
        /// The host stopped waiting for its callback (`release`).
        var released = false
        /// The method it was given to has returned, or never ran (`methodReturned`).
        var returned = false
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

    package let windowMilliseconds: Int
    package let signature: Signature
    private let clock: any HostClock
    private let poolID: UInt32
    private let faults: Faults
    private let state = Locked(State())

    /// - Parameter windowMilliseconds: how long a closure stays reserved after its callback ends.
    package init(windowMilliseconds: Int, clock: any HostClock, signature: Signature = .completion, faults: Faults = Faults()) {
        self.windowMilliseconds = windowMilliseconds
        self.faults = faults
        self.signature = signature
        self.clock = clock
        self.poolID = ClosurePool.directory.withLock { state in
            state.next += 1
            return state.next
        }
        ClosurePool.directory.withLock { $0.pools[poolID] = self }
    }

    /// A completion closure bound to `binding`; throws when libffi cannot allocate one
    /// (SPEC I-4, exit 1).
    package func acquire(for binding: CallbackCompletion) throws(HostError) -> (slot: Int, code: rh_completion) {
        precondition(signature == .completion)
        let (slot, code) = try acquireRaw(for: binding)
        return (slot, unsafeBitCast(code, to: rh_completion.self))
    }

    /// A decision closure bound to `binding`; its first call hands `binding` the arguments.
    package func acquireDecision(for binding: CallbackCompletion) throws(HostError) -> (slot: Int, code: rh_attachments_decision) {
        precondition(signature == .decision)
        let (slot, code) = try acquireRaw(for: binding)
        return (slot, unsafeBitCast(code, to: rh_attachments_decision.self))
    }

    private func acquireRaw(for binding: CallbackCompletion) throws(HostError) -> (slot: Int, code: UnsafeMutableRawPointer) {
        let now = clock.now()
        return try state.withLock { state -> Result<(slot: Int, code: UnsafeMutableRawPointer), HostError> in
            if state.coolingHead < state.cooling.count, state.cooling[state.coolingHead].reusableAt <= now {
                let slot = state.cooling[state.coolingHead].slot
                state.coolingHead += 1
                if state.coolingHead >= 1024 && state.coolingHead * 2 >= state.cooling.count {
                    state.cooling.removeFirst(state.coolingHead)
                    state.coolingHead = 0
                }
                state.slots[slot].binding = binding
                state.slots[slot].released = false
                state.slots[slot].returned = false
                return .success((slot, state.slots[slot].code.pointer))
            }
            // Allocated under the lock: the slot number is baked into the closure.
            let slot = state.slots.count
            return Self.makeClosure(signature, userData: (UInt64(poolID) << 32) | UInt64(slot + 1), faults: faults).map { code in
                state.slots.append(Slot(code: SendableRawPointer(pointer: code), binding: binding))
                return (slot, code)
            }
        }.get()
    }

    /// The callback behind `slot` has ended: later calls are late. The closure may serve
    /// another callback once its method has returned and the window has passed since.
    package func release(_ slot: Int) {
        let binding = state.withLock { state -> CallbackCompletion? in
            guard slot >= 0 && slot < state.slots.count else { return nil }
            if !state.slots[slot].released {
                state.slots[slot].released = true
                coolIfDone(slot, &state)
            }
            return state.slots[slot].binding
        }
        binding?.close()
    }

    /// The method the closure of `slot` was given to has returned (or will never run).
    package func methodReturned(_ slot: Int) {
        state.withLock { state in
            guard slot >= 0 && slot < state.slots.count, !state.slots[slot].returned else { return }
            state.slots[slot].returned = true
            coolIfDone(slot, &state)
        }
    }

    /// Starts the window of a slot whose callback has ended and whose method has returned.
    private func coolIfDone(_ slot: Int, _ state: inout State) {
        guard state.slots[slot].released && state.slots[slot].returned else { return }
        state.cooling.append(Cooling(slot: slot, reusableAt: clock.now().advanced(byMilliseconds: windowMilliseconds)))
    }

    /// Closures ever allocated by this pool (they are never freed).
    package var allocatedCount: Int { state.withLock { $0.slots.count } }

    // MARK: libffi

    private static let directory = Locked<(next: UInt32, pools: [UInt32: ClosurePool])>((0, [:]))

    private static func fire(userData: UInt64, arguments: UnsafeMutablePointer<UnsafeMutableRawPointer?>?) {
        let poolID = UInt32(truncatingIfNeeded: userData >> 32)
        let slot = Int(truncatingIfNeeded: userData & 0xffff_ffff) - 1
        guard let pool = directory.withLock({ $0.pools[poolID] }) else { return }
        let binding = pool.state.withLock { state in slot < state.slots.count ? state.slots[slot].binding : nil }
        binding?.fire(arguments: arguments)
    }

    /// The call interfaces, prepared once: `void (*)(void)` and `void (*)(const void *, size_t)`.
    private static let interfaces: (completion: SendablePointer<ffi_cif>, decision: SendablePointer<ffi_cif>)? = {
        let completion = UnsafeMutablePointer<ffi_cif>.allocate(capacity: 1)
        guard ffi_prep_cif(completion, rh_ffi_default_abi(), 0, rh_ffi_type_void(), nil) == FFI_OK else { return nil }
        let types = UnsafeMutablePointer<UnsafeMutablePointer<ffi_type>?>.allocate(capacity: 2)
        types[0] = rh_ffi_type_pointer()
        types[1] = rh_ffi_type_size_t()
        let decision = UnsafeMutablePointer<ffi_cif>.allocate(capacity: 1)
        guard ffi_prep_cif(decision, rh_ffi_default_abi(), 2, rh_ffi_type_void(), types) == FFI_OK else { return nil }
        return (SendablePointer(pointer: completion), SendablePointer(pointer: decision))
    }()

    private static func makeClosure(_ signature: Signature, userData: UInt64, faults: Faults) -> Result<UnsafeMutableRawPointer, HostError> {
        guard let interfaces else {
            return .failure(.runtime("libffi could not prepare the completion call interfaces"))
        }
        let cif = signature == .completion ? interfaces.completion.pointer : interfaces.decision.pointer
        var code: UnsafeMutableRawPointer?
        guard !faults.fails(.closure), let raw = ffi_closure_alloc(MemoryLayout<ffi_closure>.size, &code), let code
        else { return .failure(ClosureAllocation.failure) }
        let closure = raw.assumingMemoryBound(to: ffi_closure.self)
        let trampoline: @convention(c) (
            UnsafeMutablePointer<ffi_cif>?, UnsafeMutableRawPointer?,
            UnsafeMutablePointer<UnsafeMutableRawPointer?>?, UnsafeMutableRawPointer?
        ) -> Void = { _, _, arguments, userData in
            ClosurePool.fire(userData: UInt64(UInt(bitPattern: userData)), arguments: arguments)
        }
        let status = ffi_prep_closure_loc(
            closure, cif, trampoline, UnsafeMutableRawPointer(bitPattern: UInt(userData)), code)
        guard status == FFI_OK else {
            return .failure(.runtime("libffi could not prepare a completion closure (status \(status.rawValue))"))
        }
        return .success(code)
    }
}

/// A pointer to memory that is written once before publication and never freed.
struct SendablePointer<T>: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<T>
}

/// The code address of a libffi closure, which is never freed.
struct SendableRawPointer: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer
}
