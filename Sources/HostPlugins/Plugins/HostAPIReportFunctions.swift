import CFFI
import FoundationEssentials
import Glibc
import PluginAPI
import HostModel
import HostSupport
import HostCapture

// The report functions of the `rh_host_api` table: plain C functions that find the handle in
// the process-wide registry.
extension HostAPITable {
    // MARK: Report functions

    static func fillReportFunctions(_ t: UnsafeMutablePointer<rh_host_api>) {
        fillTextFunctions(t)
        fillAttributeFunctions(t)
        fillLabelFunctions(t)
        fillBreadcrumbFunctions(t)
        fillAttachmentFunctions(t)
    }

    /// The text fields, type, trigger, id and severity.
    private static func fillTextFunctions(_ t: UnsafeMutablePointer<rh_host_api>) {
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
    }

    /// The attributes.
    private static func fillAttributeFunctions(_ t: UnsafeMutablePointer<rh_host_api>) {
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
    }

    /// The labels.
    private static func fillLabelFunctions(_ t: UnsafeMutablePointer<rh_host_api>) {
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
    }

    /// The breadcrumbs.
    private static func fillBreadcrumbFunctions(_ t: UnsafeMutablePointer<rh_host_api>) {
        t.pointee.each_breadcrumb = { r, visit, ctx in
            guard let h = HostAPITable.handle(r) else { return RH_ERR_CLOSED }
            guard let visit else { return RH_ERR_INVALID }
            do throws(ReportError) {
                try h.breadcrumbs().visitCStrings { index, stamp, level, category, message in
                    visit(ctx, index, stamp, level.rawValue, category, message)
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
    }

    /// The attachments.
    private static func fillAttachmentFunctions(_ t: UnsafeMutablePointer<rh_host_api>) {
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
