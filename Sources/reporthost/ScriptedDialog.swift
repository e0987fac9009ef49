import FoundationEssentials
import Glibc
import Host
import HostPlugins
import HostSupport

/// `--dialog-script FILE` (SPEC I-5): `{"summary", "description", "labels", "severity",
/// "action": "send"|"cancel"}`; absent keys keep the current value; no action means send.
struct ScriptedDialog: DialogPresenter {
    let summary: String??
    let description: String??
    let labels: [String]?
    let severity: Int32?
    let cancels: Bool

    /// Reads and validates a script; anything else than such an object is a usage error.
    init(path: String) throws {
        guard case .success(let data) = BoundedFile.read(path, limit: BoundedFile.maxDocumentBytes, followLinks: true, system: Switches.system) else {
            throw UsageError("--dialog-script '\(path)': the file is missing, unreadable, not a regular file or over 1 MB")
        }
        let json: JSONValue
        do {
            json = try JSONValue.parse(data)
        } catch {
            throw UsageError("--dialog-script '\(path)': \(error)")
        }
        func bad(_ what: String) -> UsageError { UsageError("--dialog-script '\(path)': \(what)") }
        guard let object = json.objectValue else { throw bad("expected an object, got \(json.typeName)") }
        let allowed = ["summary", "description", "labels", "severity", "action"]
        if let unknown = object.first(where: { !allowed.contains($0.0) }) { throw bad("unknown key '\(unknown.0)'") }
        func text(_ key: String) throws -> String?? {
            guard let value = json[key] else { return .none }
            if value.isNull { return .some(nil) }
            guard let string = value.stringValue else { throw bad("'\(key)' must be a string or null, got \(value.typeName)") }
            return .some(string)
        }
        summary = try text("summary")
        description = try text("description")
        if let value = json["labels"] {
            guard let items = value.arrayValue, items.allSatisfy({ $0.stringValue != nil }) else {
                throw bad("'labels' must be an array of strings")
            }
            labels = items.compactMap(\.stringValue)
        } else {
            labels = nil
        }
        if let value = json["severity"] {
            guard let number = value.intValue, (1...5).contains(number) else {
                throw bad("'severity' must be an integer from 1 to 5, got \(value.serialized())")
            }
            severity = Int32(number)
        } else {
            severity = nil
        }
        switch json["action"] {
        case nil, .string("send")?: cancels = false
        case .string("cancel")?: cancels = true
        case let other?: throw bad("'action' must be \"send\" or \"cancel\", got \(other.serialized())")
        }
    }

    func present(_ fields: DialogFields) -> DialogDecision {
        if cancels { return .cancel }
        var edited = fields
        if let summary { edited.summary = summary }
        if let description { edited.description = description }
        if let labels { edited.labels = labels }
        if let severity { edited.severity = severity }
        return .send(edited)
    }
}
