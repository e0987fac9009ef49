import Foundation
import Testing

/// One system-call seam (STYLE.md, swift-system's model): every system call the engine makes
/// goes through `SystemCalls` (files named `SystemCalls*.swift`), so a `FaultPlan` can make
/// any of them fail. A raw call anywhere else in the engine's targets fails this test.
@Suite struct SystemCallSeamTests {

    /// The calls the seam wraps.
    static let calls = [
        "open", "close", "read", "write", "pread", "pwrite", "fsync", "fdatasync", "rename", "unlink", "mkdir", "rmdir", "flock",
        "ftruncate", "lseek", "fstat", "stat", "lstat", "access", "chmod", "fchmod", "realpath", "readlink", "dlopen", "dlsym", "kill",
        "pipe", "pipe2", "fcntl", "statvfs", "getrlimit", "setrlimit", "clock_gettime", "posix_spawn", "posix_spawnp", "waitpid",
        "socket", "connect", "getrandom", "mmap", "munmap", "posix_fallocate", "madvise", "mprotect",
    ]

    /// Code without its comments and string literals (a call named in a comment is no call).
    static func code(_ text: String) -> String {
        var out = ""
        var index = text.startIndex
        func starts(_ prefix: String) -> Bool { text[index...].hasPrefix(prefix) }
        while index < text.endIndex {
            if starts("//") {
                index = text[index...].firstIndex(of: "\n") ?? text.endIndex
            } else if starts("/*") {
                index = text[index...].range(of: "*/").map(\.upperBound) ?? text.endIndex
            } else if starts("\"\"\"") {
                let after = text.index(index, offsetBy: 3)
                index = text[after...].range(of: "\"\"\"").map(\.upperBound) ?? text.endIndex
                out += "\"\""
            } else if text[index] == "\"" {
                var next = text.index(after: index)
                while next < text.endIndex && text[next] != "\"" && text[next] != "\n" {
                    if text[next] == "\\" { next = text.index(after: next) }
                    if next < text.endIndex { next = text.index(after: next) }
                }
                index = next < text.endIndex ? text.index(after: next) : text.endIndex
                out += "\"\""
            } else {
                out.append(text[index])
                index = text.index(after: index)
            }
        }
        return out
    }

    /// The raw calls in one file's text: `name(` not after a `.` or a word character, not a
    /// declaration (`func name(`, `case name(`), not a struct's initializer (`stat()`), and not
    /// a call of a function the file declares itself under that name.
    static func rawCalls(in text: String, file: String) -> [String] {
        let code = code(text)
        var found: [String] = []
        for name in calls {
            if code.contains("func \(name)(") { continue }
            var searchFrom = code.startIndex
            while let range = code.range(of: name + "(", range: searchFrom..<code.endIndex) {
                searchFrom = range.upperBound
                var start = range.lowerBound
                if code[..<start].hasSuffix("Glibc.") { start = code.index(start, offsetBy: -6) }
                let previous = start > code.startIndex ? code[code.index(before: start)] : " "
                if previous == "." || previous == "_" || previous.isLetter || previous.isNumber { continue }
                if range.upperBound < code.endIndex && code[range.upperBound] == ")" { continue }  // `stat()`: a struct
                if code[..<start].hasSuffix("case ") { continue }
                // A method of the engine's own under a call's name: `read("summary") { … }`
                // (a string first: no system call takes one), `access(handle, "…")` (the raw
                // call's second argument is an `_OK` mode).
                let arguments = code[range.upperBound...].prefix { $0 != "\n" }
                if (name == "read" || name == "write") && arguments.first == "\"" { continue }
                if name == "access" && !arguments.prefix(while: { $0 != ")" }).contains("_OK") { continue }
                let line = code[..<range.lowerBound].filter { $0 == "\n" }.count + 1
                found.append("\(file):\(line): \(name)(")
            }
        }
        return found
    }

    /// Foundation and the standard library's ways to the same calls: folders and files
    /// (`FileManager`), the wall clock (`Date()`) and randomness.
    static let indirect = ["FileManager.default", "Date()", "SystemRandomNumberGenerator("]

    static func indirectCalls(in text: String, file: String) -> [String] {
        let code = code(text)
        return indirect.flatMap { name in
            code.ranges(of: name).filter { range in
                range.lowerBound == code.startIndex || !code[code.index(before: range.lowerBound)].isLetter
            }.map { range in "\(file):\(code[..<range.lowerBound].filter { $0 == "\n" }.count + 1): \(name)" }
        }
    }

