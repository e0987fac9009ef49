import Foundation
import Testing

/// The engine's folders form layers, and data flows one way through them (ARCHITECTURE.md):
/// a folder may use what folders below it declare, never what a folder above it or beside it
/// declares. Targets make the same rule a build error between modules; inside `Host` this test
/// is what enforces it.
struct ArchitectureTests {
    /// `Sources/Host`'s folders, lowest first; folders in one entry are siblings (neither may
    /// use the other).
    static let layers: [[String]] = [
        ["Support", "Capture"], ["Diagnostics"], ["Configuration"], ["Report"], ["Plugins"], ["Pipeline"],
        ["Repository"], ["Recovery", "Delivery"], ["Session"], ["Runtime"],
    ]

    static var sourcesFolder: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources")
    }

    /// The engine's targets, one per layer (Package.swift): their dependencies make a
    /// wrong-way reference between them a build error. What this test adds is the order of
    /// the folders inside a target, and that members live with their type.
    static let engineTargets = ["HostCore", "HostCapture", "HostPlugins", "HostStore", "HostRecovery", "HostDelivery", "Host"]
    static var sources: [URL] { engineTargets.map { sourcesFolder.appendingPathComponent($0) } }

    @Test("Layers: no folder of the engine uses a name declared in a folder above or beside it, and members live with their type (read from the compiler's parse tree)")
    func noUpwardReference() throws {
        let graph = try LayerGraph(roots: Self.sources, layers: Self.layers)
        #expect(graph.unplaced.isEmpty, "folders missing from the layer list: \(graph.unplaced)")
        #expect(graph.violations.isEmpty, "\(graph.violations.joined(separator: "\n"))")
    }

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

    @Test("Layers: ARCHITECTURE.md shows the graph the sources have (derived from the names each folder uses)")
    func documentedGraph() throws {
        let graph = try LayerGraph(roots: Self.sources, layers: Self.layers)
        let document = try String(
            contentsOf: Self.sourcesFolder.deletingLastPathComponent().appendingPathComponent("ARCHITECTURE.md"),
            encoding: .utf8)
        let begin = try #require(document.range(of: "<!-- layers:begin -->\n```\n"))
        let end = try #require(document.range(of: "```\n<!-- layers:end -->"))
        #expect(String(document[begin.upperBound..<end.lowerBound]) == graph.rendered, "expected:\n\(graph.rendered)")
    }

    @Test("Layers: the check fails on a lower folder that uses a higher one's name")
    func checkCanFail() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("layers-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        for folder in ["Low", "High"] {
            try FileManager.default.createDirectory(at: root.appendingPathComponent(folder), withIntermediateDirectories: true)
        }
        try "struct Engine {}\nfunc helper() -> Engine { Engine() }\n".write(
            to: root.appendingPathComponent("High/Engine.swift"), atomically: true, encoding: .utf8)
        // A name in a comment or a string is not a use; a name in code is.
        try "// Engine\nlet label = \"Engine\"\nstruct Part { var owner: Engine? }\n".write(
            to: root.appendingPathComponent("Low/Part.swift"), atomically: true, encoding: .utf8)
        let graph = try LayerGraph(roots: [root], layers: [["Low"], ["High"]])
        #expect(graph.violations == ["Low/Part.swift uses Engine from High"])
        // An import of a module named like a type, a comment and a string are not uses.
        try "import Engine\n// Engine\nlet label = \"Engine // not a comment\"\nstruct Part {}\n".write(
            to: root.appendingPathComponent("Low/Part.swift"), atomically: true, encoding: .utf8)
        #expect(try LayerGraph(roots: [root], layers: [["Low"], ["High"]]).violations.isEmpty)
        // A member added to a lower folder's type from a higher folder, wherever it is used,
        // is a wrong-way edge the graph would not show (the `LiveReport.snapshot` case).
        try "extension Part {\n    var engine: Engine? { nil }\n    private var hidden: Int { 0 }\n}\n".write(
            to: root.appendingPathComponent("High/Extras.swift"), atomically: true, encoding: .utf8)
        #expect(try LayerGraph(roots: [root], layers: [["Low"], ["High"]]).violations == ["High/Extras.swift adds engine to Part, which Low declares"])
    }
}

/// Which folder uses which, read from the compiler's parse tree (`swiftc -dump-parse`): a
/// name a file uses in code (a type, a call, a value: never a comment, a string or an
/// `import`) that another folder declares at top level is an edge. Members live with their
/// type: an extension that adds a member to a type another folder declares is a violation
/// of its own, so a use of a member never crosses a folder the graph does not show.
struct LayerGraph {
    var edges: [String: Set<String>] = [:]
    var violations: [String] = []
    var unplaced: [String] = []
    let order: [String]

    init(roots: [URL], layers: [[String]]) throws {
        order = layers.flatMap { $0 }.reversed()
        let rank = Dictionary(uniqueKeysWithValues: layers.enumerated().flatMap { index, folders in folders.map { ($0, index) } })
        let files = try Self.parse(swiftFilesUnder: roots)
        unplaced = Set(files.map(\.folder)).filter { rank[$0] == nil }.sorted()
        var declaredIn: [String: Set<String>] = [:]
        for file in files {
            for name in file.declarations { declaredIn[name, default: []].insert(file.folder) }
        }
        for file in files {
            for name in file.uses.sorted() {
                for owner in (declaredIn[name] ?? []).sorted() where owner != file.folder {
                    edges[file.folder, default: []].insert(owner)
                    if let mine = rank[file.folder], let theirs = rank[owner], theirs >= mine {
                        violations.append("\(file.folder)/\(file.name) uses \(name) from \(owner)")
                    }
                }
            }
            for (type, member) in file.extensionMembers {
                for owner in (declaredIn[type] ?? []).sorted() where owner != file.folder {
                    violations.append("\(file.folder)/\(file.name) adds \(member) to \(type), which \(owner) declares")
                }
            }
        }
        violations.sort()
    }

    /// One line per folder, highest first: `Folder → what it uses`.
    var rendered: String {
        order.map { folder in
            let uses = order.reversed().filter { edges[folder]?.contains($0) == true }
            return uses.isEmpty ? "\(folder)\n" : "\(folder) → \(uses.joined(separator: ", "))\n"
        }.joined()
    }

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
