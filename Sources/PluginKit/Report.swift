import Glibc
import PluginAPI

/// The report as a Swift plugin sees it during one callback: a thin, copying wrapper over
/// the host table (`rh_host_api`) and the callback's `rh_report *`.
///
/// Every call goes through the C ABI, so the host's rules apply unchanged: after the
/// callback completes, calls change nothing and throw `ReportError.closed`.
///
/// # Thread safety
/// Usable from any thread while the handle is open ([handle-open]).
public struct Report: @unchecked Sendable {
    // @unchecked: both pointers are the host's, immutable and valid for the process.
    let host: UnsafePointer<rh_host_api>
    let handle: OpaquePointer

    init(host: UnsafePointer<rh_host_api>, handle: OpaquePointer) {
        self.host = host
        self.handle = handle
    }

    private var api: rh_host_api { host.pointee }

    private static func check(_ status: rh_status) throws(ReportError) {
        if status != RH_OK { throw ReportError(status: status) }
    }

    /// Reads a string through a snprintf-style getter; nil when the field is absent.
    private func string(_ getter: Getter) throws(ReportError) -> String? {
        switch readGetter(getter) {
        case .success(let text): return text
        case .failure(let failure) where failure.status == RH_ERR_NOT_FOUND: return nil
        case .failure(let failure): throw ReportError(status: failure.status)
        }
    }

    // MARK: Fields

    public func reportID() throws(ReportError) -> String { try string { api.report_id(handle, $0, $1, $2) } ?? "" }

    public func type() throws(ReportError) -> Int32 {
        let value = api.report_type(handle)
        if value < 0 { throw ReportError(status: value) }
        return value
    }

    public func trigger() throws(ReportError) -> Int32 {
        let value = api.report_trigger(handle)
        if value < 0 { throw ReportError(status: value) }
        return value
    }

    /// nil when absent.
    public func summary() throws(ReportError) -> String? { try string { api.summary(handle, $0, $1, $2) } }
    public func setSummary(_ value: String?) throws(ReportError) { try setText(api.set_summary, value) }
    public func description() throws(ReportError) -> String? { try string { api.description(handle, $0, $1, $2) } }
    public func setDescription(_ value: String?) throws(ReportError) { try setText(api.set_description, value) }
    public func email() throws(ReportError) -> String? { try string { api.email(handle, $0, $1, $2) } }
    public func setEmail(_ value: String?) throws(ReportError) { try setText(api.set_email, value) }

    private func setText(
        _ setter: (@convention(c) (OpaquePointer?, UnsafePointer<CChar>?) -> rh_status)?, _ value: String?
    ) throws(ReportError) {
        guard let setter else { throw .closed }
        let status = value.map { text in text.withCString { setter(handle, $0) } } ?? setter(handle, nil)
        try Self.check(status)
    }

    /// 0 for none, else 1...5.
    public func severity() throws(ReportError) -> Int32 {
        let value = api.severity(handle)
        if value < 0 { throw ReportError(status: value) }
        return value
    }

    /// 1...5; anything else throws `.range` and is noted in the report's internal log.
    public func setSeverity(_ value: Int32) throws(ReportError) { try Self.check(api.set_severity(handle, value)) }

    // MARK: Attributes

    public func attribute(_ key: String) throws(ReportError) -> String? {
        let cKey = strdup(key)
        defer { free(cKey) }
        return try string { api.attribute(handle, cKey, $0, $1, $2) }
    }

    /// nil removes the key.
    public func setAttribute(_ key: String, _ value: String?) throws(ReportError) {
        let status = key.withCString { k in value.map { v in v.withCString { api.set_attribute(handle, k, $0) } } ?? api.set_attribute(handle, k, nil) }
        try Self.check(status)
    }

    /// A snapshot, in key order.
    public func attributes() throws(ReportError) -> [(key: String, value: String)] {
        final class Collector { var pairs: [(key: String, value: String)] = [] }
        let collector = Collector()
        let status = api.each_attribute(handle, { context, key, value in
            let collector = Unmanaged<Collector>.fromOpaque(context!).takeUnretainedValue()
            collector.pairs.append((String(cString: key!), String(cString: value!)))
            return true
        }, Unmanaged.passUnretained(collector).toOpaque())
        try Self.check(status)
        return collector.pairs
    }

