import FoundationEssentials

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

    /// - Parameter cost: the bytes the change keeps alive while it is held (SPEC H-9).
    private func access<T: Sendable>(
        _ operation: String, mutates: Bool = true, cost: Int = 0,
        _ body: @escaping @Sendable (inout LiveReport.State, Contributor) -> Result<T, ReportError>
    ) -> Result<T, ReportError> {
        guard let report = HandleRegistry.shared.report(for: self) else {
            HandleRegistry.shared.noteUseAfterBundle(self, operation)
            return .failure(.closed)
        }
        return report.access(self, operation, mutates: mutates, cost: cost, body)
    }

    private func read<T: Sendable>(_ operation: String, _ body: @escaping @Sendable (ReportContent) -> T?) throws(ReportError) -> T {
        try access(operation, mutates: false) { state, _ in body(state.content).map { .success($0) } ?? .failure(.notFound) }.get()
    }

    private func change(_ operation: String, _ body: @escaping @Sendable (inout ReportContent) -> Void) throws(ReportError) {
        try access(operation) { state, _ in
            body(&state.content)
            return .success(())
        }.get()
    }

    // MARK: Read-only fields

    package func reportID() throws(ReportError) -> String {
        guard let report = HandleRegistry.shared.report(for: self) else { throw .closed }
        return try read("report_id") { _ in report.id }
    }

    package func trigger() throws(ReportError) -> Trigger {
        guard let report = HandleRegistry.shared.report(for: self) else { throw .closed }
        return try read("report_trigger") { _ in report.trigger }
    }

    package func type() throws(ReportError) -> ReportType { try trigger().type }

    // MARK: Text fields

    package func summary() throws(ReportError) -> String { try read("summary") { $0.summary } }
    package func setSummary(_ value: String?) throws(ReportError) { try setText("set_summary", value) { $0.summary = $1 } }
    package func description() throws(ReportError) -> String { try read("description") { $0.description } }
    package func setDescription(_ value: String?) throws(ReportError) {
        try setText("set_description", value) { $0.description = $1 }
    }
    package func email() throws(ReportError) -> String { try read("email") { $0.email } }
    package func setEmail(_ value: String?) throws(ReportError) { try setText("set_email", value) { $0.email = $1 } }

    /// Sets a text field through `assign`, cut to `ReportContent.textMaxBytes` (the cut noted).
    private func setText(
        _ operation: String, _ value: String?, _ assign: @escaping @Sendable (inout ReportContent, String?) -> Void
    ) throws(ReportError) {
        let bounded = value.map { ReportContent.bounded($0) }
        try self.access(operation, cost: bounded?.text.utf8.count ?? 0) { state, contributor in
            if bounded?.wasCut == true { state.record(.textCut(operation), by: contributor.handler) }
            assign(&state.content, bounded?.text)
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
        try self.access("set_severity") { (state, contributor) -> Result<Void, ReportError> in
            guard ReportContent.severityRange.contains(value) else {
                state.internalLog.append(InternalLogEntry(
                    level: .warn, handler: contributor.handler,
                    message: "severity \(value) ignored (outside 1-5); kept \(state.content.severity)"))
                return .failure(.range)
            }
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
        try self.access("set_attribute", cost: cost) { (state, contributor) -> Result<Void, ReportError> in
            let limit = ReportContent.attributesMax
            if value != nil, state.content.attributes[key.text] == nil, state.content.attributes.count >= limit {
                state.record(.countRefused("set_attribute", "attributes", limit: limit), by: contributor.handler)
                return .failure(.invalid)
            }
            if key.wasCut || value?.wasCut == true {
                Self.noteCuts([key] + (value.map { [$0] } ?? []), "set_attribute", in: &state, by: contributor.handler)
            }
            state.content.attributes[key.text] = value?.text
            return .success(())
        }.get()
    }

    package func removeAttribute(_ key: String) throws(ReportError) {
        try self.access("remove_attribute") { (state, _) -> Result<Void, ReportError> in
            state.content.attributes.removeValue(forKey: key) == nil ? .failure(.notFound) : .success(())
        }.get()
    }

    package func clearAttributes() throws(ReportError) { try change("clear_attributes") { $0.attributes = [:] } }

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
        try self.access(operation, cost: cost) { (state, contributor) -> Result<Void, ReportError> in
            let limit = ReportContent.labelsMax
            guard (replacing ? 0 : state.content.labels.count) + bounded.count <= limit else {
                state.record(.countRefused(operation, "labels", limit: limit), by: contributor.handler)
                return .failure(.invalid)
            }
            Self.noteCuts(bounded, operation, in: &state, by: contributor.handler)
            if replacing { state.content.labels = [] }
            state.content.labels.append(contentsOf: bounded.map(\.text))
            return .success(())
        }.get()
    }

    /// Removes every occurrence.
    package func removeLabel(_ label: String) throws(ReportError) {
        try self.access("remove_label") { (state, _) -> Result<Void, ReportError> in
            let before = state.content.labels.count
            state.content.labels.removeAll { $0 == label }
            return state.content.labels.count == before ? .failure(.notFound) : .success(())
        }.get()
    }

    package func clearLabels() throws(ReportError) { try change("clear_labels") { $0.labels = [] } }

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
        try self.access("remove_attachment") { (state, _) -> Result<Void, ReportError> in
            let before = state.content.attachments.count
            state.content.attachments.removeAll { $0.name == name }
            return state.content.attachments.count == before ? .failure(.notFound) : .success(())
        }.get()
    }

    package func clearAttachments() throws(ReportError) { try change("clear_attachments") { $0.attachments = [] } }

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