    @Test("I-6: no raw system call in the engine outside the seam (SystemCalls*.swift)")
    func everyCallThroughTheSeam() throws {
        var found: [String] = []
        for target in ArchitectureTests.engineTargets {
            let root = ArchitectureTests.sourcesFolder.appendingPathComponent(target)
            let enumerator = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil)
            while let url = enumerator?.nextObject() as? URL {
                guard url.pathExtension == "swift", !url.lastPathComponent.hasPrefix("SystemCalls") else { continue }
                let text = try String(contentsOf: url, encoding: .utf8)
                let name = "\(target)/\(url.lastPathComponent)"
                found += Self.rawCalls(in: text, file: name) + Self.indirectCalls(in: text, file: name)
            }
        }
        #expect(found.isEmpty, "raw system calls outside the seam:\n\(found.joined(separator: "\n"))")
    }

    /// The places that may name the live seam: the entries that build it (the embedding
    /// library, the receiver) and its definition. Everything else takes the seam it is handed.
    static let liveSeamEntries: Set<String> = ["Embed/Embed.swift", "Receiver/LocalReceiver.swift", "HostSupport/Support/SystemCalls.swift"]

    /// Where `text` names the live seam: `SystemCalls.live`, or `.live` as a default or an
    /// argument of a `SystemCalls` (comments and strings left out).
    static func liveSeamNames(in text: String, file: String) -> [String] {
        let code = code(text)
        return ["SystemCalls.live", "= .live", ": .live"].flatMap { name in
            code.ranges(of: name).map { range in "\(file):\(code[..<range.lowerBound].filter { $0 == "\n" }.count + 1): \(name)" }
        }
    }

    @Test("I-6: the live seam is named only at the entries (at most 5 places); the rest of the code takes the seam it is handed")
    func noBackDoorToTheSeam() throws {
        var found: [String] = []
        let enumerator = FileManager.default.enumerator(at: ArchitectureTests.sourcesFolder, includingPropertiesForKeys: nil)
        while let url = enumerator?.nextObject() as? URL {
            guard url.pathExtension == "swift" else { continue }
            let name = url.path.dropFirst(ArchitectureTests.sourcesFolder.path.count + 1)
            guard !Self.liveSeamEntries.contains(String(name)) else { continue }
            found += Self.liveSeamNames(in: try String(contentsOf: url, encoding: .utf8), file: String(name))
        }
        #expect(found.isEmpty, "the live seam named outside the entries:\n\(found.joined(separator: "\n"))")
        #expect(Self.liveSeamEntries.count <= 5)
    }

    @Test("I-6: the back-door check finds a planted SystemCalls.live and a .live default, not one in a comment")
    func backDoorCheckCanFail() {
        #expect(Self.liveSeamNames(in: "let now = SystemCalls.live.now()\n", file: "F.swift") == ["F.swift:1: SystemCalls.live"])
        #expect(Self.liveSeamNames(in: "func f(system: SystemCalls = .live) {}\n", file: "F.swift") == ["F.swift:1: = .live"])
        #expect(Self.liveSeamNames(in: "// SystemCalls.live\nlet s = \"= .live\"\n", file: "F.swift").isEmpty)
    }

    @Test("I-6: the check finds a planted raw open(, and not one in a comment, a string, a method or the seam's own call")
    func checkCanFail() {
        #expect(Self.rawCalls(in: "let fd = open(path, O_RDONLY)\n", file: "F.swift") == ["F.swift:1: open("])
        #expect(Self.rawCalls(in: "let fd = Glibc.open(path, O_RDONLY)\n", file: "F.swift") == ["F.swift:1: open("])
        #expect(Self.rawCalls(in: "// open(path)\nlet s = \"open(x)\"\nlet fd = system.open(path, 0)\nvar info = stat()\n", file: "F.swift").isEmpty)
        #expect(Self.rawCalls(in: "func read(_ x: Int) {}\nlet y = read(1)\n", file: "F.swift").isEmpty)
        #expect(Self.rawCalls(in: "try read(\"summary\") { $0 }\naccess(handle, \"add\") { _ in }\n", file: "F.swift").isEmpty)
        #expect(Self.rawCalls(in: "if access(path, F_OK) != 0 {}\n", file: "F.swift") == ["F.swift:1: access("])
        #expect(Self.indirectCalls(in: "let names = try FileManager.default.contentsOfDirectory(atPath: p)\nlet t = Date()\n", file: "F.swift")
            == ["F.swift:1: FileManager.default", "F.swift:2: Date()"])
        #expect(Self.indirectCalls(in: "let t = system.now() // Date()\n", file: "F.swift").isEmpty)
    }
}
