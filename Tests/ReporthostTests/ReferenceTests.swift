import Foundation
import HostTestSupport
import Testing

/// The reference pages (docs/reference/) are what a reader of this repository checks the code
/// against, so they must stay true to it: every rule id the code cites has its anchor, every
/// link leads somewhere, and the options the documents show are the ones the CLI takes.
@Suite struct ReferenceTests {
    /// Matches of the id pattern that are not rule ids (a model number, a grid square), each
    /// with where it is used. None today: add one here rather than loosen the pattern.
    static let notRuleIDs: Set<String> = []

    /// Where rule ids are cited.
    static let citingPlaces = ["Sources", "Plugins", "Tests", "scripts", "README.md", "docs"]

    /// Folders of build output or installed tools: not the project's own text.
    static let skippedFolders: Set<String> = [".build", "target", "node_modules", "__pycache__"]

    static let root = Products.packageRoot
    static let rulesPath = "docs/reference/rules.md"

    @Test("Every rule id cited in Sources, Plugins, Tests, scripts, README.md and docs has an anchor in docs/reference/rules.md")
    func ruleIDsHaveAnchors() throws {
        let rules = try Self.read(Self.rulesPath)
        let anchors = Self.anchors(in: rules)
        try #require(!anchors.isEmpty, "docs/reference/rules.md has no <a id=\"…\"></a> anchor")
        var missing: [String: String] = [:]
        for file in Self.files(under: Self.citingPlaces) {
            guard let text = try? String(contentsOf: file, encoding: .utf8) else { continue }
            for id in Self.ruleIDs(in: text) where !anchors.contains(id) && !Self.notRuleIDs.contains(id) && missing[id] == nil {
                missing[id] = Self.relative(file)
            }
        }
        let listed = missing.keys.sorted().map { "\($0) (used in \(missing[$0] ?? "?"))" }
        #expect(missing.isEmpty, "ids with no <a id=\"…\"></a> in \(Self.rulesPath): \(listed.joined(separator: ", "))")
    }

    @Test("Every link in README.md and docs to a local file resolves, and every #anchor into docs/reference/rules.md exists")
    func localLinksResolve() throws {
        let rules = try Self.read(Self.rulesPath)
        let targets = Self.anchors(in: rules).union(Self.headingSlugs(in: rules))
        let rulesFile = Self.root.appendingPathComponent(Self.rulesPath).standardizedFileURL
        var broken: [String] = []
        for file in Self.markdownFiles() {
            let text = try String(contentsOf: file, encoding: .utf8)
            for link in Self.links(in: text) {
                if let problem = Self.problem(with: link, in: file, rulesFile: rulesFile, rulesTargets: targets) {
                    broken.append("\(Self.relative(file)): (\(link)) \(problem)")
                }
            }
        }
        #expect(broken.isEmpty, "broken links:\n\(broken.joined(separator: "\n"))")
    }

    @Test("Every option README.md and docs show after `reporthost COMMAND` is in `reporthost COMMAND --help`, and every option of `COMMAND --help` is in docs/reference/cli.md")
    func documentedOptionsMatchHelp() async throws {
        // Off the cooperative pool: child processes must not starve async tests.
        let problems = try await offPool { try Self.optionProblems() }
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
    }

    @Test("The reference checks can fail: a planted id, a broken link and an option after a command are found; SHA-256 and UTF-8 are not ids")
    func checksCanFail() {
        // Built at run time, so the id scan of this very file does not find them.
        let planted = "H-" + "99", suffixed = "D-" + "1a"
        #expect(Self.ruleIDs(in: "see SPEC \(planted) and \(suffixed); SHA-256, UTF-8, X-3 are not") == Set([planted, suffixed]))
        #expect(Self.links(in: "[a](missing.md) `[b](in-code.md)`\n\n```\n[c](in-block.md)\n```\n[d]: ref.md\n") == ["missing.md", "ref.md"])
        let problem = Self.problem(
            with: "rules.md#nowhere", in: Self.root.appendingPathComponent("docs/reference/README.md"),
            rulesFile: Self.root.appendingPathComponent(Self.rulesPath).standardizedFileURL, rulesTargets: ["H-1"])
        #expect(problem != nil)
        let text = "Run `reporthost run --capture=ptrace -- ./app --verbose`.\n\n```sh\nreporthost check x.so \\\n  --scrub | grep --no\n"
            + "reporthost status [--limit N | --all]   lists (--json: a document)\n```\n"
        let shown = Self.invocations(in: text, commands: ["run", "check", "status"])
        #expect(shown.map(\.command) == ["run", "check", "status"])
        #expect(shown.map(\.options) == [["capture"], ["scrub"], ["limit", "all"]])
    }