    // MARK: Labels

    /// A snapshot, in order.
    public func labels() throws(ReportError) -> [String] {
        final class Collector { var labels: [String] = [] }
        let collector = Collector()
        let status = api.each_label(handle, { context, label in
            Unmanaged<Collector>.fromOpaque(context!).takeUnretainedValue().labels.append(String(cString: label!))
            return true
        }, Unmanaged.passUnretained(collector).toOpaque())
        try Self.check(status)
        return collector.labels
    }

    /// Replaces the whole list, all or nothing. Assign rather than add, so that running the
    /// handler twice over one report is harmless.
    public func setLabels(_ labels: [String]) throws(ReportError) {
        try Self.check(withCStrings(labels) { api.set_labels(handle, $0, labels.count) })
    }

    /// Appends, even when the label is already there.
    public func addLabel(_ label: String) throws(ReportError) {
        try Self.check(label.withCString { api.add_label(handle, $0) })
    }

    public func hasLabel(_ label: String) -> Bool { label.withCString { api.has_label(handle, $0) } }

    // MARK: Breadcrumbs (ABI 1.1)

    /// One breadcrumb: what the program did before the report (SPEC B-1).
    public struct Breadcrumb: Sendable, Equatable {
        /// ISO 8601 UTC with milliseconds.
        public var timestamp: String
        /// An `RH_LOG_*` value.
        public var level: Int32
        public var category: String
        public var message: String
    }

    /// Whether the host's table holds the member at `offset` (a 1.0 host's does not).
    private func has(_ offset: Int?) -> Bool {
        guard let offset else { return false }
        return Int(api.struct_size) >= offset + MemoryLayout<UnsafeRawPointer>.size
    }

    /// A snapshot, oldest first; empty on a 1.0 host.
    public func breadcrumbs() throws(ReportError) -> [Breadcrumb] {
        guard has(MemoryLayout<rh_host_api>.offset(of: \.each_breadcrumb)), let each = api.each_breadcrumb else { return [] }
        final class Collector { var crumbs: [Breadcrumb] = [] }
        let collector = Collector()
        let status = each(handle, { context, _, timestamp, level, category, message in
            Unmanaged<Collector>.fromOpaque(context!).takeUnretainedValue().crumbs.append(Breadcrumb(
                timestamp: String(cString: timestamp!), level: level, category: String(cString: category!), message: String(cString: message!)))
            return true
        }, Unmanaged.passUnretained(collector).toOpaque())
        try Self.check(status)
        return collector.crumbs
    }

    /// Replaces the message of the breadcrumb at `index` (as `breadcrumbs()` numbers them).
    /// Throws `.notFound` past the last one, and on a 1.0 host.
    public func setBreadcrumbMessage(at index: Int, _ message: String) throws(ReportError) {
        guard has(MemoryLayout<rh_host_api>.offset(of: \.set_breadcrumb_message)), let set = api.set_breadcrumb_message else {
            throw ReportError(status: RH_ERR_NOT_FOUND)
        }
        try Self.check(message.withCString { set(handle, index, $0) })
    }

    /// Removes the breadcrumb at `index`; later ones move down one place.
    public func removeBreadcrumb(at index: Int) throws(ReportError) {
        guard has(MemoryLayout<rh_host_api>.offset(of: \.remove_breadcrumb)), let remove = api.remove_breadcrumb else {
            throw ReportError(status: RH_ERR_NOT_FOUND)
        }
        try Self.check(remove(handle, index))
    }

    // MARK: Attachments

    /// Adds an attachment to this callback's budget: three of at most 3 MB.
    public func addAttachment(name: String, filename: String, bytes: [UInt8]) throws(ReportError) {
        let status = name.withCString { n in
            filename.withCString { f in bytes.withUnsafeBytes { api.add_attachment(handle, n, f, $0.baseAddress, $0.count) } }
        }
        try Self.check(status)
    }

