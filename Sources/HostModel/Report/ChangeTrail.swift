import HostSupport
/// One line of a report's change trail (SPEC T-1): who changed which field, in which step,
/// how, and for text which byte ranges of the final value the change wrote. The text it
/// replaced is never kept, only its length.
public struct TrailEntry: Sendable, Equatable {
    public enum Operation: String, Sendable {
        case set, added, removed, cleared, dropped
    }

    /// The plugin's name, or `host` for the host's own drops.
    public var plugin: String
    /// `wrapper`, `handler`, `delegate` or `host`.
    public var slot: String
    /// `wrapper.before`, `handler.after`, `delegate.add_fields`, …
    public var step: String
    /// `summary`, `description`, `email`, `severity`, `attribute:<key>`, `labels`,
    /// `label:<text>`, `attachment:<name>` (and `changes` for the entry counting those dropped).
    public var field: String
    public var operation: Operation
    /// Half-open byte ranges of the final value that the change wrote (text fields only;
    /// an empty range marks where text was cut out).
    public var ranges: [Range<Int>]?
    /// The value's byte length before the first change of this entry (text fields only).
    public var wasLength: Int?
    /// Entries left off past the trail's capacity (the last entry only).
    public var droppedCount: Int?

    public init(
        plugin: String, slot: String, step: String, field: String, operation: Operation, ranges: [Range<Int>]? = nil,
        wasLength: Int? = nil, droppedCount: Int? = nil
    ) {
        self.plugin = plugin
        self.slot = slot
        self.step = step
        self.field = field
        self.operation = operation
        self.ranges = ranges
        self.wasLength = wasLength
        self.droppedCount = droppedCount
    }
}

/// The change trail of one report: entries coalesced per plugin, slot, step and field, at most
/// `capacity` of them; later fields are counted, and one last entry says how many went.
package struct ChangeTrail: Sendable, Equatable {
    package static let capacity = 1_000

    package private(set) var kept: [TrailEntry] = []
    package private(set) var dropped = 0
    private var positions: [Key: Int] = [:]
    /// The entries of each field, by position: a change moves the others' ranges of its field only.
    private var byField: [String: [Int]] = [:]

    private struct Key: Hashable, Sendable {
        var plugin: String, slot: String, step: String, field: String
    }

    package init() {}

    /// A trail read back from a stored document: `entries` as they were, the counting entry
    /// taken apart again.
    package init(entries: [TrailEntry]) {
        for entry in entries {
            if let count = entry.droppedCount {
                dropped += count
            } else if kept.count < Self.capacity {
                positions[Key(plugin: entry.plugin, slot: entry.slot, step: entry.step, field: entry.field)] = kept.count
                byField[entry.field, default: []].append(kept.count)
                kept.append(entry)
            }
        }
    }

    /// The entries, with one counting those left off.
    package var entries: [TrailEntry] {
        dropped == 0 ? kept
            : kept + [TrailEntry(
                plugin: "host", slot: "host", step: "host", field: "changes", operation: .dropped, droppedCount: dropped)]
    }

    /// Records a change that is not to text (severity, labels, attachments, drops);
    /// `wasLength`: the bytes of what it removed (an attachment's size).
    mutating func record(_ who: Contributor, field: String, _ operation: TrailEntry.Operation, wasLength: Int? = nil) {
        merge(who, field: field) { entry in
            if let existing = entry {
                entry?.operation = Self.coalesced(existing.operation, operation)
                if existing.wasLength == nil { entry?.wasLength = wasLength }
            } else {
                entry = TrailEntry(plugin: who.handler, slot: who.slot, step: who.step, field: field, operation: operation, wasLength: wasLength)
            }
        }
    }

    /// Records a change of a text field from `old` to `new` (nil: absent); `operation` says
    /// how when the change itself does not (a value cleared with its list).
    package mutating func record(
        _ who: Contributor, field: String, from old: String?, to new: String?, as operation: TrailEntry.Operation? = nil
    ) {
        let operation = operation ?? (new == nil ? .removed : (old == nil && field.hasPrefix("attribute:") ? .added : .set))
        let hunks = TextDiff.hunks(from: old, to: new)
        // Every entry's ranges are in the field's final value: earlier entries' move with this change.
        let own = positions[Key(plugin: who.handler, slot: who.slot, step: who.step, field: field)]
        for position in byField[field] ?? [] where position != own {
            kept[position].ranges = kept[position].ranges.map { TextDiff.carry($0, through: hunks, adding: false) }
        }
        merge(who, field: field) { entry in
            if var existing = entry {
                existing.operation = Self.coalesced(existing.operation, operation)
                existing.ranges = new == nil ? [] : TextDiff.carry(existing.ranges ?? [], through: hunks)
                entry = existing
            } else {
                entry = TrailEntry(
                    plugin: who.handler, slot: who.slot, step: who.step, field: field, operation: operation,
                    ranges: new == nil ? [] : hunks.map(\.new), wasLength: old?.utf8.count ?? 0)
            }
        }
    }

    /// The host's own drop of a change `who` asked for (budget, size, a closed handle).
    mutating func recordDrop(of who: Contributor, field: String) {
        let host = Contributor(handler: "host", slot: "host", step: who.step, source: who.source, budgetKey: who.budgetKey)
        record(host, field: field, .dropped)
    }

    /// Changes the entry for `who` and `field` (nil when there is none yet), or counts it
    /// as dropped when it would be a new entry past the capacity.
    private mutating func merge(_ who: Contributor, field: String, _ change: (inout TrailEntry?) -> Void) {
        let key = Key(plugin: who.handler, slot: who.slot, step: who.step, field: field)
        if let position = positions[key] {
            var entry: TrailEntry? = kept[position]
            change(&entry)
            if let entry { kept[position] = entry }
            return
        }
        guard kept.count < Self.capacity else {
            dropped += 1
            return
        }
        var entry: TrailEntry?
        change(&entry)
        guard let entry else { return }
        positions[key] = kept.count
        byField[field, default: []].append(kept.count)
        kept.append(entry)
    }

    /// What one entry says after `later` follows `earlier`: a key added and then changed was
    /// still added; an attachment removed and added again under its name (a scrubber puts it
    /// back) was replaced; otherwise the later operation stands.
    private static func coalesced(_ earlier: TrailEntry.Operation, _ later: TrailEntry.Operation) -> TrailEntry.Operation {
        switch (earlier, later) {
        case (.added, .set): .added
        case (.removed, .added): .set
        default: later
        }
    }
}

