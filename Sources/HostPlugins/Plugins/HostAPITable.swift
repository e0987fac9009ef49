import CFFI
import FoundationEssentials
import Glibc
import PluginAPI
import HostModel
import HostSupport
import HostCapture

/// Builds the `rh_host_api` table a host hands to its plugins (ABI: "Host functions").
///
/// Report functions are plain C functions that find the handle in the process-wide
/// registry. `log` and `set_host_attribute` carry no handle, so each host gets its own
/// pair, made as libffi closures whose user data is the host's id. `options_json` and
/// `data_folder` (ABI 1.1) answer for the slot the table was handed to, so each slot of a
/// host has a table of its own, with its own pair of closures (user data: host and slot).
/// Tables, names and closures are allocated once per host and never freed: a table stays
/// valid for the life of the process.
package enum HostAPITable {
    package static let hostVersion = HostVersion.current

    /// Every table ever made: never freed (a plugin may keep the pointer for the life of the
    /// process), and kept reachable here so a leak checker sees them as intended.
    private static let tables = Locked<[SendablePointer<rh_host_api>]>([])

    /// The tables for host `hostID`, one a slot; throws when libffi cannot make the per-host
    /// functions.
    static func make(hostID: UInt32, faults: Faults) throws(HostError) -> [PluginSlot: UnsafePointer<rh_host_api>] {
        let hostData = UnsafeMutableRawPointer(bitPattern: UInt(hostID))
        let log = unsafeBitCast(
            try PermanentClosure.make(.log, userData: hostData, faults: faults),
            to: (@convention(c) (OpaquePointer?, rh_log_level, UnsafePointer<CChar>?) -> Void).self)
        let setHostAttribute = unsafeBitCast(
            try PermanentClosure.make(.setHostAttribute, userData: hostData, faults: faults),
            to: (@convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> rh_status).self)
        var made: [PluginSlot: UnsafePointer<rh_host_api>] = [:]
        for slot in PluginSlot.allCases {
            let table = UnsafeMutablePointer<rh_host_api>.allocate(capacity: 1)
            tables.withLock { $0.append(SendablePointer(pointer: table)) }
            table.initialize(to: rh_host_api())
            table.pointee.abi_major = UInt32(RH_ABI_VERSION_MAJOR)
            table.pointee.abi_minor = UInt32(RH_ABI_VERSION_MINOR)
            table.pointee.struct_size = UInt32(MemoryLayout<rh_host_api>.size)
            table.pointee.host_name = UnsafePointer(strdup("reporthost"))
            table.pointee.host_version = UnsafePointer(strdup(hostVersion))
            fillReportFunctions(table)
            table.pointee.log = log
            table.pointee.set_host_attribute = setHostAttribute
            let slotData = SlotTable.userData(hostID: hostID, slot: slot)
            typealias Getter = @convention(c) (UnsafeMutablePointer<CChar>?, Int, UnsafeMutablePointer<Int>?) -> rh_status
            table.pointee.options_json = unsafeBitCast(try PermanentClosure.make(.optionsJSON, userData: slotData, faults: faults), to: Getter.self)
            table.pointee.data_folder = unsafeBitCast(try PermanentClosure.make(.dataFolder, userData: slotData, faults: faults), to: Getter.self)
            made[slot] = UnsafePointer(table)
        }
        return made
    }

    // MARK: Per-host functions

    static func log(hostID: UInt32, report: OpaquePointer?, level: Int32, message: UnsafePointer<CChar>?) {
        guard let message else { return }
        // Never more than a text may hold (the log line keeps 4 KiB of it).
        let length = strnlen(message, ReportContent.textMaxBytes)
        let text = String(decoding: UnsafeRawBufferPointer(start: message, count: length), as: UTF8.self)
        let level = LogLevel(rawValue: level) ?? .info
        if let handle = handle(report) {
            handle.log(level, text)
        } else {
            HostDirectory.shared.entry(hostID)?.log.log(level, text, handler: "plugin")
        }
    }

    static func setHostAttribute(hostID: UInt32, key: UnsafePointer<CChar>?, value: UnsafePointer<CChar>?) -> rh_status {
        guard let key = string(key) else { return RH_ERR_INVALID }
        var newValue: String?
        if let value {
            guard let decoded = string(value) else { return RH_ERR_INVALID }
            newValue = decoded
        }
        guard let entry = HostDirectory.shared.entry(hostID) else { return RH_ERR_CLOSED }
        return entry.attributes.set(key, newValue) ? RH_OK : RH_ERR_INVALID
    }

    /// `options_json` (SPEC T-3): the slot's options as JSON text, `{}` when none.
    static func optionsJSON(
        hostID: UInt32, slot: PluginSlot, _ buffer: UnsafeMutablePointer<CChar>?, _ capacity: Int, _ length: UnsafeMutablePointer<Int>?
    ) -> rh_status {
        guard let entry = HostDirectory.shared.entry(hostID) else { return RH_ERR_CLOSED }
        return copyOut({ entry.pluginOptions[slot.rawValue] ?? "{}" }, buffer, capacity, length)
    }

    /// `data_folder` (SPEC T-3): the folder of the plugin in the slot, made on first use.
    static func dataFolder(
        hostID: UInt32, slot: PluginSlot, _ buffer: UnsafeMutablePointer<CChar>?, _ capacity: Int, _ length: UnsafeMutablePointer<Int>?
    ) -> rh_status {
        guard let entry = HostDirectory.shared.entry(hostID) else { return RH_ERR_CLOSED }
        return copyOut({ () throws(ReportError) in
            guard let folder = entry.dataFolder(slot.rawValue) else { throw .notFound }
            return folder
        }, buffer, capacity, length)
    }

    // MARK: Conversions

    static func handle(_ pointer: OpaquePointer?) -> ReportHandle? {
        guard let pointer else { return nil }
        return ReportHandle(rawValue: UInt64(UInt(bitPattern: UnsafeRawPointer(pointer))))
    }

    static func pointer(_ handle: ReportHandle) -> OpaquePointer {
        OpaquePointer(bitPattern: UInt(handle.rawValue))!
    }

    /// A plugin's string, nil for NULL or invalid UTF-8. Read no further than a few bytes past
    /// `ReportContent.textMaxBytes` (up to a character boundary): a longer string is never
    /// copied whole, and the setter still sees it is over the limit, cuts and notes it.
    static func string(_ pointer: UnsafePointer<CChar>?) -> String? {
        guard let pointer else { return nil }
        let limit = ReportContent.textMaxBytes + 4
        let length = strnlen(pointer, limit)
        // Validated in place: no copy before the String's own (none for a short one).
        guard length >= limit else { return String(validatingCString: pointer) }
        let bytes = UnsafeRawBufferPointer(start: pointer, count: length)
        return String(validating: ReportContent.completeCharacters(Array(bytes)), as: UTF8.self)
    }

    static func status(_ body: () throws(ReportError) -> Void) -> rh_status {
        do {
            try body()
            return RH_OK
        } catch {
            return error.rawValue
        }
    }

    /// Notes a refused argument in the report's internal log and answers RH_ERR_INVALID.
    static func invalid(_ handle: ReportHandle, _ operation: String, _ what: String) -> rh_status {
        handle.noteInvalid(operation, what)
        return RH_ERR_INVALID
    }

    /// A label count past what a report holds, refused before the array is read (a count is
    /// outside input: mapping 2^40 elements would end the host; a `size_t` past `Int.max`
    /// arrives negative); nil when it may be read.
    static func refuseLabelCount(_ handle: ReportHandle, _ operation: String, _ count: Int) -> rh_status? {
        guard count < 0 || count > ReportContent.labelsMax else { return nil }
        handle.note(.countRefused(operation, "labels", limit: ReportContent.labelsMax), during: operation)
        return RH_ERR_INVALID
    }

    /// Notes label elements that were dropped (R-5 keeps the rest).
    static func noteDropped(_ handle: ReportHandle, _ operation: String, _ values: [String?]) {
        let dropped = values.filter { $0 == nil }.count
        if dropped > 0 { handle.noteInvalid(operation, "\(dropped) element(s) dropped") }
    }

    /// snprintf-style copy-out (ABI: string getters).
    static func copyOut(
        _ body: () throws(ReportError) -> String, _ buffer: UnsafeMutablePointer<CChar>?, _ capacity: Int,
        _ lengthOut: UnsafeMutablePointer<Int>?
    ) -> rh_status {
        lengthOut?.pointee = 0
        guard buffer != nil || capacity == 0 else { return RH_ERR_INVALID }
        do {
            let value = try body()
            return value.utf8CString.withUnsafeBufferPointer { bytes in
                let length = bytes.count - 1
                lengthOut?.pointee = length
                if let buffer, capacity > 0 {
                    let copied = min(length, capacity - 1)
                    memcpy(buffer, bytes.baseAddress!, copied)
                    buffer[copied] = 0
                }
                return capacity <= length ? RH_ERR_TRUNCATED : RH_OK
            }
        } catch {
            return error.rawValue
        }
    }

    /// The strings of a C array; NULL elements and invalid UTF-8 become nil (dropped later).
    static func strings(_ array: UnsafePointer<UnsafePointer<CChar>?>?, _ count: Int) -> [String?]? {
        guard count > 0 else { return [] }
        guard let array else { return nil }
        return (0..<count).map { string(array[$0]) }
    }
}

