/// Text from outside (a report's fields, a plugin's name or log, a client's message) as it is
/// shown to a person: every C0 and C1 control character but tab (and newline, where lines are
/// the data's own) written as `\xNN`, so no output can retitle a terminal, clear it, move
/// the cursor or fake earlier lines. JSON and JUnit outputs are exact and never go through it.
package enum TerminalText {
    package static func visible(_ text: String, keepingNewlines: Bool = false) -> String {
        guard text.unicodeScalars.contains(where: { needsEscape($0, keepingNewlines) }) else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            if needsEscape(scalar, keepingNewlines) {
                out += "\\x" + String(hex: scalar.value, width: 2)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func needsEscape(_ scalar: Unicode.Scalar, _ keepingNewlines: Bool) -> Bool {
        switch scalar.value {
        case 0x09: false
        case 0x0A: !keepingNewlines
        case 0x00...0x1F, 0x7F...0x9F: true
        default: false
        }
    }
}
