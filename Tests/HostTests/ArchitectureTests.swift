import Foundation
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
    static let engineTargets = ["HostCore", "HostCapture", "HostPlugins", "HostStore", "HostRecovery", "HostDelivery", "Host"]
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

    /// The engine's targets and what each declares it depends on, read from Package.swift's
    /// text: `.target(name: "X", dependencies: ["A", "B"]…`.
    static func declaredGraph(packageText: String) -> [(target: String, dependencies: [String])] {
        let pattern = #/\.target\(\s*name: "(\w+)", dependencies: \[([^\]]*)\]/#
        return packageText.matches(of: pattern).map { match in
            (String(match.1), match.2.split(separator: ",").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: " \"\n")) })
        }
    }

    /// One line per engine target, highest first: `Target → what it declares`.
    static func rendered(_ graph: [(target: String, dependencies: [String])]) -> String {
        let engine = graph.filter { engineTargets.contains($0.target) }
        return engineTargets.reversed().compactMap { target in
            engine.first { $0.target == target }.map { "\($0.target) → \($0.dependencies.joined(separator: ", "))\n" }
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
        #expect(drawn == Self.rendered(Self.declaredGraph(packageText: package)), "expected:\n\(Self.rendered(Self.declaredGraph(packageText: package)))")
        // Every engine target is drawn, so a new edge or target cannot slip past the drawing.
        #expect(Self.declaredGraph(packageText: package).filter { Self.engineTargets.contains($0.target) }.count == Self.engineTargets.count)
    }

    @Test("Layers: the drawing check reads a changed edge")
    func graphCheckCanFail() {
        let graph = Self.declaredGraph(packageText: #".target(name: "HostStore", dependencies: ["HostCore", "CSQLite"]),"#)
        #expect(graph.count == 1 && graph[0].target == "HostStore" && graph[0].dependencies == ["HostCore", "CSQLite"])
        #expect(Self.rendered(graph) == "HostStore → HostCore, CSQLite\n")
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
    /// A file's folder is the one it is in (`Sources/HostCore/Support/JSON.swift`: `Support`).
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
        let process = Process()
        process.executableURL = URL(fileURLWithPath: swiftc)
        process.arguments = ["-dump-parse"] + paths
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("parse-\(UUID().uuidString).txt")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: output) }
        let handle = try FileHandle(forWritingTo: output)
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        process.waitUntilExit()
        try handle.close()
        let tree = String(decoding: try Data(contentsOf: output), as: UTF8.self)
        guard process.terminationStatus == 0, tree.contains("(source_file ") else {
            throw ParseFailure(message: "swiftc -dump-parse failed (\(process.terminationStatus)): \(tree.prefix(2_000))")
        }
        return tree
    }

    struct ParseFailure: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }
}