extension TrailEntry {
    /// The document's form (SPEC T-1).
    package var json: JSONValue {
        var fields: [(String, JSONValue)] = [
            ("plugin", .string(plugin)), ("slot", .string(slot)), ("step", .string(step)), ("field", .string(field)),
            ("op", .string(operation.rawValue)),
        ]
        if let ranges { fields.append(("ranges", .array(ranges.map { .array([.int($0.lowerBound), .int($0.upperBound)]) }))) }
        if let wasLength { fields.append(("was_length", .int(wasLength))) }
        if let droppedCount { fields.append(("dropped", .int(droppedCount))) }
        return .object(fields)
    }

    /// Reads the document's form; nil when a required key is missing or a range is not
    /// two ordered byte offsets.
    package init?(json: JSONValue) {
        guard let plugin = json["plugin"]?.stringValue, let slot = json["slot"]?.stringValue,
            let step = json["step"]?.stringValue, let field = json["field"]?.stringValue,
            let operation = json["op"]?.stringValue.flatMap(Operation.init(rawValue:))
        else { return nil }
        var ranges: [Range<Int>]?
        if let list = json["ranges"]?.arrayValue {
            ranges = []
            for pair in list {
                guard let bounds = pair.arrayValue, bounds.count == 2, let start = bounds[0].intValue, let end = bounds[1].intValue,
                    start >= 0, start <= end
                else { return nil }
                ranges?.append(start..<end)
            }
        }
        self.init(
            plugin: plugin, slot: slot, step: step, field: field, operation: operation, ranges: ranges,
            wasLength: json["was_length"]?.intValue, droppedCount: json["dropped"]?.intValue)
    }

    /// One line as a person reads it (`show`, the demo, the inbox), in words; byte ranges
    /// only for text: `scrub-pii (handler.before) replaced 19..26 of the summary (was 34
    /// bytes)`, `wrapper-sim (wrapper.before) added attribute wrapper.name`.
    public var text: String {
        if let droppedCount { return "host: \(droppedCount) further changes not recorded (at most \(ChangeTrail.capacity) entries are kept)" }
        return "\(plugin) (\(step)) \(words)"
    }

    /// What the change did to its field, in words.
    package var words: String {
        let colon = field.firstIndex(of: ":")
        let kind = colon.map { String(field[..<$0]) } ?? field
        let name = colon.map { String(field[field.index(after: $0)...]) } ?? ""
        let verb = [.added: "added", .set: "changed", .removed: "removed", .cleared: "cleared", .dropped: "dropped"][operation] ?? "changed"
        switch kind {
        case "attribute" where operation == .removed || operation == .cleared:
            return "\(verb) attribute \(name)" + (wasLength.map { " (was \(Self.bytes($0)))" } ?? "")
        case "attribute": return "\(verb) attribute \(name)"
        case "label" where name.hasPrefix("#"): return "removed a label (\(Self.bytes(wasLength ?? 0)))"
        case "label": return "\(verb) label \(name)"
        case "labels", "attributes", "attachments": return "\(verb) the \(kind)"
        case "severity": return "changed the severity"
        case "attachment" where operation == .set:
            return "replaced attachment \(name)" + (wasLength.map { " (was \(Self.bytes($0)))" } ?? "")
        case "attachment": return "\(verb) attachment \(name)"
        case "breadcrumb": return textWords(of: "breadcrumb \(Int(name).map { String($0 + 1) } ?? name)")
        default: return textWords(of: "the \(field)")
        }
    }

    /// A text field's change: where in its final value, and how long it was.
    private func textWords(of what: String) -> String {
        let was = wasLength.map { " (was \(Self.bytes($0)))" } ?? ""
        switch (operation, ranges) {
        case (.removed, _): return "removed \(what)" + was
        case (.cleared, _): return "cleared \(what)" + was
        case (.dropped, _): return "dropped a change to \(what)"
        case (_, let ranges?):
            let written = ranges.filter { !$0.isEmpty }.map { "\($0.lowerBound)..\($0.upperBound)" }
            let cuts = ranges.filter(\.isEmpty).map { "cut \(what) at \($0.lowerBound)" }
            if wasLength == 0 || wasLength == nil { return (["wrote \(what)"] + cuts).joined(separator: ", ") }
            let parts = (written.isEmpty ? [] : ["replaced \(written.joined(separator: ", ")) of \(what)"]) + cuts
            return (parts.isEmpty ? "changed \(what); later changes left none of it" : parts.joined(separator: ", ")) + was
        default: return "changed \(what)" + was
        }
    }

    private static func bytes(_ count: Int) -> String { count == 1 ? "1 byte" : "\(count) bytes" }
}