/// The user data of a slot's closures: the host's id and the slot, in one word.
enum SlotTable {
    static func userData(hostID: UInt32, slot: PluginSlot) -> UnsafeMutableRawPointer? {
        let index = UInt(PluginSlot.allCases.firstIndex(of: slot) ?? 0)
        return UnsafeMutableRawPointer(bitPattern: UInt(hostID) << 2 | index | 1 << 48)
    }

    static func decode(_ userData: UnsafeMutableRawPointer?) -> (hostID: UInt32, slot: PluginSlot) {
        let word = UInt(bitPattern: userData) & ~(1 << 48)
        return (UInt32(truncatingIfNeeded: word >> 2), PluginSlot.allCases[Int(word & 3) % PluginSlot.allCases.count])
    }
}

/// A plugin's own folder in the repository (`data_folder`, SPEC T-3):
/// `<repository>/plugins/<name>`, 0700, made on first use. A name that is not a plain file
/// name (a slash, a dot alone, other characters) is written with those characters as `_` and
/// a digest of the whole name after it, so two names never share a folder.
package enum PluginDataFolder {
    package static func make(repository: String, plugin name: String, system: SystemCalls) -> String? {
        let plain = name.map { $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) ? $0 : "_" }
        var folderName = String(plain)
        if folderName != name || folderName.allSatisfy({ $0 == "." }) || folderName.isEmpty {
            folderName += "-" + SHA256.hex(Data(name.utf8)).prefix(12)
        }
        let path = repository + "/plugins/" + folderName
        guard case .success = Paths.makeFolder(path, system: system) else { return nil }
        return path
    }
}
