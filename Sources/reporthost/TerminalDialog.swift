import FoundationEssentials
import Glibc
import Host
import HostPlugins

/// The dialog of `reporthost report bug --dialog` (SPEC H-5 step 3): shows the seeded
/// fields on the terminal, lets the user edit each (Enter keeps the value), then asks send
/// or cancel. Prompts go to standard error (stdout is for documents, SPEC I-4); answers
/// come from standard input. End of input cancels.
struct TerminalDialog: DialogPresenter {
    let read: @Sendable () -> String?
    let write: @Sendable (String) -> Void

    init(
        read: @escaping @Sendable () -> String? = { readLine(strippingNewline: true) },
        write: @escaping @Sendable (String) -> Void = { _ = Switches.system.writeAll(STDERR_FILENO, $0) }
    ) {
        self.read = read
        self.write = write
    }

    /// Whether standard input and standard error are a terminal (`--dialog` needs one).
    static var isAvailable: Bool { isatty(STDIN_FILENO) == 1 && isatty(STDERR_FILENO) == 1 }

    func present(_ fields: DialogFields) -> DialogDecision {
        var edited = fields
        write("Bug report: Enter keeps the value in brackets, '-' clears it.\n")
        guard let summary = ask("Summary", fields.summary ?? "") else { return .cancel }
        edited.summary = summary == "-" ? nil : (summary.isEmpty ? fields.summary : summary)
        guard let description = ask("Description", fields.description ?? "") else { return .cancel }
        edited.description = description == "-" ? nil : (description.isEmpty ? fields.description : description)
        guard let labels = ask("Labels, comma-separated", fields.labels.joined(separator: ", ")) else { return .cancel }
        if labels == "-" {
            edited.labels = []
        } else if !labels.isEmpty {
            edited.labels = labels.split(separator: ",").map { $0.trimmed }.filter { !$0.isEmpty }
        }
        while true {
            guard let answer = ask("Severity 1-5", fields.severity == 0 ? "none" : String(fields.severity)) else { return .cancel }
            if answer.isEmpty { break }
            if let value = Int32(answer), (1...5).contains(value) {
                edited.severity = value
                break
            }
            write("  severity must be a number from 1 to 5\n")
        }
        while true {
            guard let answer = ask("Send or cancel", "send")?.lowercased() else { return .cancel }
            switch answer {
            case "", "s", "send": return .send(edited)
            case "c", "cancel": return .cancel
            default: write("  answer send or cancel\n")
            }
        }
    }

    private func ask(_ prompt: String, _ current: String) -> String? {
        write("\(prompt) [\(current)]: ")
        return read()?.trimmed
    }
}
