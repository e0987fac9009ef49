import Foundation
import HostTestSupport
import Testing

/// The Rust crate's ABI (`Plugins/rust/reporthost-plugin/src/abi.rs`) is a transcription of
/// the C header: a C program and a Rust program print every struct's size, every member's
/// offset and every constant, from the header and from `abi.rs`, and the two outputs must be
/// the same. Every struct the header defines must be in `abi.rs`.
@Suite struct RustABITests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let abi = root.appendingPathComponent("Plugins/rust/reporthost-plugin/src/abi.rs")

    /// `pub struct NAME { pub member: …, }` blocks of `abi.rs`, members in order.
    static func structs(in text: String) -> [(name: String, members: [String])] {
        text.matches(of: /#\[repr\(C\)\]\s*pub struct (\w+) \{([^}]*)\}/).map { match in
            let members = String(match.2).matches(of: /(?m)^\s*pub (\w+):/).map { String($0.1) }
            return (String(match.1), members)
        }
    }

    /// `pub const NAME: TYPE = …;` of `abi.rs`.
    static func constants(in text: String) -> [String] {
        text.matches(of: /(?m)^pub const (\w+):/).map { String($0.1) }
    }

    /// The structs a header defines (`typedef struct NAME {`).
    static func headerStructs() throws -> Set<String> {
        let folder = Products.pluginAPIInclude.appendingPathComponent("reporthost")
        var names: Set<String> = []
        for file in try FileManager.default.contentsOfDirectory(atPath: folder.path) where file.hasSuffix(".h") && file != "embed.h" {
            let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            names.formUnion(text.matches(of: /typedef struct (\w+) \{/).map { String($0.1) })
        }
        return names
    }

    /// Writes `source` to `name` in `folder`, builds it with `build` and returns what it prints.
    func output(of source: String, named name: String, in folder: URL, build: ([String]) throws -> Void, _ arguments: (String, String) -> [String])
        throws -> String
    {
        let file = folder.appendingPathComponent(name)
        try source.write(to: file, atomically: true, encoding: .utf8)
        let program = folder.appendingPathComponent(name + ".out")
        try build(arguments(file.path, program.path))
        let run = try ChildProcess.run(program.path, [])
        try #require(run.status == 0, "\(name): \(run.stderr)")
        return run.stdout
    }

    /// What a C program prints of the header and a Rust program of `abi` (a copy of
    /// `abi.rs`): sizes, offsets and constants, in the same words.
    func layouts(abi: URL) throws -> (fromHeader: String, fromRust: String) {
        let text = try String(contentsOf: abi, encoding: .utf8)
        let structs = Self.structs(in: text).filter { !$0.members.isEmpty }  // rh_report is opaque
        let constants = Self.constants(in: text)
        try #require(structs.count >= 4 && constants.count >= 10, "\(structs.map(\.name)) \(constants)")
        var c = "#include <stddef.h>\n#include <stdio.h>\n#include <reporthost/plugin.h>\nint main(void) {\n"
        var rust = "#![allow(dead_code)]\n#[path = \"\(abi.path)\"]\nmod abi;\nuse std::mem::{offset_of, size_of};\nfn main() {\n"
        for (name, members) in structs {
            c += "    printf(\"\(name) size %zu\\n\", sizeof(\(name)));\n"
            rust += "    println!(\"\(name) size {}\", size_of::<abi::\(name)>());\n"
            for member in members {
                c += "    printf(\"\(name).\(member) offset %zu\\n\", offsetof(\(name), \(member)));\n"
                rust += "    println!(\"\(name).\(member) offset {}\", offset_of!(abi::\(name), \(member)));\n"
            }
        }
        for constant in constants {
            c += "    printf(\"\(constant) = %lld\\n\", (long long)(\(constant)));\n"
            rust += "    println!(\"\(constant) = {}\", abi::\(constant) as i64);\n"
        }
        c += "    return 0;\n}\n"
        rust += "}\n"
        let folder = makeTemporaryDirectory("rust-abi")
        let fromHeader = try output(of: c, named: "layout.c", in: folder, build: { try Fixtures.compile($0) }) { source, out in
            ["-std=c11", "-Wall", "-Werror", "-I", Products.pluginAPIInclude.path, source, "-o", out]
        }
        let fromRust = try output(of: rust, named: "layout.rs", in: folder, build: { arguments in
            let built = try ChildProcess.run("/usr/bin/env", ["rustc"] + arguments)
            try #require(built.status == 0, "rustc: \(built.stderr)")
        }) { source, out in ["--edition", "2021", "-O", source, "-o", out] }
        return (fromHeader, fromRust)
    }

    @Test("ABI: the Rust crate's abi.rs has every struct of the header, with the same size, member offsets and constants")
    func rustMatchesTheHeader() throws {
        let text = try String(contentsOf: Self.abi, encoding: .utf8)
        let missing = try Self.headerStructs().subtracting(Self.structs(in: text).map(\.name))
        #expect(missing.isEmpty, "structs of the header that abi.rs does not have: \(missing.sorted())")
        let (fromHeader, fromRust) = try layouts(abi: Self.abi)
        let differences = zip(fromHeader.split(separator: "\n"), fromRust.split(separator: "\n")).filter { $0 != $1 }
        #expect(fromRust == fromHeader, "abi.rs and the header differ:\n\(differences.map { "C: \($0)  Rust: \($1)" }.joined(separator: "\n"))")
        #expect(fromHeader.split(separator: "\n").count > 60)
    }

    @Test("ABI: the check fails on a transcription with two members swapped")
    func checkCanFail() throws {
        let text = try String(contentsOf: Self.abi, encoding: .utf8)
        let swapped = text.replacingOccurrences(
            of: "    pub summary: Getter,\n    pub set_summary: Setter,", with: "    pub set_summary: Setter,\n    pub summary: Getter,")
        try #require(swapped != text)
        let copy = makeTemporaryDirectory("rust-abi-swapped").appendingPathComponent("abi.rs")
        try swapped.write(to: copy, atomically: true, encoding: .utf8)
        let (fromHeader, fromRust) = try layouts(abi: copy)
        #expect(fromRust != fromHeader)
    }
}
