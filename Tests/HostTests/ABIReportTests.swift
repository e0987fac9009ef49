import Foundation
import Host
import HostPlugins
import HostTestSupport
import PluginAPI
import Testing

/// The host table, for tasks: it is immutable and valid for the life of the process.
struct SendableTable: @unchecked Sendable {
    let pointer: UnsafePointer<rh_host_api>
    init(_ pointer: UnsafePointer<rh_host_api>) { self.pointer = pointer }
    var api: rh_host_api { pointer.pointee }
}

func cString(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// The live report's rules (SPEC R) through the very functions a plugin calls: the host
/// table's C function pointers, with handles opened the way a callback gets them.
@Suite struct ABIReportTests {
    let host: ReportHost
    let api: rh_host_api
    let report: LiveReport

    init() throws {
        host = try TestHost.make()
        api = host.hostAPI().pointee
        report = LiveReport(trigger: .upload, createdAt: Date(), hostID: host.hostID, hostLog: host.logger)
    }

    func openHandle(_ handler: String = "probe", source: AttachmentSource = .handlerBefore, key: String = "handler.before")
        -> OpaquePointer
    {
        let handle = report.openHandle(for: Contributor(handler: handler, slot: "handler", step: source.rawValue, source: source, budgetKey: key))
        return OpaquePointer(bitPattern: UInt(handle.rawValue))!
    }

    func handle(_ r: OpaquePointer) -> ReportHandle { ReportHandle(rawValue: UInt64(UInt(bitPattern: UnsafeRawPointer(r)))) }

    typealias Getter = @convention(c) (OpaquePointer?, UnsafeMutablePointer<CChar>?, Int, UnsafeMutablePointer<Int>?) -> rh_status

    func get(_ getter: Getter?, _ r: OpaquePointer) -> (status: rh_status, value: String?) {
        var buffer = [CChar](repeating: 0, count: 4096)
        var length = 0
        let status = getter!(r, &buffer, buffer.count, &length)
        return (status, status == RH_OK ? cString(buffer) : nil)
    }

    func labels(_ r: OpaquePointer) -> [String] { (try? handle(r).labels()) ?? [] }

    // MARK

    @Test("R-1: what a handler sets is what the bundled report holds, from any thread")
    func liveFromAnyThread() async throws {
        let r = openHandle()
        let table = SendableTable(host.hostAPI())
        let rBits = UInt(bitPattern: UnsafeRawPointer(r))
        await withTaskGroup(of: Void.self) { group in
            for i in 0..<8 {
                group.addTask {
                    let api = table.api
                    let r = OpaquePointer(bitPattern: rBits)!
                    #expect(api.set_attribute(r, "thread.\(i)", "v\(i)") == RH_OK)
                    #expect(api.add_label(r, "t\(i)") == RH_OK)
                }
            }
        }
        #expect(api.set_summary(r, "changed") == RH_OK)
        let document = report.bundle()
        #expect(document.content.summary == "changed")
        #expect((0..<8).allSatisfy { document.content.attributes["thread.\($0)"] == "v\($0)" })
        #expect(Set(document.content.labels) == Set((0..<8).map { "t\($0)" }))
    }

    @Test("R-2: report_id is a lowercase UUID; type and trigger are read-only and the trigger decides the type")
    func identityFields() throws {
        let r = openHandle()
        let (status, id) = get(api.report_id, r)
        #expect(status == RH_OK)
        #expect(id == report.id)
        #expect(id == id?.lowercased())
        #expect(UUID(uuidString: id ?? "") != nil)
        #expect(api.report_type(r) == RH_REPORT_BUG)
        #expect(api.report_trigger(r) == RH_TRIGGER_UPLOAD)
        let expected: [(Trigger, ReportType, String)] = [
            (.dialog, .bug, "dialog"), (.upload, .bug, "upload"), (.logError, .error, "log_error"),
            (.logException, .error, "log_exception"), (.crash, .crash, "crash"), (.abnormalExit, .crash, "abnormal_exit"),
            (.appHang, .error, "app_hang"),
        ]
        for (trigger, type, name) in expected {
            #expect(trigger.type == type)
            #expect(trigger.name == name)
        }
        #expect(Trigger.allCases.count == expected.count)
    }

    @Test("R-2: string getters follow the snprintf contract: length, truncation, absent and empty")
    func getterBufferContract() {
        let r = openHandle()
        var length = -1
        // Absent field: NOT_FOUND, length 0.
        #expect(api.summary(r, nil, 0, &length) == RH_ERR_NOT_FOUND)
        #expect(length == 0)
        _ = api.set_summary(r, "hello world")
        // Measuring call: NULL buffer, cap 0.
        #expect(api.summary(r, nil, 0, &length) == RH_ERR_TRUNCATED)
        #expect(length == 11)
        // Too small: truncated and NUL-terminated.
        var small = [CChar](repeating: 65, count: 6)
        #expect(api.summary(r, &small, small.count, &length) == RH_ERR_TRUNCATED)
        #expect(cString(small) == "hello")
        #expect(length == 11)
        // cap == length is still too small (room for the NUL).
        var exact = [CChar](repeating: 65, count: 11)
        #expect(api.summary(r, &exact, exact.count, nil) == RH_ERR_TRUNCATED)
        var fits = [CChar](repeating: 65, count: 12)
        #expect(api.summary(r, &fits, fits.count, &length) == RH_OK)
        #expect(cString(fits) == "hello world")
        // Empty is present: OK with "".
        _ = api.set_email(r, "")
        #expect(get(api.email, r) == (RH_OK, ""))
        // NULL buffer with a capacity is invalid.
        #expect(api.summary(r, nil, 4, &length) == RH_ERR_INVALID)
        // NULL clears.
        #expect(api.set_summary(r, nil) == RH_OK)
        #expect(get(api.summary, r).status == RH_ERR_NOT_FOUND)
    }

    @Test("R-2: invalid UTF-8 is refused with RH_ERR_INVALID and changes nothing")
    func invalidUTF8() {
        let r = openHandle()
        _ = api.set_summary(r, "kept")
        let bad: [CChar] = [CChar(bitPattern: 0xC3), CChar(bitPattern: 0x28), 0]
        #expect(api.set_summary(r, bad) == RH_ERR_INVALID)
        #expect(api.set_attribute(r, "k", bad) == RH_ERR_INVALID)
        #expect(api.set_attribute(r, nil, "v") == RH_ERR_INVALID)
        #expect(get(api.summary, r).value == "kept")
    }

    // MARK: R-3

    @Test("R-3: severity reads 0 while none; values outside 1-5 are ignored, logged, and the current one kept")
    func severityRule() {
        let r = openHandle( "sev-plugin")
        #expect(api.severity(r) == 0)
        #expect(api.set_severity(r, 4) == RH_OK)
        for bad: Int32 in [0, 6, -1, 100] {
            #expect(api.set_severity(r, bad) == RH_ERR_RANGE)
            #expect(api.severity(r) == 4)
        }
        let notes = report.internalLog.filter { $0.message.contains("severity") }
        #expect(notes.count == 4)
        #expect(notes.allSatisfy { $0.handler == "sev-plugin" && $0.level == .warn })
        #expect(notes.first?.message.contains("severity 0 ignored") == true)
    }

    // MARK: R-4

    @Test("R-4: attributes get, set, remove and clear; a NULL value removes; reading gives a snapshot")
    func attributeRule() {
        let r = openHandle()
        #expect(api.set_attribute(r, "a", "1") == RH_OK)
        #expect(api.set_attribute(r, "b", "2") == RH_OK)
        var buffer = [CChar](repeating: 0, count: 16)
        #expect(api.attribute(r, "a", &buffer, 16, nil) == RH_OK)
        #expect(cString(buffer) == "1")
        #expect(api.attribute(r, "zz", &buffer, 16, nil) == RH_ERR_NOT_FOUND)
        #expect(api.set_attribute(r, "a", nil) == RH_OK)
        #expect(api.set_attribute(r, "never-there", nil) == RH_OK)
        #expect(api.remove_attribute(r, "a") == RH_ERR_NOT_FOUND)
        #expect(api.remove_attribute(r, "b") == RH_OK)
        _ = api.set_attribute(r, "c", "3")
        _ = api.set_attribute(r, "d", "4")
        // The visitor adds a key while visiting: it sees the snapshot only, and the host holds
        // no lock (no deadlock).
        final class Seen { var keys: [String] = []; var api: rh_host_api; var r: OpaquePointer
            init(api: rh_host_api, r: OpaquePointer) { self.api = api; self.r = r } }
        let seen = Seen(api: api, r: r)
        let status = api.each_attribute(r, { ctx, key, _ in
            let seen = Unmanaged<Seen>.fromOpaque(ctx!).takeUnretainedValue()
            seen.keys.append(String(cString: key!))
            _ = seen.api.set_attribute(seen.r, "added-during-visit", "x")
            return true
        }, Unmanaged.passUnretained(seen).toOpaque())
        #expect(status == RH_OK)
        #expect(seen.keys == ["c", "d"])
        #expect(report.content.attributes["added-during-visit"] == "x")
        #expect(api.clear_attributes(r) == RH_OK)
        #expect(report.content.attributes.isEmpty)
    }

    @Test("R-4: a host attribute set inside a callback applies from the next report on")
    func hostAttributeTiming() throws {
        _ = api.set_host_attribute("tenant", "acme")
        var request = ReportRequest(trigger: .upload)
        request.summary = "first"
        let host = self.host
        host.setHandler(.swift(SwiftHandler(name: "setter", before: .completion { handle, _, done in
            _ = host.hostAPI().pointee.set_host_attribute("late", "yes")
            done()
        })), for: .handler)
        let first = try host.raiseDocument(request)
        #expect(first.content.attributes["tenant"] == "acme")
        #expect(first.content.attributes["late"] == nil)
        let second = try host.raiseDocument(request)
        #expect(second.content.attributes["late"] == "yes")
        _ = api.set_host_attribute("tenant", nil)
        #expect(try host.raiseDocument(request).content.attributes["tenant"] == nil)
    }

    @Test("R-4: precedence, lowest first: configuration attributes, set_host_attribute, --attribute")
    func attributePrecedence() throws {
        let host = try TestHost.make { $0.attributes = ["a": "config", "b": "config", "c": "config"] }
        _ = host.hostAPI().pointee.set_host_attribute("b", "host")
        _ = host.hostAPI().pointee.set_host_attribute("c", "host")
        var request = ReportRequest(trigger: .logError)
        request.attributes = ["c": "flag"]
        let document = try host.raiseDocument(request)
        #expect(document.content.attributes == ["a": "config", "b": "host", "c": "flag"])
        // Host attributes belong to the host that handed out the table.
        let other = try TestHost.make()
        #expect(try other.raiseDocument(ReportRequest(trigger: .logError)).content.attributes.isEmpty)
    }

    // MARK: R-5

    @Test("R-5: labels are an ordered list; add_label appends duplicates; set_labels replaces; NULL and invalid UTF-8 dropped")
    func labelRule() {
        let r = openHandle()
        #expect(api.add_label(r, "a") == RH_OK)
        #expect(api.add_label(r, "a") == RH_OK)
        #expect(labels(r) == ["a", "a"])
        #expect(api.has_label(r, "a"))
        #expect(!api.has_label(r, "b"))
        let bad: [CChar] = [CChar(bitPattern: 0xFF), 0]
        let x = strdup("x")!, y = strdup("y")!
        defer { free(x); free(y) }
        bad.withUnsafeBufferPointer { badPointer in
            let items: [UnsafePointer<CChar>?] = [UnsafePointer(x), nil, badPointer.baseAddress, UnsafePointer(y)]
            #expect(api.set_labels(r, items, items.count) == RH_OK)
            #expect(labels(r) == ["x", "y"])
            #expect(api.add_labels(r, items, items.count) == RH_OK)
            #expect(labels(r) == ["x", "y", "x", "y"])
        }
        #expect(api.remove_label(r, "x") == RH_OK)
        #expect(labels(r) == ["y", "y"])
        #expect(api.remove_label(r, "x") == RH_ERR_NOT_FOUND)
        #expect(api.set_labels(r, nil, 3) == RH_ERR_INVALID)
        #expect(api.set_labels(r, nil, 0) == RH_OK)
        #expect(labels(r) == [])
        _ = api.add_label(r, "z")
        #expect(api.clear_labels(r) == RH_OK)
        #expect(labels(r).isEmpty)
    }

    // MARK

    func attach(_ r: OpaquePointer, _ name: String, size: Int) -> rh_status {
        let bytes = [UInt8](repeating: 7, count: size)
        return bytes.withUnsafeBytes { api.add_attachment(r, name, name + ".bin", size == 0 ? nil : $0.baseAddress, size) }
    }

    @Test("R-6: attachments: add appends (names may repeat), remove by name removes all, clear removes all including extended")
    func attachmentRule() {
        _ = report.addAttachment(name: "ext", filename: "ext.txt", data: Data("x".utf8), by: .extended)
        let r = openHandle()
        #expect(attach(r, "log", size: 3) == RH_OK)
        #expect(attach(r, "log", size: 4) == RH_OK)
        #expect(report.content.attachments.map(\.name) == ["ext", "log", "log"])
        var buffer = [UInt8](repeating: 0, count: 8)
        var length = 0
        #expect(api.attachment_data(r, "log", &buffer, 8, &length) == RH_OK)
        #expect(length == 3)
        #expect(api.attachment_data(r, "log", &buffer, 2, &length) == RH_ERR_TRUNCATED)
        #expect(length == 3)
        #expect(api.remove_attachment(r, "log") == RH_OK)
        #expect(report.content.attachments.map(\.name) == ["ext"])
        #expect(api.remove_attachment(r, "log") == RH_ERR_NOT_FOUND)
        #expect(api.clear_attachments(r) == RH_OK)
        #expect(report.content.attachments.isEmpty)
    }

    @Test("R-7: each source adds at most 3 attachments of at most 3 MB; empty, oversized and fourth ones are dropped and logged")
    func attachmentBudget() {
        let r = openHandle( "budget-plugin")
        #expect(attach(r, "empty", size: 0) == RH_ERR_DROPPED)
        #expect(attach(r, "huge", size: ReportContent.attachmentMaxBytes + 1) == RH_ERR_DROPPED)
        #expect(attach(r, "max", size: ReportContent.attachmentMaxBytes) == RH_OK)
        #expect(attach(r, "two", size: 1) == RH_OK)
        #expect(api.remove_attachment(r, "two") == RH_OK)  // removing never gives budget back
        #expect(attach(r, "three", size: 1) == RH_OK)
        #expect(attach(r, "four", size: 1) == RH_ERR_DROPPED)
        // Another callback is another source with its own three.
        let other = openHandle( "other", source: .wrapperAfter, key: "wrapper.after")
        for i in 0..<3 { #expect(attach(other, "o\(i)", size: 1) == RH_OK) }
        #expect(attach(other, "o3", size: 1) == RH_ERR_DROPPED)
        let dropped = report.internalLog.filter { $0.message.contains("dropped") }
        #expect(dropped.map(\.handler) == ["budget-plugin", "budget-plugin", "budget-plugin", "other"])
        #expect(report.content.attachments.map(\.source) == [.handlerBefore, .handlerBefore, .wrapperAfter, .wrapperAfter, .wrapperAfter])
    }

    @Test("R-7: the extended report and the delegate are sources of their own")
    func extendedAndDelegateSources() {
        for i in 0..<4 {
            let result = report.addAttachment(name: "e\(i)", filename: "e", data: Data([1]), by: .extended)
            #expect((try? result.get()) != nil || i == 3)
        }
        // Two delegate calls share one budget.
        let first = openHandle( "dlg", source: .delegate, key: "delegate")
        let second = openHandle( "dlg", source: .delegate, key: "delegate")
        #expect(attach(first, "d1", size: 1) == RH_OK)
        #expect(attach(first, "d2", size: 1) == RH_OK)
        #expect(attach(second, "d3", size: 1) == RH_OK)
        #expect(attach(second, "d4", size: 1) == RH_ERR_DROPPED)
        #expect(report.content.attachments.filter { $0.source == .extended }.count == 3)
    }

    // MARK

    @Test("R-8: after close every call returns RH_ERR_CLOSED, getters write length 0, has_label is false, nothing changes")
    func closedHandle() {
        let r = openHandle( "closer")
        _ = api.set_summary(r, "before close")
        _ = api.add_label(r, "kept")
        report.close(handle(r))
        var length = 99
        var buffer = [CChar](repeating: 0, count: 32)
        #expect(api.summary(r, &buffer, 32, &length) == RH_ERR_CLOSED)
        #expect(length == 0)
        #expect(api.set_summary(r, "after") == RH_ERR_CLOSED)
        #expect(api.severity(r) == RH_ERR_CLOSED)
        #expect(api.report_type(r) == RH_ERR_CLOSED)
        #expect(!api.has_label(r, "kept"))
        #expect(api.set_labels(r, nil, 0) == RH_ERR_CLOSED)
        #expect(attach(r, "late", size: 1) == RH_ERR_CLOSED)
        #expect(report.content.summary == "before close")
        #expect(report.content.labels == ["kept"])
        #expect(report.content.attachments.isEmpty)
        let notes = report.internalLog.filter { $0.message.contains("closed handle") }
        #expect(notes.contains { $0.handler == "closer" && $0.message.contains("set_summary") })
    }

    @Test("R-8: a multi-element change racing with close is all or nothing")
    func allOrNothing() async {
        for _ in 0..<200 {
            let r = openHandle()
            let rBits = UInt(bitPattern: UnsafeRawPointer(r))
            let table = SendableTable(host.hostAPI())
            _ = api.add_label(r, "old")
            async let writer: Void = {
                let api = table.api
                let r = OpaquePointer(bitPattern: rBits)!
                let items: [UnsafeMutablePointer<CChar>?] = ["n1", "n2", "n3"].map { (s: String) in strdup(s) }
                defer { items.forEach { free($0) } }
                let pointers = items.map { UnsafePointer($0) }
                _ = api.set_labels(r, pointers, pointers.count)
            }()
            report.close(handle(r))
            await writer
            let labels = report.content.labels
            #expect(labels == ["old"] || labels == ["n1", "n2", "n3"])
            report.edit { $0.labels = [] }
        }
    }

    @Test("R-9: a handle used after its report was bundled changes nothing, never crashes, and goes to the host's log")
    func useAfterBundle() {
        let log = MemoryDestination()
        let host = try! TestHost.make(log: log)
        let report = LiveReport(trigger: .upload, createdAt: Date(), hostID: host.hostID, hostLog: host.logger)
        let r = OpaquePointer(bitPattern: UInt(report.openHandle(for: .extended).rawValue))!
        let document = report.bundle()
        #expect(api.set_summary(r, "late") == RH_ERR_CLOSED)
        #expect(api.add_label(r, "late") == RH_ERR_CLOSED)
        api.log(r, RH_LOG_WARN, "late note")
        #expect(document.content.summary == nil)
        #expect(report.content.labels.isEmpty)
        #expect(log.lines.contains { $0.contains("late note") })
        // A setter called in a loop on the stale handle is noted once per operation.
        for _ in 0..<1_000 { _ = api.set_summary(r, "again") }
        #expect(log.lines.filter { $0.contains("set_summary through a handle whose report is gone") }.count == 1, "\(log.lines.suffix(3))")
        // A handle that was never issued is just closed.
        #expect(api.set_summary(OpaquePointer(bitPattern: 0xdead_beef)!, "x") == RH_ERR_CLOSED)
    }

    @Test("H-14: log() with an open report notes the message in its internal log under the plugin's name")
    func logIntoInternalLog() {
        let r = openHandle( "talker")
        api.log(r, RH_LOG_INFO, "hello from the plugin")
        api.log(nil, RH_LOG_INFO, "host-only line")
        let entries = report.internalLog
        #expect(entries.contains(InternalLogEntry(level: .info, handler: "talker", message: "hello from the plugin")))
        #expect(!entries.contains { $0.message == "host-only line" })
    }
}