    // MARK: - Rule ids

    /// The ids the project cites (`H-8`, `D-12`): a section letter at a word's start, a dash,
    /// digits and at most one lowercase letter, ending a word (grep's `\b` on both sides).
    static func ruleIDs(in text: String) -> Set<String> {
        let bytes = Array(text.utf8)
        let letters = Set("HRADITBS".utf8)
        var found: Set<String> = []
        for start in bytes.indices where letters.contains(bytes[start]) && (start == 0 || !isWordByte(bytes[start - 1])) {
            var end = start + 1
            guard end < bytes.count, bytes[end] == UInt8(ascii: "-") else { continue }
            end += 1
            let digits = end
            while end < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[end]) { end += 1 }
            guard end > digits else { continue }
            if end < bytes.count, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(bytes[end]) { end += 1 }
            guard end == bytes.count || !isWordByte(bytes[end]) else { continue }
            found.insert(String(decoding: bytes[start..<end], as: UTF8.self))
        }
        return found
    }

    /// An ASCII letter, digit or underscore: what grep's `\b` counts as part of a word.
    static func isWordByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"): true
        default: byte == UInt8(ascii: "_")
        }
    }

    /// The ids of `<a id="ID"></a>` anchors: what `rules.md#ID` opens.
    static func anchors(in markdown: String) -> Set<String> {
        Set(markdown.components(separatedBy: "<a id=\"").dropFirst().compactMap { part -> String? in
            guard let end = part.range(of: "\"></a>") else { return nil }
            return String(part[..<end.lowerBound])
        })
    }

    /// GitHub's anchors of the headings: lowercase, punctuation dropped, spaces as dashes.
    static func headingSlugs(in markdown: String) -> Set<String> {
        Set(markdown.components(separatedBy: "\n").filter { $0.hasPrefix("#") }.map { line -> String in
            let title = line.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces).lowercased()
            let kept = title.filter { $0.isLetter || $0.isNumber || " -_".contains($0) }
            return kept.replacingOccurrences(of: " ", with: "-")
        })
    }

    // MARK: - Links

    /// Why `link`, found in `file`, does not resolve; nil when it does (or leaves the machine).
    static func problem(with link: String, in file: URL, rulesFile: URL, rulesTargets: Set<String>) -> String? {
        let target = link.hasPrefix("<") && link.hasSuffix(">") ? String(link.dropFirst().dropLast()) : link
        if target.contains("://") || target.hasPrefix("mailto:") { return nil }
        let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        let path = parts[0].removingPercentEncoding ?? parts[0]
        let resolved = path.isEmpty ? file.standardizedFileURL : file.deletingLastPathComponent().appendingPathComponent(path).standardizedFileURL
        guard FileManager.default.fileExists(atPath: resolved.path) else { return "no such file" }
        if resolved.path == rulesFile.path, parts.count > 1, !rulesTargets.contains(parts[1]) {
            return "no anchor #\(parts[1]) in \(rulesPath)"
        }
        return nil
    }

    /// The targets of inline links and images (`[text](target)`) and of reference definitions
    /// (`[label]: target`), outside code: a path in a code sample is an example, not a link.
    static func links(in markdown: String) -> [String] {
        blocks(of: markdown).prose.flatMap { paragraph -> [String] in
            let text = paragraph.joined(separator: " ").components(separatedBy: "`").enumerated()
                .filter { $0.offset % 2 == 0 }.map(\.element).joined(separator: " ")
            let inline = text.components(separatedBy: "](").dropFirst().compactMap { rest -> String? in
                guard let close = rest.firstIndex(of: ")") else { return nil }
                return rest[..<close].split(separator: " ").first.map(String.init)
            }
            let definitions = paragraph.compactMap { line -> String? in
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                guard trimmed.hasPrefix("["), let colon = trimmed.range(of: "]: ") else { return nil }
                return trimmed[colon.upperBound...].split(separator: " ").first.map(String.init)
            }
            return inline + definitions
        }
    }

    /// A document split into prose paragraphs (their lines) and fenced code blocks (their lines).
    static func blocks(of markdown: String) -> (prose: [[String]], code: [[String]]) {
        var prose: [[String]] = [], code: [[String]] = []
        var paragraph: [String] = []
        var fence: [String]?
        for line in markdown.components(separatedBy: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("```") || trimmed.hasPrefix("~~~") {
                if let lines = fence {
                    code.append(lines)
                    fence = nil
                } else {
                    if !paragraph.isEmpty { prose.append(paragraph) }
                    paragraph = []
                    fence = []
                }
            } else if fence != nil {
                fence?.append(line)
            } else if trimmed.isEmpty {
                if !paragraph.isEmpty { prose.append(paragraph) }
                paragraph = []
            } else {
                paragraph.append(line)
            }
        }
        if !paragraph.isEmpty { prose.append(paragraph) }
        if let lines = fence { code.append(lines) }
        return (prose, code)
    }

    // MARK: - Options

    /// One `reporthost COMMAND …` a document shows, and the options it shows with it.
    struct Invocation {
        let command: String
        let options: [String]
    }

    /// What the docs and `--help` disagree on, each naming the command, the option and the file.
    static func optionProblems() throws -> [String] {
        let commands = try Self.commands()
        guard !commands.isEmpty else { return ["`reporthost --help` lists no command"] }
        var help: [String: Set<String>] = [:]
        for command in commands {
            let result = try ChildProcess.reporthost([command, "--help"])
            guard result.status == 0 else { return ["`reporthost \(command) --help` exited \(result.status): \(result.stderr)"] }
            help[command] = Set(options(in: result.stdout))
        }
        var problems: [String] = []
        for file in markdownFiles() {
            let text = try String(contentsOf: file, encoding: .utf8)
            for shown in invocations(in: text, commands: Set(commands)) {
                // Every command takes --help; its own usage does not list it.
                for option in shown.options where option != "help" && help[shown.command]?.contains(option) != true {
                    problems.append("\(relative(file)): `reporthost \(shown.command)` shows --\(option), which `reporthost \(shown.command) --help` does not list")
                }
            }
        }
        let cli = try read("docs/reference/cli.md")
        for command in commands {
            guard let text = Self.section("## reporthost \(command)", in: cli) else {
                problems.append("docs/reference/cli.md: no section `## reporthost \(command)`")
                continue
            }
            let documented = Set(options(in: text))
            for option in (help[command] ?? []).sorted() where !documented.contains(option) {
                problems.append("docs/reference/cli.md: `reporthost \(command) --help` lists --\(option), which its section does not")
            }
        }
        return problems
    }

    /// The commands `reporthost --help` lists: the first word of each line under `commands:`.
    static func commands() throws -> [String] {
        let help = try ChildProcess.reporthost(["--help"]).stdout
        guard let list = help.components(separatedBy: "commands:\n").dropFirst().first else { return [] }
        var names: [String] = []
        for line in list.components(separatedBy: "\n") {
            if line.isEmpty { break }
            guard line.hasPrefix("  "), line.dropFirst(2).first?.isLowercase == true else { continue }
            let name = String(line.dropFirst(2).prefix { $0 != " " })
            if !names.contains(name) { names.append(name) }
        }
        return names
    }

    /// Each `reporthost COMMAND` in the code of a document: its code spans and the lines of its
    /// code blocks (a line ending in `\`, or one going on with `[`, joined to the one before).
    static func invocations(in markdown: String, commands: Set<String>) -> [Invocation] {
        let parts = blocks(of: markdown)
        let spans = parts.prose.flatMap { paragraph -> [String] in
            paragraph.joined(separator: " ").components(separatedBy: "`").enumerated().filter { $0.offset % 2 == 1 }.map(\.element)
        }
        var lines: [String] = []
        for block in parts.code {
            for line in block {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if let last = lines.last, last.hasSuffix("\\") || (line.hasPrefix(" ") && trimmed.hasPrefix("[")) {
                    lines[lines.count - 1] = (last.hasSuffix("\\") ? String(last.dropLast()) : last) + " " + trimmed
                } else {
                    lines.append(line)
                }
            }
            lines.append("")
        }
        return (spans + lines).flatMap { invocations(inCode: $0, commands: commands) }
    }

    /// Each `reporthost COMMAND` in one line of code, with the options up to where that
    /// command ends (see `endsCommand`).
    static func invocations(inCode line: String, commands: Set<String>) -> [Invocation] {
        let pieces = line.components(separatedBy: "reporthost ")
        return pieces.indices.dropFirst().compactMap { index -> Invocation? in
            // `libreporthost …` is another word; `.build/debug/reporthost …` is the command.
            if let last = pieces[index - 1].last, last.isLetter || last.isNumber || "-_.".contains(last) { return nil }
            let command = String(pieces[index].prefix { !$0.isWhitespace })
            guard commands.contains(command) else { return nil }
            let rest = Array(withoutSubstitutions(String(pieces[index].dropFirst(command.count))))
            let end = rest.indices.first { endsCommand(rest, at: $0) } ?? rest.count
            return Invocation(command: command, options: options(in: String(rest[..<end])))
        }
    }

    /// `text` without its `$(…)` command substitutions: their options are another command's
    /// (`"$(pkg-config --variable=plugindir …)/libscrub-pii.so"`).
    static func withoutSubstitutions(_ text: String) -> String {
        var kept = ""
        var depth = 0
        var previous: Character = " "
        for character in text {
            if depth > 0 {
                if character == "(" { depth += 1 } else if character == ")" { depth -= 1 }
            } else if previous == "$" && character == "(" {
                kept.removeLast()
                depth = 1
            } else {
                kept.append(character)
            }
            previous = character
        }
        return kept
    }

    /// Whether a command line's own words end at `index`: a shell pipe, `;`, `&`, `>` or `)`,
    /// a comment, `--` (the words after it are `run`'s program's), or a description column
    /// (three spaces or more before text that is not an option). Inside `[…]` only the
    /// description column ends it (`[--dialog | --dialog-script FILE]` is one option group).
    static func endsCommand(_ characters: [Character], at index: Int) -> Bool {
        var depth = 0
        for character in characters[..<index] {
            if character == "[" { depth += 1 } else if character == "]" { depth = max(0, depth - 1) }
        }
        let character = characters[index]
        let previous: Character = index > 0 ? characters[index - 1] : " "
        let next: Character = index + 1 < characters.count ? characters[index + 1] : " "
        let afterNext: Character = index + 2 < characters.count ? characters[index + 2] : " "
        if character == " ", next == " ", afterNext == " " {
            let following = characters[index...].first { $0 != " " }
            return following.map { $0 != "[" && $0 != "-" } ?? true
        }
        guard depth == 0 else { return false }
        if ";&>)".contains(character) { return true }
        if "|#".contains(character), previous.isWhitespace { return true }
        let dashes = character == "-" && next == "-"
        return dashes && previous.isWhitespace && afterNext.isWhitespace
    }

    /// The long options (`--name`) in `text`, without their dashes, in order.
    static func options(in text: String) -> [String] {
        let characters = Array(text)
        let isNameCharacter = { (c: Character) in c.isASCII && (c.isLowercase || c.isNumber || c == "-") }
        var found: [String] = []
        var index = 0
        while index + 2 < characters.count {
            let dashes = characters[index] == "-" && characters[index + 1] == "-"
            let nameFollows = characters[index + 2].isASCII && characters[index + 2].isLowercase
            let notLonger = index == 0 || characters[index - 1] != "-"
            guard dashes, nameFollows, notLonger else {
                index += 1
                continue
            }
            var end = index + 2
            while end < characters.count, isNameCharacter(characters[end]) { end += 1 }
            found.append(String(characters[(index + 2)..<end]).trimmingCharacters(in: CharacterSet(charactersIn: "-")))
            index = end
        }
        return found
    }

    /// The text from the line `heading` to the next `## ` heading; nil without that line.
    static func section(_ heading: String, in markdown: String) -> String? {
        let lines = markdown.components(separatedBy: "\n")
        guard let start = lines.firstIndex(of: heading) else { return nil }
        let end = lines[(start + 1)...].firstIndex { $0.hasPrefix("## ") } ?? lines.endIndex
        return lines[start..<end].joined(separator: "\n")
    }

    // MARK: - Files

    static func read(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// README.md and every Markdown file under docs/.
    static func markdownFiles() -> [URL] {
        files(under: ["README.md", "docs"]).filter { $0.pathExtension == "md" }
    }

    /// The regular files at or under each of `places` (paths from the package root), build
    /// output and hidden files left out.
    static func files(under places: [String]) -> [URL] {
        places.flatMap { place -> [URL] in
            let url = root.appendingPathComponent(place)
            if isRegularFile(url) { return [url] }
            let enumerator = FileManager.default.enumerator(at: url, includingPropertiesForKeys: [.isRegularFileKey], options: [.skipsHiddenFiles])
            var found: [URL] = []
            while let file = enumerator?.nextObject() as? URL {
                let components = relative(file).split(separator: "/").map(String.init)
                if isRegularFile(file), skippedFolders.isDisjoint(with: components) { found.append(file) }
            }
            return found.sorted { $0.path < $1.path }
        }
    }

    static func isRegularFile(_ url: URL) -> Bool {
        (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true
    }

    /// `url`'s path from the package root, for messages.
    static func relative(_ url: URL) -> String {
        let prefix = root.path + "/"
        return url.path.hasPrefix(prefix) ? String(url.path.dropFirst(prefix.count)) : url.path
    }
}
