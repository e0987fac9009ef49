import CFFI
import FoundationEssentials
import Glibc
import PluginAPI
import HostCore
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
    package static let hostVersion = "0.1.0"

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

    // MARK: Report functions

    private static func fillReportFunctions(_ t: UnsafeMutablePointer<rh_host_api>) {
        t.pointee.report_type = { r in
            guard let h = HostAPITable.handle(r) else { return RH_ERR_CLOSED }
            return (try? h.type().rawValue) ?? RH_ERR_CLOSED
        }
        t.pointee.report_trigger = { r in
            guard let h = HostAPITable.handle(r) else { return RH_ERR_CLOSED }
            return (try? h.trigger().rawValue) ?? RH_ERR_CLOSED
        }
        t.pointee.report_id = { r, buf, cap, len in
            guard let h = HostAPITable.handle(r) else { len?.pointee = 0; return RH_ERR_CLOSED }
            return HostAPITable.copyOut({ () throws(ReportError) in try h.reportID() }, buf, cap, len)
        }
        t.pointee.summary = { r, buf, cap, len in
            guard let h = HostAPITable.handle(r) else { len?.pointee = 0; return RH_ERR_CLOSED }
            return HostAPITable.copyOut({ () throws(ReportError) in try h.summary() }, buf, cap, len)
        }
        t.pointee.set_summary = { r, value in HostAPITable.setText(r, value) { h, v throws(ReportError) in try h.setSummary(v) } }
        t.pointee.description = { r, buf, cap, len in
            guard let h = HostAPITable.handle(r) else { len?.pointee = 0; return RH_ERR_CLOSED }
            return HostAPITable.copyOut({ () throws(ReportError) in try h.description() }, buf, cap, len)
        }
        t.pointee.set_description = { r, value in
            HostAPITable.setText(r, value) { h, v throws(ReportError) in try h.setDescription(v) }
        }
        t.pointee.email = { r, buf, cap, len in
            guard let h = HostAPITable.handle(r) else { len?.pointee = 0; return RH_ERR_CLOSED }
            return HostAPITable.copyOut({ () throws(ReportError) in try h.email() }, buf, cap, len)
        }
        t.pointee.set_email = { r, value in HostAPITable.setText(r, value) { h, v throws(ReportError) in try h.setEmail(v) } }
        t.pointee.severity = { r in
            guard let h = HostAPITable.handle(r) else { return RH_ERR_CLOSED }
            do throws(ReportError) { return try h.severity() } catch { return error.rawValue }
        }
        t.pointee.set_severity = { r, value in
            guard let h = HostAPITable.handle(r) else { return RH_ERR_CLOSED }
            return HostAPITable.status { () throws(ReportError) in try h.setSeverity(value) }
        }

        t.pointee.attribute = { r, key, buf, cap, len in
            guard let h = HostAPITable.handle(r) else { len?.pointee = 0; return RH_ERR_CLOSED }
            guard let key = HostAPITable.string(key) else { len?.pointee = 0; return RH_ERR_INVALID }
            return HostAPITable.copyOut({ () throws(ReportError) in try h.attribute(key) }, buf, cap, len)
        }
        t.pointee.set_attribute = { r, key, value in
            guard let h = HostAPITable.handle(r) else { return RH_ERR_CLOSED }
            // Each string is read once.
            let text = HostAPITable.string(value)
            guard let key = HostAPITable.string(key), value == nil || text != nil else {
                return HostAPITable.invalid(h, "set_attribute", "key or value refused")
            }
            return HostAPITable.status { () throws(ReportError) in try h.setAttribute(key, text) }
        }
        t.pointee.remove_attribute = { r, key in
            guard let h = HostAPITable.handle(r) else { return RH_ERR_CLOSED }
            guard let key = HostAPITable.string(key) else { return RH_ERR_INVALID }
            return HostAPITable.status { () throws(ReportError) in try h.removeAttribute(key) }
        }
        t.pointee.clear_attributes = { r in
            guard let h = HostAPITable.handle(r) else { return RH_ERR_CLOSED }
            return HostAPITable.status { () throws(ReportError) in try h.clearAttributes() }
        }
        t.pointee.each_attribute = { r, visit, ctx in
            guard let h = HostAPITable.handle(r) else { return RH_ERR_CLOSED }
            guard let visit else { return RH_ERR_INVALID }
            do throws(ReportError) {
                for (key, value) in try h.attributes() {
                    let goOn = key.withCString { k in value.withCString { v in visit(ctx, k, v) } }
                    if !goOn { break }
                }
                return RH_OK
            } catch {
                return error.rawValue
            }
        }

        t.pointee.set_labels = { r, labels, count in
            guard let h = HostAPITable.handle(r) else { return RH_ERR_CLOSED }
            if let refused = HostAPITable.refuseLabelCount(h, "set_labels", count) { return refused }
            guard let values = HostAPITable.strings(labels, count) else { return HostAPITable.invalid(h, "set_labels", "NULL array refused") }
            HostAPITable.noteDropped(h, "set_labels", values)
            return HostAPITable.status { () throws(ReportError) in try h.setLabels(values) }
        }
        t.pointee.add_label = { r, label in
            guard let h = HostAPITable.handle(r) else { return RH_ERR_CLOSED }
            guard let label = HostAPITable.string(label) else { return HostAPITable.invalid(h, "add_label", "label refused") }
            return HostAPITable.status { () throws(ReportError) in try h.addLabel(label) }
        }
        t.pointee.add_labels = { r, labels, count in
            guard let h = HostAPITable.handle(r) else { return RH_ERR_CLOSED }
            if let refused = HostAPITable.refuseLabelCount(h, "add_labels", count) { return refused }
            guard let values = HostAPITable.strings(labels, count) else { return HostAPITable.invalid(h, "add_labels", "NULL array refused") }
            HostAPITable.noteDropped(h, "add_labels", values)
            return HostAPITable.status { () throws(ReportError) in try h.addLabels(values) }
        }
        t.pointee.remove_label = { r, label in
            guard let h = HostAPITable.handle(r) else { return RH_ERR_CLOSED }
            guard let label = HostAPITable.string(label) else { return RH_ERR_INVALID }
            return HostAPITable.status { () throws(ReportError) in try h.removeLabel(label) }
        }
        t.pointee.clear_labels = { r in
            guard let h = HostAPITable.handle(r) else { return RH_ERR_CLOSED }
            return HostAPITable.status { () throws(ReportError) in try h.clearLabels() }
        }
        t.pointee.has_label = { r, label in
            guard let h = HostAPITable.handle(r), let label = HostAPITable.string(label) else { return false }
            return (try? h.hasLabel(label)) ?? false
        }
        t.pointee.each_label = { r, visit, ctx in
            guard let h = HostAPITable.handle(r) else { return RH_ERR_CLOSED }
            guard let visit else { return RH_ERR_INVALID }
            do throws(ReportError) {
                for label in try h.labels() where !label.withCString({ visit(ctx, $0) }) { break }
                return RH_OK
            } catch {
                return error.rawValue
            }
        }

        t.pointee.each_breadcrumb = { r, visit, ctx in
            guard let h = HostAPITable.handle(r) else { return RH_ERR_CLOSED }
            guard let visit else { return RH_ERR_INVALID }
            do throws(ReportError) {
                for (index, crumb) in try h.breadcrumbs().enumerated() {
                    let goOn = Breadcrumb.timestamp(crumb.timestamp).withCString { stamp in
                        crumb.category.withCString { category in
                            crumb.message.withCString { message in visit(ctx, index, stamp, crumb.level.rawValue, category, message) }
                        }
                    }
                    if !goOn { break }
                }
                return RH_OK
            } catch {
                return error.rawValue
            }
        }
        t.pointee.set_breadcrumb_message = { r, index, text in
            guard let h = HostAPITable.handle(r) else { return RH_ERR_CLOSED }
            guard let message = HostAPITable.string(text) else { return HostAPITable.invalid(h, "set_breadcrumb_message", "message refused") }
            return HostAPITable.status { () throws(ReportError) in try h.setBreadcrumbMessage(Int(clamping: index), message) }
        }
        t.pointee.remove_breadcrumb = { r, index in
            guard let h = HostAPITable.handle(r) else { return RH_ERR_CLOSED }
            return HostAPITable.status { () throws(ReportError) in try h.removeBreadcrumb(Int(clamping: index)) }
        }

        t.pointee.add_attachment = { r, name, filename, data, size in
            guard let h = HostAPITable.handle(r) else { return RH_ERR_CLOSED }
            guard let name = HostAPITable.string(name), filename == nil || HostAPITable.string(filename) != nil,
                data != nil || size == 0
            else { return RH_ERR_INVALID }
            return HostAPITable.status { () throws(ReportError) in
                try h.addAttachment(name: name, filename: HostAPITable.string(filename) ?? name, size: UInt(bitPattern: size)) {
                    data.map { Data(bytes: $0, count: size) } ?? Data()
                }
            }
        }
        t.pointee.attachment_data = { r, name, buf, cap, len in
            len?.pointee = 0
            guard let h = HostAPITable.handle(r) else { return RH_ERR_CLOSED }
            guard let name = HostAPITable.string(name), buf != nil || cap == 0 else { return RH_ERR_INVALID }
            do throws(ReportError) {
                let data = try h.attachmentData(name)
                len?.pointee = data.count
                // A capacity past Int.max (a size_t the plugin meant as "large") is large.
                let capacity = cap < 0 ? Int.max : cap
                if let buf {
                    data.withUnsafeBytes { bytes in
                        if let base = bytes.baseAddress { memcpy(buf, base, min(capacity, bytes.count)) }
                    }
                }
                return capacity < data.count ? RH_ERR_TRUNCATED : RH_OK
            } catch {
                return error.rawValue
            }
        }
        t.pointee.remove_attachment = { r, name in
            guard let h = HostAPITable.handle(r) else { return RH_ERR_CLOSED }
            guard let name = HostAPITable.string(name) else { return RH_ERR_INVALID }
            return HostAPITable.status { () throws(ReportError) in try h.removeAttachment(name) }
        }
        t.pointee.clear_attachments = { r in
            guard let h = HostAPITable.handle(r) else { return RH_ERR_CLOSED }
            return HostAPITable.status { () throws(ReportError) in try h.clearAttachments() }
        }
        t.pointee.each_attachment = { r, visit, ctx in
            guard let h = HostAPITable.handle(r) else { return RH_ERR_CLOSED }
            guard let visit else { return RH_ERR_INVALID }
            do throws(ReportError) {
                for item in try h.attachments() {
                    let goOn = item.name.withCString { n in item.filename.withCString { f in visit(ctx, n, f, item.size) } }
                    if !goOn { break }
                }
                return RH_OK
            } catch {
                return error.rawValue
            }
        }
    }

    private static func setText(
        _ r: OpaquePointer?, _ value: UnsafePointer<CChar>?,
        _ body: (ReportHandle, String?) throws(ReportError) -> Void
    ) -> rh_status {
        guard let h = handle(r) else { return RH_ERR_CLOSED }
        guard value == nil || string(value) != nil else { return invalid(h, "set text field", "value refused") }
        return status { () throws(ReportError) in try body(h, string(value)) }
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
    package static func make(repository: String, plugin name: String) -> String? {
        let plain = name.map { $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) ? $0 : "_" }
        var folderName = String(plain)
        if folderName != name || folderName.allSatisfy({ $0 == "." }) || folderName.isEmpty {
            folderName += "-" + SHA256.hex(Data(name.utf8)).prefix(12)
        }
        let path = repository + "/plugins/" + folderName
        guard case .success = Paths.makeFolder(path) else { return nil }
        return path
    }
}
