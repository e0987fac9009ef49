import FoundationEssentials
import HostSupport

/// One callback invocation's view of a live report: the Swift face of the ABI's
/// `rh_report *`. The C host table and in-process Swift handlers both go through it.
///
/// It is an id (see `HandleRegistry`), so a copy kept past its callback is harmless: every
/// call through a closed or unknown handle returns `.closed` and changes nothing (SPEC R-9).
///
/// # Thread safety
/// Safe from any thread while open ([handle-open]).
package struct ReportHandle: Hashable, Sendable {
    package let rawValue: UInt64

    package init(rawValue: UInt64) { self.rawValue = rawValue }

    /// - Parameters:
    ///   - field: the trail's name for the field a change changes (SPEC T-1).
    ///   - cost: the bytes the change keeps alive while it is held (SPEC H-9).
    private func access<T: Sendable>(
        _ operation: String, field: String? = nil, mutates: Bool = true, cost: Int = 0,
        _ body: @escaping @Sendable (inout LiveReport.State, Contributor) -> Result<T, ReportError>
    ) -> Result<T, ReportError> {
        guard let report = HandleRegistry.shared.report(for: self) else {
            HandleRegistry.shared.noteUseAfterBundle(self, operation)
            return .failure(.closed)
        }
        return report.access(self, operation, field: field, mutates: mutates, cost: cost, body)
    }

    private func read<T: Sendable>(_ operation: String, _ body: @escaping @Sendable (ReportContent) -> T?) throws(ReportError) -> T {
        try access(operation, mutates: false) { state, _ in body(state.content).map { .success($0) } ?? .failure(.notFound) }.get()
    }


    // MARK: Read-only fields

    package func reportID() throws(ReportError) -> String {
        guard let report = HandleRegistry.shared.report(for: self) else { throw .closed }
        return try read("report_id") { _ in report.id }
    }

    package func trigger() throws(ReportError) -> Trigger {
        guard let report = HandleRegistry.shared.report(for: self) else { throw .closed }
        return try access("report_trigger", mutates: false) { _, contributor in
            .success(report.trigger == .appHang && !contributor.knowsAppHang ? .logError : report.trigger)
        }.get()
    }

    package func type() throws(ReportError) -> ReportType { try trigger().type }

    // MARK: Text fields

    package func summary() throws(ReportError) -> String { try read("summary") { $0.summary } }
    package func setSummary(_ value: String?) throws(ReportError) { try setText(.summary, value) }
    package func description() throws(ReportError) -> String { try read("description") { $0.description } }
    package func setDescription(_ value: String?) throws(ReportError) { try setText(.description, value) }
    package func email() throws(ReportError) -> String { try read("email") { $0.email } }
    package func setEmail(_ value: String?) throws(ReportError) { try setText(.email, value) }

    /// Sets a text field, cut to `ReportContent.textMaxBytes` (the cut noted).
    private func setText(_ field: ReportContent.TextField, _ value: String?) throws(ReportError) {
        let operation = "set_\(field.rawValue)"
        let bounded = value.map { ReportContent.bounded($0) }
        try self.access(operation, field: field.rawValue, cost: bounded?.text.utf8.count ?? 0) { state, contributor in
            if bounded?.wasCut == true { state.record(.textCut(operation), by: contributor.handler) }
            let old = state.content[text: field]
            guard old != bounded?.text else { return .success(()) }
            state.trail.record(contributor, field: field.rawValue, from: old, to: bounded?.text)
            state.content[text: field] = bounded?.text
            return .success(())
        }.get()
    }

    /// Notes the cuts `ReportContent.bounded` made to the texts of one call.
    private static func noteCuts(
        _ texts: [(text: String, wasCut: Bool)], _ operation: String, in state: inout LiveReport.State, by handler: String
    ) {
        for text in texts where text.wasCut { state.record(.textCut(operation), by: handler) }
    }

    // MARK: Severity (SPEC R-3)

    package func severity() throws(ReportError) -> Int32 { try read("severity") { $0.severity } }

    /// Sets 1...5; any other value is ignored, noted in the internal log, and answered `.range`.
    package func setSeverity(_ value: Int32) throws(ReportError) {
        try self.access("set_severity", field: "severity") { (state, contributor) -> Result<Void, ReportError> in
            guard ReportContent.severityRange.contains(value) else {
                state.internalLog.append(InternalLogEntry(
                    level: .warn, handler: contributor.handler,
                    message: "severity \(value) ignored (outside 1-5); kept \(state.content.severity)"))
                state.trail.recordDrop(of: contributor, field: "severity")
                return .failure(.range)
            }
            if state.content.severity != value { state.trail.record(contributor, field: "severity", .set) }
            state.content.severity = value
            return .success(())
        }.get()
    }

    // MARK: Attributes (SPEC R-4)

    package func attribute(_ key: String) throws(ReportError) -> String { try read("attribute") { $0.attributes[key] } }

    /// Sets `key`; nil removes it (and succeeds whether or not it existed). A new key past
    /// `ReportContent.attributesMax` is refused (`.invalid`, noted); a key or value over
    /// `textMaxBytes` is cut (noted).
    package func setAttribute(_ key: String, _ value: String?) throws(ReportError) {
        let key = ReportContent.bounded(key)
        let value = value.map { ReportContent.bounded($0) }
        let cost = key.text.utf8.count + (value?.text.utf8.count ?? 0)
        let field = "attribute:\(key.text)"
        try self.access("set_attribute", field: field, cost: cost) { (state, contributor) -> Result<Void, ReportError> in
            let limit = ReportContent.attributesMax
            let old = state.content.attributes[key.text]
            if value != nil, old == nil, state.content.attributes.count >= limit {
                state.record(.countRefused("set_attribute", "attributes", limit: limit), by: contributor.handler)
                state.trail.recordDrop(of: contributor, field: field)
                return .failure(.invalid)
            }
            if key.wasCut || value?.wasCut == true {
                Self.noteCuts([key] + (value.map { [$0] } ?? []), "set_attribute", in: &state, by: contributor.handler)
            }
            if old != value?.text { state.trail.record(contributor, field: field, from: old, to: value?.text) }
            state.content.attributes[key.text] = value?.text
            return .success(())
        }.get()
    }

    package func removeAttribute(_ key: String) throws(ReportError) {
        try self.access("remove_attribute", field: "attribute:\(key)") { (state, contributor) -> Result<Void, ReportError> in
            guard let old = state.content.attributes.removeValue(forKey: key) else { return .failure(.notFound) }
            state.trail.record(contributor, field: "attribute:\(key)", from: old, to: nil)
            return .success(())
        }.get()
    }

    package func clearAttributes() throws(ReportError) {
        try self.access("clear_attributes", field: "attributes") { (state, contributor) -> Result<Void, ReportError> in
            for (key, old) in state.content.attributes.sorted(by: { $0.key < $1.key }) {
                state.trail.record(contributor, field: "attribute:\(key)", from: old, to: nil, as: .cleared)
            }
            state.content.attributes = [:]
            return .success(())
        }.get()
    }

    /// A snapshot, sorted by key.
    package func attributes() throws(ReportError) -> [(key: String, value: String)] {
        try read("each_attribute") { $0.attributes.sorted { $0.key < $1.key }.map { (key: $0.key, value: $0.value) } }
    }

    // MARK: Labels (SPEC R-5)

    package func labels() throws(ReportError) -> [String] { try read("each_label") { $0.labels } }

    /// Replaces the whole list; nil elements are dropped. A list over
    /// `ReportContent.labelsMax` is refused whole (`.invalid`, noted).
    package func setLabels(_ labels: [String?]) throws(ReportError) {
        try changeLabels("set_labels", labels, replacing: true)
    }

    /// Appends, even a label already present.
    package func addLabel(_ label: String) throws(ReportError) { try changeLabels("add_label", [label], replacing: false) }

    /// Appends; refused whole (`.invalid`, noted) when the list would pass `labelsMax`.
    package func addLabels(_ labels: [String?]) throws(ReportError) {
        try changeLabels("add_labels", labels, replacing: false)
    }

    private func changeLabels(_ operation: String, _ labels: [String?], replacing: Bool) throws(ReportError) {
        let bounded = labels.compactMap { $0 }.map { ReportContent.bounded($0) }
        let cost = bounded.reduce(0) { $0 + $1.text.utf8.count }
        let field = replacing || bounded.count != 1 ? "labels" : "label:\(bounded[0].text)"
        try self.access(operation, field: field, cost: cost) { (state, contributor) -> Result<Void, ReportError> in
            let limit = ReportContent.labelsMax
            guard (replacing ? 0 : state.content.labels.count) + bounded.count <= limit else {
                state.record(.countRefused(operation, "labels", limit: limit), by: contributor.handler)
                state.trail.recordDrop(of: contributor, field: field)
                return .failure(.invalid)
            }
            Self.noteCuts(bounded, operation, in: &state, by: contributor.handler)
            let labels = bounded.map(\.text)
            if replacing {
                // Each label that went and each that came, as remove_label and add_label name
                // them; only a change of order alone is the list's.
                let old = state.content.labels
                let gone = old.indices.filter { !labels.contains(old[$0]) }
                let came = labels.filter { !old.contains($0) }
                for place in gone { state.trail.record(contributor, field: "label:#\(place)", from: old[place], to: nil) }
                for label in came { state.trail.record(contributor, field: "label:\(label)", .added) }
                if gone.isEmpty && came.isEmpty && old != labels { state.trail.record(contributor, field: "labels", .set) }
                state.content.labels = labels
            } else {
                for label in labels { state.trail.record(contributor, field: "label:\(label)", .added) }
                state.content.labels.append(contentsOf: labels)
            }
            return .success(())
        }.get()
    }

    /// Removes every occurrence. The trail names each by its place in the list before
    /// (`label:#2`), never by its text: a label a scrubber removes is what it removed.
    package func removeLabel(_ label: String) throws(ReportError) {
        try self.access("remove_label", field: "labels") { (state, contributor) -> Result<Void, ReportError> in
            let places = state.content.labels.indices.filter { state.content.labels[$0] == label }
            guard !places.isEmpty else { return .failure(.notFound) }
            for place in places { state.trail.record(contributor, field: "label:#\(place)", from: label, to: nil) }
            state.content.labels.removeAll { $0 == label }
            return .success(())
        }.get()
    }

    package func clearLabels() throws(ReportError) {
        try self.access("clear_labels", field: "labels") { (state, contributor) -> Result<Void, ReportError> in
            if !state.content.labels.isEmpty { state.trail.record(contributor, field: "labels", .cleared) }
            state.content.labels = []
            return .success(())
        }.get()
    }

    package func hasLabel(_ label: String) throws(ReportError) -> Bool { try read("has_label") { $0.labels.contains(label) } }

    // MARK: Attachments (SPEC)

    package func attachments() throws(ReportError) -> [AttachmentInfo] {
        try read("each_attachment") { $0.attachments.map(\.info) }
    }

    /// Appends an attachment charged to this handle's source budget.
    package func addAttachment(name: String, filename: String, data: Data) throws(ReportError) {
        guard let report = HandleRegistry.shared.report(for: self) else { throw .closed }
        try report.add(attachment: name, filename: filename, data: data, through: self).get()
    }

    /// Appends an attachment of `size` bytes that `copy` reads, only once the size and the
    /// budget admit it (plugins: a claimed size is outside input).
    package func addAttachment(name: String, filename: String, size: UInt, copy: () -> Data) throws(ReportError) {
        guard let report = HandleRegistry.shared.report(for: self) else { throw .closed }
        try report.add(attachment: name, filename: filename, size: size, through: self, copy: copy).get()
    }

    /// The bytes of the first attachment called `name`.
    package func attachmentData(_ name: String) throws(ReportError) -> Data {
        try read("attachment_data") { content in content.attachments.first { $0.name == name }?.data }
    }

    /// Removes every attachment called `name`; the budget is not given back.
    package func removeAttachment(_ name: String) throws(ReportError) {
        try self.access("remove_attachment", field: "attachment:\(name)") { (state, contributor) -> Result<Void, ReportError> in
            let removed = state.content.attachments.filter { $0.name == name }
            guard !removed.isEmpty else { return .failure(.notFound) }
            state.content.attachments.removeAll { $0.name == name }
            state.trail.record(contributor, field: "attachment:\(name)", .removed, wasLength: removed.reduce(0) { $0 + $1.size })
            return .success(())
        }.get()
    }

    package func clearAttachments() throws(ReportError) {
        try self.access("clear_attachments", field: "attachments") { (state, contributor) -> Result<Void, ReportError> in
            for attachment in state.content.attachments {
                state.trail.record(contributor, field: "attachment:\(attachment.name)", .cleared)
            }
            state.content.attachments = []
            return .success(())
        }.get()
    }

    // MARK: Breadcrumbs (SPEC B-1; ABI 1.1)

    package func breadcrumbs() throws(ReportError) -> [Breadcrumb] { try read("each_breadcrumb") { $0.breadcrumbs } }

    /// Replaces the message of the breadcrumb at `index` (cut to `textMaxBytes`, noted), the
    /// way a scrubber masks one; the trail names it `breadcrumb:<index>`.
    package func setBreadcrumbMessage(_ index: Int, _ message: String) throws(ReportError) {
        let bounded = ReportContent.bounded(message)
        let field = "breadcrumb:\(index)"
        try self.access("set_breadcrumb_message", field: field, cost: bounded.text.utf8.count) {
            (state, contributor) -> Result<Void, ReportError> in
            guard state.content.breadcrumbs.indices.contains(index) else { return .failure(.notFound) }
            if bounded.wasCut { state.record(.textCut("set_breadcrumb_message"), by: contributor.handler) }
            let old = state.content.breadcrumbs[index].message
            guard old != bounded.text else { return .success(()) }
            state.trail.record(contributor, field: field, from: old, to: bounded.text)
            state.content.breadcrumbs[index].message = bounded.text
            return .success(())
        }.get()
    }

    /// Removes the breadcrumb at `index`; later ones move down one place.
    package func removeBreadcrumb(_ index: Int) throws(ReportError) {
        let field = "breadcrumb:\(index)"
        try self.access("remove_breadcrumb", field: field) { (state, contributor) -> Result<Void, ReportError> in
            guard state.content.breadcrumbs.indices.contains(index) else { return .failure(.notFound) }
            let removed = state.content.breadcrumbs.remove(at: index)
            state.trail.record(contributor, field: field, from: removed.message, to: nil)
            return .success(())
        }.get()
    }

    /// Notes in the internal log that a call's argument was refused or dropped (NULL where a
    /// value is required, or not UTF-8), under this handler's name.
    package func noteInvalid(_ operation: String, _ what: String) { note(.refusedArgument(operation, what), during: operation) }

    /// Notes `event` in the internal log, under this handler's name.
    package func note(_ event: RuleEvent, during operation: String) {
        _ = access(operation, mutates: false) { state, contributor in
            state.record(event, by: contributor.handler)
            return .success(())
        }
    }

    // MARK: Log

    /// Notes `message` in the report's internal log under this handler's name (and in the
    /// host's log); through a closed handle, in the host's log only.
    package func log(_ level: LogLevel, _ message: String) {
        let message = InternalLogEntry.bounded(message)
        guard let report = HandleRegistry.shared.report(for: self) else {
            HandleRegistry.shared.hostLog(for: self)?.log(level, message)
            return
        }
        let noted: Result<String, ReportError> = report.access(self, "log", noteIfClosed: false, mutates: false) { state, contributor in
            state.internalLog.append(InternalLogEntry(level: level, handler: contributor.handler, message: message))
            return .success(contributor.handler)
        }
        switch noted {
        case .success(let handler): report.hostLog.log(level, message, handler: handler)
        case .failure: report.hostLog.log(level, message)
        }
    }
}

extension ReportContent {
    /// The text fields a handler sets whole, by their trail names.
    enum TextField: String, Sendable {
        case summary, description, email
    }

    subscript(text field: TextField) -> String? {
        get {
            switch field {
            case .summary: summary
            case .description: description
            case .email: email
            }
        }
        set {
            switch field {
            case .summary: summary = newValue
            case .description: description = newValue
            case .email: email = newValue
            }
        }
    }
}