    /// Names of the attachments, in order.
    public func attachmentNames() throws(ReportError) -> [String] {
        final class Collector { var names: [String] = [] }
        let collector = Collector()
        let status = api.each_attachment(handle, { context, name, _, _ in
            Unmanaged<Collector>.fromOpaque(context!).takeUnretainedValue().names.append(String(cString: name!))
            return true
        }, Unmanaged.passUnretained(collector).toOpaque())
        try Self.check(status)
        return collector.names
    }

    // MARK: Log

    /// Notes `message` in the report's internal log (and the host's log).
    public func log(_ level: Int32 = RH_LOG_INFO, _ message: String) {
        message.withCString { api.log(handle, level, $0) }
    }
}

/// Calls `body` with a C array of the strings, valid during the call.
private func withCStrings<T>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> T) -> T {
    let copies = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    let pointers = copies.map { UnsafePointer($0) }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}

/// Why a report call did nothing: the ABI's `RH_ERR_*`.
public enum ReportError: Error, Equatable, Sendable {
    case closed, invalid, notFound, truncated, range, dropped
    case other(Int32)

    init(status: rh_status) {
        switch status {
        case RH_ERR_CLOSED: self = .closed
        case RH_ERR_INVALID: self = .invalid
        case RH_ERR_NOT_FOUND: self = .notFound
        case RH_ERR_TRUNCATED: self = .truncated
        case RH_ERR_RANGE: self = .range
        case RH_ERR_DROPPED: self = .dropped
        default: self = .other(status)
        }
    }
}

/// What a plugin asks the host outside a report (ABI 1.1, SPEC T-3): the options the
/// configuration gives its slot, and its own folder in the repository. On a host of ABI 1.0
/// (its table too small for these members) the options read as `{}` and there is no folder.
///
/// # Thread safety
/// Usable from any thread ([any-thread]).
public struct HostTable: @unchecked Sendable {
    // @unchecked: the host's table, immutable and valid for the process.
    let host: UnsafePointer<rh_host_api>

    public init(_ host: UnsafePointer<rh_host_api>) { self.host = host }

    /// Whether the host's table holds the member at `offset` (a 1.0 host's does not).
    private func has(_ offset: Int?) -> Bool {
        guard let offset else { return false }
        return Int(host.pointee.struct_size) >= offset + MemoryLayout<UnsafeRawPointer>.size
    }

    /// `plugins.options.<slot>`, as JSON text: `{}` when none.
    public func optionsJSON() -> String {
        guard has(MemoryLayout<rh_host_api>.offset(of: \.options_json)), let getter = host.pointee.options_json else { return "{}" }
        return Self.read(getter) ?? "{}"
    }

    /// The plugin's own folder (made 0700 on first use); nil on a 1.0 host, while the entry
    /// runs, or when it cannot be made.
    public func dataFolder() -> String? {
        guard has(MemoryLayout<rh_host_api>.offset(of: \.data_folder)), let getter = host.pointee.data_folder else { return nil }
        return Self.read(getter)
    }

    private static func read(_ getter: @convention(c) (UnsafeMutablePointer<CChar>?, Int, UnsafeMutablePointer<Int>?) -> rh_status) -> String? {
        try? readGetter { getter($0, $1, $2) }.get()
    }
}

/// A snprintf-style getter of the host table (ABI: string getters).
typealias Getter = (UnsafeMutablePointer<CChar>?, Int, UnsafeMutablePointer<Int>?) -> rh_status

/// The status a getter failed with.
struct GetterFailure: Error {
    let status: rh_status
}

/// Reads a string through a getter: measure, then copy.
func readGetter(_ getter: Getter) -> Result<String, GetterFailure> {
    var length = 0
    let first = getter(nil, 0, &length)
    guard first == RH_OK || first == RH_ERR_TRUNCATED else { return .failure(GetterFailure(status: first)) }
    var buffer = [CChar](repeating: 0, count: length + 1)
    let second = getter(&buffer, buffer.count, &length)
    guard second == RH_OK else { return .failure(GetterFailure(status: second)) }
    return .success(String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self))
}

extension Report {
    /// The host's options and data folder for this plugin's slot.
    public var hostTable: HostTable { HostTable(host) }
}
