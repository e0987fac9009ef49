import Foundation

/// A page of the documentation as the suite runs it (the convention is in docs/internals.md,
/// "How the suite runs the documentation"):
/// - a ```` ```console ```` block is run: each `$ ` line is a command (a trailing `\` continues
///   it), and the lines after it, up to the next command, are its expected output;
/// - a block preceded by `<!-- file: NAME -->` is a file the reader writes, written into the
///   page's folder before the blocks after it run;
/// - `<!-- run: in the clone -->` runs a console block in the clone instead of the reader's
///   folder; `<!-- run: never, because … -->` and `<!-- run: by TEST … -->` say why it is not.
struct DocPage {
    enum Place: Equatable {
        case reader
        case clone
        /// Not run here, and why (`never, because …`, `by ReadmeTests …`).
        case notRun(String)
    }

    struct Command {
        var text: String
        var expected: [String]
        /// The page's line of the command, for messages.
        var line: Int
    }

    enum Step {
        case file(name: String, text: String)
        case console(place: Place, commands: [Command])
    }

    let name: String
    var steps: [Step] = []

    init(name: String, text: String) {
        self.name = name
        let lines = text.components(separatedBy: "\n")
        var marker: String?
        var index = 0
        while index < lines.count {
            let line = lines[index]
            if line.hasPrefix("<!--"), line.hasSuffix("-->") {
                marker = line.dropFirst(4).dropLast(3).trimmingCharacters(in: .whitespaces)
            } else if line.hasPrefix("```"), line.count > 3 {
                let fence = String(line.dropFirst(3))
                var body: [String] = []
                index += 1
                while index < lines.count, lines[index] != "```" {
                    body.append(lines[index])
                    index += 1
                }
                if let marker, marker.hasPrefix("file: ") {
                    steps.append(.file(name: String(marker.dropFirst(6)), text: body.joined(separator: "\n") + "\n"))
                } else if fence == "console" {
                    steps.append(.console(place: Self.place(marker), commands: Self.commands(body, firstLine: index - body.count + 1)))
                }
                marker = nil
            } else if !line.trimmingCharacters(in: .whitespaces).isEmpty {
                marker = nil
            }
            index += 1
        }
    }

    private static func place(_ marker: String?) -> Place {
        guard let marker, marker.hasPrefix("run: ") else { return .reader }
        let what = String(marker.dropFirst(5))
        return what == "in the clone" ? .clone : .notRun(what)
    }

    private static func commands(_ body: [String], firstLine: Int) -> [Command] {
        var commands: [Command] = []
        var index = 0
        while index < body.count {
            guard body[index].hasPrefix("$ ") else {
                commands.indices.last.map { commands[$0].expected.append(body[index]) }
                index += 1
                continue
            }
            var text = String(body[index].dropFirst(2))
            let line = firstLine + index
            while text.hasSuffix("\\"), index + 1 < body.count {
                index += 1
                text += "\n" + body[index]  // bash reads the backslash-newline as one line
            }
            commands.append(Command(text: text, expected: [], line: line))
            index += 1
        }
        return commands
    }

    /// Whether `actual` output is what `expected` shows: line by line, `…` in a line matching
    /// any text on that line and a line `...` any number of lines. Trailing spaces are ignored.
    static func matches(expected: [String], actual: [String]) -> Bool {
        let patterns = expected.map { $0 == "..." ? nil : linePattern($0) }
        let actual = actual.map(trimmed)
        var memo: [Int: Bool] = [:]
        func match(_ p: Int, _ a: Int) -> Bool {
            if let known = memo[p * (actual.count + 1) + a] { return known }
            let result: Bool
            if p == patterns.count {
                result = a == actual.count
            } else if let pattern = patterns[p] {
                result = a < actual.count && pattern.firstMatch(in: actual[a], range: NSRange(actual[a].startIndex..., in: actual[a])) != nil
                    && match(p + 1, a + 1)
            } else {
                result = match(p + 1, a) || (a < actual.count && match(p, a + 1))
            }
            memo[p * (actual.count + 1) + a] = result
            return result
        }
        return match(0, 0)
    }

    private static func trimmed(_ line: String) -> String {
        String(line.reversed().drop { $0 == " " }.reversed())
    }

    private static func linePattern(_ line: String) -> NSRegularExpression {
        let parts = trimmed(line).components(separatedBy: "…").map(NSRegularExpression.escapedPattern(for:))
        // The pattern is escaped text joined by ".*": it always compiles.
        return try! NSRegularExpression(pattern: "^" + parts.joined(separator: ".*") + "$")
    }
}
