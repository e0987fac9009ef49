import Foundation
import HostSupport
import HostTestSupport
import Testing

/// The engine's targets form layers (ARCHITECTURE.md): Package.swift declares what each may
/// import, and the build's `--explicit-target-dependency-import-check error` refuses an import
/// that is not declared. What this test keeps: the public surface, that only the repository
/// sets a record's state, and that ARCHITECTURE.md draws the graph Package.swift declares.
struct ArchitectureTests {
    static var sourcesFolder: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources")
    }

    /// The engine's targets, one per layer (Package.swift): their dependencies make a
    /// wrong-way reference between them a build error. What this test adds is the order of
    /// the folders inside a target, and that members live with their type.
    static let engineTargets = ["HostSupport", "HostModel", "HostCapture", "HostPlugins", "HostStore", "HostRecovery", "HostDelivery", "Host"]
    static var sources: [URL] { engineTargets.map { sourcesFolder.appendingPathComponent($0) } }

    @Test("Lifecycle: no code of the host outside the repository puts a record straight into a state (`seedRecord` is for tests and tools)")
    func nothingSeedsOutsideTheRepository() throws {
        let seeding = try LayerGraph.parse(swiftFilesUnder: [Self.sourcesFolder]).filter { $0.memberUses.contains("seedRecord") }
        #expect(seeding.map { "\($0.folder)/\($0.name)" } == [], "seedRecord is called from the host's code")
        // The check sees a call when there is one.
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("seed-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(at: root.appendingPathComponent("Delivery"), withIntermediateDirectories: true)
        try "func f(r: Repository) { try? r.seedRecord(d, state: .retry) }\n".write(
            to: root.appendingPathComponent("Delivery/D.swift"), atomically: true, encoding: .utf8)
        #expect(try LayerGraph.parse(swiftFilesUnder: [root]).first?.memberUses.contains("seedRecord") == true)
    }

    /// What a program outside this package sees of the engine: the runtime, its options and
    /// the value types they take and give. Everything else other targets need is `package`.
    static let publicSurface: Set<String> = [
        "Runtime", "RuntimeOptions", "ProgramExit", "MainExecutor", "ThreadExecutor", "HostError", "PluginLoadError",
        "Configuration", "Submission", "SubmissionURL", "RetryPolicy", "StorageLimits", "Limits", "LoggingDestination",
        "LogDestination", "LogLevel", "PluginSlot", "ReportRequest", "ReportDocument", "ReportContent", "ReportType", "Trigger",
        "Attachment", "AttachmentInfo", "AttachmentSource", "OfferedAttachment", "InternalLogEntry", "TrailEntry", "Privacy",
        "DialogPresenter", "DialogFields", "DialogDecision", "Breadcrumb", "SessionHistory", "Metrics",
    ]

    @Test("Public surface: the engine makes public only the runtime, its options and value types (everything else is package or internal)")
    func publicSurface() throws {
        let declared = try LayerGraph.parse(swiftFilesUnder: Self.sources).reduce(into: Set<String>()) { $0.formUnion($1.publicDeclarations) }
        #expect(declared.subtracting(Self.publicSurface).sorted() == [], "public beyond the runtime's surface")
        #expect(Self.publicSurface.subtracting(declared).sorted() == [], "listed here but no longer public")
    }

    /// One line per engine target, highest first: `Target → what it declares`.
    static func rendered(_ targets: [(name: String, dependencies: [String], folder: String)]) -> String {
        engineTargets.reversed().compactMap { name in
            targets.first { $0.name == name }.map { "\($0.name) → \($0.dependencies.joined(separator: ", "))\n" }
        }.joined()
    }

    @Test("Layers: ARCHITECTURE.md draws the graph Package.swift declares (the build enforces it: declared = used)")
    func documentedGraph() throws {
        let root = Self.sourcesFolder.deletingLastPathComponent()
        let package = try String(contentsOf: root.appendingPathComponent("Package.swift"), encoding: .utf8)
        let document = try String(contentsOf: root.appendingPathComponent("ARCHITECTURE.md"), encoding: .utf8)
        let begin = try #require(document.range(of: "<!-- layers:begin -->\n```\n"))
        let end = try #require(document.range(of: "```\n<!-- layers:end -->"))
        let drawn = String(document[begin.upperBound..<end.lowerBound])
        let targets = Self.declaredTargets(packageText: package)
        #expect(drawn == Self.rendered(targets), "expected:\n\(Self.rendered(targets))")
        // Every engine target is drawn, so a new edge or target cannot slip past the drawing.
        #expect(targets.filter { Self.engineTargets.contains($0.name) }.count == Self.engineTargets.count)
    }

    /// Each target of Package.swift with its declared dependencies and its folder:
    /// `.target(name: "X", dependencies: [...]` with an optional `path:` after them.
    static func declaredTargets(packageText: String) -> [(name: String, dependencies: [String], folder: String)] {
        let pattern = #/\.(target|testTarget|executableTarget)\(\s*name: "([\w-]+)",\s*dependencies: \[([^\]]*)\](?:,\s*path: "([^"]+)")?/#
        return packageText.matches(of: pattern).map { match in
            let dependencies = match.3.split(separator: ",").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: " \"\n")) }
                .filter { !$0.isEmpty }
            let folder = match.4.map(String.init) ?? (match.1 == "testTarget" ? "Tests/" : "Sources/") + match.2
            return (String(match.2), dependencies, folder)
        }
    }

    /// The declared dependencies of a Swift target that none of its files imports.
    static func unusedDependencies(declared: [String], sources: [String]) -> [String] {
        let imports = Set(sources.flatMap { text in
            text.matches(of: #/(?m)^(?:@testable |@_exported )?import (\w+)/#).map { String($0.1) }
        })
        return declared.filter { !imports.contains($0.replacingOccurrences(of: "-", with: "_")) }
    }

    @Test("Layers: declared = used: every dependency a Swift target declares in Package.swift is imported by one of its files")
    func everyDeclaredEdgeUsed() throws {
        let root = Self.sourcesFolder.deletingLastPathComponent()
        let package = try String(contentsOf: root.appendingPathComponent("Package.swift"), encoding: .utf8)
        var unused: [String] = []
        for target in Self.declaredTargets(packageText: package) {
            let folder = root.appendingPathComponent(target.folder)
            let enumerator = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil)
            var sources: [String] = []
            while let url = enumerator?.nextObject() as? URL {
                if url.pathExtension == "swift" { sources.append(try String(contentsOf: url, encoding: .utf8)) }
            }
            guard !sources.isEmpty else { continue }  // a C target includes, it does not import
            unused += Self.unusedDependencies(declared: target.dependencies, sources: sources).map { "\(target.name) → \($0)" }
        }
        #expect(unused == [], "declared in Package.swift, imported by no file of the target")
        // The import check (the build's) covers the other half: a use that is not declared.
    }

    @Test("Layers: the declared-edge check finds a dependency no file imports")
    func unusedEdgeCheckCanFail() {
        let sources = ["import HostModel\n@testable import HostSupport\n// import HostStore\n"]
        #expect(Self.unusedDependencies(declared: ["HostModel", "HostSupport", "HostStore"], sources: sources) == ["HostStore"])
        let targets = Self.declaredTargets(packageText: #".target(name: "BenchPlugin", dependencies: ["PluginAPI"], path: "Benchmarks/BenchPlugin"),"#)
        #expect(targets.count == 1 && targets[0].folder == "Benchmarks/BenchPlugin" && targets[0].dependencies == ["PluginAPI"])
    }

    /// Files kept longer on purpose, with why.
    static let sizeExceptions: Set<String> = []
    /// Functions that are a table (one entry a line), by file: longer on purpose.
    static let tableFunctions: [String: String] = [
        "Tests/ReporthostTests/CheckCommandTests.swift": "func brokenCase(",  // a broken fixture per rule
    ]

    /// Functions of more than `limit` lines in `text` (Swift or C): a declaration line, then
    /// its braces counted to the close (C's character literals, strings and line comments left
    /// out: `'{'` and `'"'` are no brace and no string).
    static func longFunctions(in text: String, limit: Int = 80) -> [(line: Int, length: Int)] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        let start = #/^\s*((public|package|private|fileprivate|static|mutating|override|@\w+|nonisolated)\s+)*(func|init[?]?)[\s(<]|^[A-Za-z_][\w \*]*\b\w+\([^;]*$/#
        var found: [(Int, Int)] = []
        var index = 0
        while index < lines.count {
            let line = String(lines[index])
            guard line.firstMatch(of: start) != nil, !line.trimmingCharacters(in: .whitespaces).hasPrefix("//"),
                !line.hasPrefix(" ") || line.contains("func ") || line.contains("init")
            else {
                index += 1
                continue
            }
            var depth = 0
            var opened = false
            var end = index
            scan: while end < lines.count {
                let code = String(lines[end]).replacing(#/'(\\.|[^'\\])'/#, with: "").replacing(#/"(\\.|[^"\\])*"/#, with: "")
                    .split(separator: "//", maxSplits: 1).first ?? ""
                for character in code {
                    if character == "{" { depth += 1; opened = true }
                    if character == "}" { depth -= 1 }
                }
                if opened && depth <= 0 { break scan }
                if !opened && (code.hasSuffix(";") || end > index + 6) { break scan }
                end += 1
            }
            if opened && end - index + 1 > limit { found.append((index + 1, end - index + 1)) }
            index = opened && !line.hasPrefix(" ") ? end + 1 : index + 1
        }
        return found
    }

    @Test("Sizes: no Swift file over 400 lines, no C file over 450, no function over 80 lines")
    func sizes() throws {
        let root = Self.sourcesFolder.deletingLastPathComponent()
        var found: [String] = []
        for folder in ["Sources", "Tests", "Benchmarks", "Plugins"] {
            let enumerator = FileManager.default.enumerator(at: root.appendingPathComponent(folder), includingPropertiesForKeys: nil)
            while let url = enumerator?.nextObject() as? URL {
                let limit = url.pathExtension == "swift" ? 400 : url.pathExtension == "c" ? 450 : 0
                let name = String(url.path.dropFirst(root.path.count + 1))
                guard limit > 0, !name.contains("/.build/"), !Self.sizeExceptions.contains(name) else { continue }
                let text = try String(contentsOf: url, encoding: .utf8)
                let count = text.split(separator: "\n", omittingEmptySubsequences: false).count - (text.hasSuffix("\n") ? 1 : 0)
                if count > limit { found.append("\(name): \(count) lines") }
                let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
                found += Self.longFunctions(in: text)
                    .filter { function in Self.tableFunctions[name].map { !lines[function.line - 1].contains($0) } ?? true }
                    .map { "\(name):\($0.line): a function of \($0.length) lines" }
            }
        }
        #expect(found == [], "over the limits:\n\(found.joined(separator: "\n"))")
    }

    @Test("Harness: no test starts a child with Foundation's Process, whose wait hung for ever once (it waits for a SIGCHLD its signal source may never receive): StartedChild and ChildProcess spawn and reap theirs")
    func noFoundationProcess() throws {
        let tests = Self.sourcesFolder.deletingLastPathComponent().appendingPathComponent("Tests")
        var found: [String] = []
        let enumerator = FileManager.default.enumerator(at: tests, includingPropertiesForKeys: nil)
        while let url = enumerator?.nextObject() as? URL {
            guard url.pathExtension == "swift" else { continue }
            let text = try String(contentsOf: url, encoding: .utf8)
            if Self.startsFoundationProcess(text) { found.append(url.lastPathComponent) }
        }
        #expect(found == [], "Foundation's Process in: \(found)")
        // The check sees one when there is one.
        #expect(Self.startsFoundationProcess("let child = " + "Process" + "()\n"))
        #expect(!Self.startsFoundationProcess("let child = try StartedChild.start(path, [])\n"))
    }

    /// Whether `text` makes a Foundation `Process`: its initializer called with no argument,
    /// the name not the end of a longer one.
    static func startsFoundationProcess(_ text: String) -> Bool {
        var rest = Substring(text)
        while let found = rest.range(of: "Process" + "()") {
            if found.lowerBound == rest.startIndex || !rest[rest.index(before: found.lowerBound)].isLetter { return true }
            rest = rest[found.upperBound...]
        }
        return false
    }

    @Test("Sizes: the function check finds a function of 81 lines, not one of 80, whatever braces its strings, comments and C character literals hold")
    func sizeCheckCanFail() {
        func function(_ bodyLines: Int) -> String {
            "    func long() {\n" + String(repeating: "        let x = \"}\" // }\n", count: bodyLines) + "    }\n"
        }
        #expect(Self.longFunctions(in: function(78)).isEmpty, "80 lines, braces in strings and comments not counted")
        #expect(Self.longFunctions(in: function(79)).map(\.length) == [81])
        let c = "static int c_function(int a) {\n" + String(repeating: "    a++;\n", count: 80) + "}\n"
        #expect(Self.longFunctions(in: function(78) + c).map(\.length) == [82])
        let characters = "static int braces(char c) {\n" + String(repeating: "    if (c == '{' || c == '\\'' || c == '\"') c++;\n", count: 78)
            + "}\n"
        #expect(Self.longFunctions(in: characters + c).map(\.length) == [82], "80 lines, braces and quotes in character literals not counted")
    }

    @Test("Layers: the drawing check reads a changed edge")
    func graphCheckCanFail() {
        let targets = Self.declaredTargets(packageText: #".target(name: "HostStore", dependencies: ["HostModel", "CSQLite"]),"#)
        #expect(targets.count == 1 && targets[0].name == "HostStore" && targets[0].dependencies == ["HostModel", "CSQLite"])
        #expect(Self.rendered(targets) == "HostStore → HostModel, CSQLite\n")
    }
}

/// What each file declares and uses, read from the compiler's parse tree (`swiftc
/// -dump-parse`: types, calls and values in code; comments, strings and `import`s are not
/// uses): the public surface and the record-state check read it.
struct LayerGraph {
    /// What one source file declares and uses.
    struct File {
        var folder: String
        var name: String
        /// Names declared at top level, private ones left out.
        var declarations: Set<String> = []
        /// Names declared `public` at top level.
        var publicDeclarations: Set<String> = []
        /// Names used in code: types, called or referenced names, extended types.
        var uses: Set<String> = []
        /// Members an extension adds to a type, private ones left out.
        var extensionMembers: [(type: String, member: String)] = []
        /// Member names used after a dot (`repository.seedRecord(…)`).
        var memberUses: Set<String> = []
    }

    /// Parses every Swift file under `root` in one `swiftc -dump-parse` (syntax only: no
    /// module, no type checking) and reads each file's top-level declarations, extension
    /// members and uses from the tree.
    /// A file's folder is the one it is in (`Sources/HostSupport/Support/JSON.swift`: `Support`).
    static func parse(swiftFilesUnder roots: [URL]) throws -> [File] {
        var paths: [String] = []
        for root in roots {
            let enumerator = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil)
            while let url = enumerator?.nextObject() as? URL {
                if url.pathExtension == "swift" { paths.append(url.path) }
            }
        }
        let tree = try compilerParseTree(of: paths.sorted())
        var files: [File] = []
        let lines = tree.split(separator: "\n", omittingEmptySubsequences: true)
        var extending: String?
        for (index, line) in lines.enumerated() {
            let depth = line.prefix { $0 == " " }.count / 2
            let node = line.drop { $0 == " " }
            if node.hasPrefix("(source_file ") {
                let parts = (quoted(node) ?? "").split(separator: "/")
                files.append(File(folder: parts.count > 1 ? String(parts[parts.count - 2]) : "(top)", name: String(parts.last ?? "")))
                continue
            }
            guard !files.isEmpty else { continue }
            if depth == 1 { extending = nil }
            let kind = node.dropFirst().prefix { $0 != " " && $0 != ")" }
            if depth == 1, kind == "extension_decl", let type = quoted(node) {
                extending = type
                files[files.count - 1].uses.insert(type)
            } else if depth == 1, declarationKinds.contains(String(kind)), let name = quoted(node) {
                if !isPrivate(lines, declarationAt: index, depth: depth) { files[files.count - 1].declarations.insert(baseName(name)) }
                if access(lines, declarationAt: index, depth: depth) == "public" {
                    files[files.count - 1].publicDeclarations.insert(baseName(name))
                }
            } else if depth == 2, let type = extending, memberKinds.contains(String(kind)), let name = quoted(node) {
                if !isPrivate(lines, declarationAt: index, depth: depth) {
                    files[files.count - 1].extensionMembers.append((type, baseName(name)))
                }
            }
            if node.hasPrefix("(unresolved_dot_expr "), let field = value(of: "field", in: node) {
                files[files.count - 1].memberUses.insert(baseName(field))
            }
            for key in [#"type_unqualified_ident id=""#, #"unresolved_decl_ref_expr "#] {
                if node.hasPrefix("(" + key), let name = value(of: key.hasPrefix("type") ? "id" : "name", in: node) {
                    files[files.count - 1].uses.insert(baseName(name))
                }
            }
        }
        return files
    }

    static let declarationKinds: Set<String> = [
        "struct_decl", "class_decl", "enum_decl", "protocol", "typealias", "func_decl", "var_decl", "actor_decl",
    ]
    static let memberKinds: Set<String> = declarationKinds.union(["constructor_decl", "subscript_decl"])

    /// Whether the declaration at `index` is `private` or `fileprivate`.
    static func isPrivate(_ lines: [Substring], declarationAt index: Int, depth: Int) -> Bool {
        ["private", "fileprivate"].contains(access(lines, declarationAt: index, depth: depth))
    }

    /// The access level the declaration at `index` states (an attribute node one level below
    /// it), nil when it states none.
    static func access(_ lines: [Substring], declarationAt index: Int, depth: Int) -> String? {
        for line in lines[(index + 1)...] {
            let childDepth = line.prefix { $0 == " " }.count / 2
            if childDepth <= depth { return nil }
            if childDepth == depth + 1, line.contains("(access_control_attr"), let level = line.split(separator: "=").last {
                return String(level.prefix { $0.isLetter })
            }
        }
        return nil
    }

    /// `name(_:label:)` → `name`.
    static func baseName(_ name: String) -> String { String(name.prefix { $0 != "(" }) }

    /// The first double-quoted string on the line.
    static func quoted(_ node: Substring) -> String? {
        guard let open = node.firstIndex(of: "\"") else { return nil }
        let rest = node[node.index(after: open)...]
        return rest.firstIndex(of: "\"").map { String(rest[..<$0]) }
    }

    /// `key="value"` on the line.
    static func value(of key: String, in node: Substring) -> String? {
        guard let range = node.range(of: " \(key)=\"") ?? node.range(of: "(\(key)=\"") else { return nil }
        let rest = node[range.upperBound...]
        return rest.firstIndex(of: "\"").map { String(rest[..<$0]) }
    }

    /// `swiftc -dump-parse` over `paths`: the tree on standard output or error.
    static func compilerParseTree(of paths: [String]) throws -> String {
        let search = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin").split(separator: ":").map(String.init)
        guard let swiftc = search.map({ $0 + "/swiftc" }).first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw ParseFailure(message: "swiftc is not on PATH")
        }
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("parse-\(UUID().uuidString).txt")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: output) }
        let handle = try FileHandle(forWritingTo: output)
        let ending = try StartedChild.start(swiftc, ["-dump-parse"] + paths, output: handle.fileDescriptor, errors: handle.fileDescriptor)
            .wait()
        try handle.close()
        let tree = String(decoding: try Data(contentsOf: output), as: UTF8.self)
        guard ending == .exited(0), tree.contains("(source_file ") else {
            throw ParseFailure(message: "swiftc -dump-parse failed (\(ending)): \(tree.prefix(2_000))")
        }
        return tree
    }

    struct ParseFailure: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }
}
