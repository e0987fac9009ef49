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

    static var sources: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/Host")
    }

    @Test("Layers: no folder of the engine uses a name declared in a folder above or beside it")
    func noUpwardReference() throws {
        let graph = try LayerGraph(root: Self.sources, layers: Self.layers)
        #expect(graph.unplaced.isEmpty, "folders missing from the layer list: \(graph.unplaced)")
        #expect(graph.violations.isEmpty, "\(graph.violations.joined(separator: "\n"))")
    }

    @Test("Layers: ARCHITECTURE.md shows the graph the sources have (derived from the names each folder uses)")
    func documentedGraph() throws {
        let graph = try LayerGraph(root: Self.sources, layers: Self.layers)
        let document = try String(
            contentsOf: Self.sources.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("ARCHITECTURE.md"),
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
        let graph = try LayerGraph(root: root, layers: [["Low"], ["High"]])
        #expect(graph.violations == ["Low/Part.swift uses Engine from High"])
        try "// Engine\nlet label = \"Engine // not a comment\"\n".write(
            to: root.appendingPathComponent("Low/Part.swift"), atomically: true, encoding: .utf8)
        #expect(try LayerGraph(root: root, layers: [["Low"], ["High"]]).violations.isEmpty)
    }
}

/// Which folder uses which: a name used in a folder's code (comments and string literals
/// left out) that another folder declares at top level is an edge.
struct LayerGraph {
    var edges: [String: Set<String>] = [:]
    var violations: [String] = []
    var unplaced: [String] = []
    let order: [String]

    init(root: URL, layers: [[String]]) throws {
        order = layers.flatMap { $0 }.reversed()
        let rank = Dictionary(uniqueKeysWithValues: layers.enumerated().flatMap { index, folders in folders.map { ($0, index) } })
        var files: [(folder: String, name: String, code: String)] = []
        let enumerator = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil)
        while let url = enumerator?.nextObject() as? URL {
            guard url.pathExtension == "swift" else { continue }
            let parts = url.path.dropFirst(root.path.count + 1).split(separator: "/")
            let folder = parts.count > 1 ? String(parts[0]) : "(top)"
            files.append((folder, String(parts.last ?? ""), Self.code(of: try String(contentsOf: url, encoding: .utf8))))
        }
        unplaced = Set(files.map(\.folder)).filter { rank[$0] == nil }.sorted()
        var declaredIn: [String: Set<String>] = [:]
        let declaration = try NSRegularExpression(
            pattern: #"^(?:@\w+(?:\([^)]*\))?\s+)*((?:(?:public|internal|private|fileprivate|package|final|nonisolated|indirect)\s+)*)(?:class|struct|enum|protocol|actor|typealias|func|let|var)\s+([A-Za-z_]\w*)"#,
            options: [.anchorsMatchLines])
        for file in files {
            let text = file.code as NSString
            for match in declaration.matches(in: file.code, range: NSRange(location: 0, length: text.length)) {
                if text.substring(with: match.range(at: 1)).contains("private") { continue }
                declaredIn[text.substring(with: match.range(at: 2)), default: []].insert(file.folder)
            }
        }
        let word = try NSRegularExpression(pattern: #"[A-Za-z_]\w*"#)
        for file in files {
            let text = file.code as NSString
            let used = Set(word.matches(in: file.code, range: NSRange(location: 0, length: text.length)).map { text.substring(with: $0.range) })
            for name in used.sorted() {
                for owner in (declaredIn[name] ?? []).sorted() where owner != file.folder {
                    edges[file.folder, default: []].insert(owner)
                    if let mine = rank[file.folder], let theirs = rank[owner], theirs >= mine {
                        violations.append("\(file.folder)/\(file.name) uses \(name) from \(owner)")
                    }
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

    /// `source` without comments and string literals (their words are not uses).
    static func code(of source: String) -> String {
        var out = ""
        var index = source.startIndex
        func at(_ text: String) -> Bool { source[index...].hasPrefix(text) }
        func skip(past end: String) {
            if let range = source.range(of: end, range: index..<source.endIndex) { index = range.upperBound } else { index = source.endIndex }
        }
        while index < source.endIndex {
            if at("//") {
                skip(past: "\n")
                out.append("\n")
            } else if at("/*") {
                skip(past: "*/")
            } else if at("\"\"\"") {
                index = source.index(index, offsetBy: 3)
                skip(past: "\"\"\"")
                out.append("\"\"")
            } else if at("\"") {
                index = source.index(after: index)
                while index < source.endIndex, source[index] != "\"", source[index] != "\n" {
                    index = source.index(index, offsetBy: source[index] == "\\" ? 2 : 1, limitedBy: source.endIndex) ?? source.endIndex
                }
                if index < source.endIndex { index = source.index(after: index) }
                out.append("\"\"")
            } else {
                out.append(source[index])
                index = source.index(after: index)
            }
        }
        return out
    }
}
