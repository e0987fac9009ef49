import FoundationEssentials
import HostModel
import HostSupport
import HostPlugins
import HostStore

/// A function name and source line for one frame, looked up on this machine at recovery
/// (never in the signal handler).
package struct FrameSymbol: Sendable, Equatable {
    package var function: String
    package var file: String?
    package var line: Int?
    /// Code DWARF says was inlined into the next symbol of the same address.
    package var inlined: Bool

    package init(function: String, file: String? = nil, line: Int? = nil, inlined: Bool = false) {
        self.function = function
        self.file = file
        self.line = line
        self.inlined = inlined
    }
}

/// Looks up frames of one crash: given its modules, the symbols at an address.
package protocol Symbolicating {
    /// Symbols at `address`, innermost first (inlined functions, then the function they were
    /// inlined into); empty when nothing is known. `isReturnAddress` for every frame but the
    /// crashed one: the call's line is the one before the return address.
    func symbols(at address: UInt64, isReturnAddress: Bool) -> [FrameSymbol]
}

extension CrashFile {
    /// The crash payload kept with the record (SPEC report document, `crash`), from which
    /// `show` prints the crash and delivery builds Backtrace's `threads` and modules.
    package func payload(symbols: (any Symbolicating)? = nil) -> JSONValue {
        var fields: [(String, JSONValue)] = [
            ("signal", .int(signal)), ("signal_name", .string(signalName)), ("code", .int(code)),
            ("code_name", .optional(codeName)),
        ]
        if wasSent {
            fields.append(("sender_pid", senderPID.map { .int($0) } ?? .null))
            fields.append(("sender_uid", senderUID.map { .int(Int64($0)) } ?? .null))
            fields.append(("abort", .bool(isAbort)))
        } else {
            fields.append(("address", .string(address)))
        }
        fields += [
            ("thread", .int(thread)), ("time", .int(Int64(time.timeIntervalSince1970))), ("complete", .bool(complete)),
            ("fault_module", .optional(faultModule)),
            ("registers", .object(registers.map { ($0.0, .string($0.1)) })),
            ("threads", .object([(String(thread), .object([
                ("name", .string("crashed")), ("fault", .bool(true)), ("frames", .array(frameList(symbols))),
            ]))])),
            ("main_thread", .string(String(thread))),
            ("modules", .array(modules.map { module in
                .object([("path", .string(module.path)), ("start", .string(Self.hexText(module.start))),
                         ("end", .string(Self.hexText(module.end))), ("build_id", .optional(module.buildID))])
            })),
        ]
        return .object(fields)
    }

    /// The crashed thread's frames, outermost last; an address inside inlined code is one
    /// frame per inlined function, then its caller's.
    private func frameList(_ symbols: (any Symbolicating)?) -> [JSONValue] {
        crashedStack.enumerated().flatMap { index, address -> [JSONValue] in
            var frame: [(String, JSONValue)] = [("address", .string(Self.hexText(address)))]
            if let module = object(containing: address) {
                frame += [("module", .string(module.path)), ("offset", .string(Self.hexText(address - module.start))),
                          ("build_id", .optional(module.buildID))]
            }
            let found = symbols?.symbols(at: address, isReturnAddress: index > 0) ?? []
            guard !found.isEmpty else { return [.object(frame)] }
            return found.map { symbol in
                var named = frame + [("function", .string(symbol.function))]
                if let file = symbol.file { named.append(("file", .string(file))) }
                if let line = symbol.line { named.append(("line", .int(Int64(line)))) }
                if symbol.inlined { named.append(("inlined", .bool(true))) }
                return .object(named)
            }
        }
    }

    /// `"0x" + String(value, radix: 16)`, written in place: a backlog's payloads hold a
    /// hundred of them each.
    package static func hexText(_ value: UInt64) -> String {
        let digits = max(1, (64 - value.leadingZeroBitCount + 3) / 4)
        return String(unsafeUninitializedCapacity: digits + 2) { buffer in
            buffer[0] = UInt8(ascii: "0")
            buffer[1] = UInt8(ascii: "x")
            var rest = value
            for position in stride(from: digits + 1, through: 2, by: -1) {
                let nibble = UInt8(truncatingIfNeeded: rest & 0xF)
                buffer[position] = nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
                rest >>= 4
            }
            return digits + 2
        }
    }
}
