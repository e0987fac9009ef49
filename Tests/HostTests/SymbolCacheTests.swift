import Foundation
@testable import Host
@testable import HostCapture
@testable import HostModel
@testable import HostSupport
@testable import HostDelivery
@testable import HostPlugins
@testable import HostRecovery
@testable import HostStore
import HostTestSupport
import Testing

/// Recovery symbolicates every crash file through one cache of module files: a library is read
/// once, and each crash looks its frames up from wherever its process had the library mapped.
@Suite struct SymbolCacheTests {
    /// A crash whose process had `library` mapped at `start` and faulted at `start + offset`.
    /// `buildID`: the build id the crash recorded for it (none: any file at that path is it).
    func crash(_ library: String, at start: UInt64, offset: UInt64, buildID: String? = nil, size: UInt64 = 0x100000) throws -> CrashFile {
        let pc = "0x" + String(start + offset, radix: 16)
        let lines = [
            "reporthost-crash 1", "session s", "signal 11", "code 1", "address 0x0", "thread 7", "time 1700000000",
            "register rip \(pc)", "module 0x\(String(start, radix: 16)) 0x\(String(start + size, radix: 16)) \(library)",
        ] + (buildID.map { ["build_id \($0)"] } ?? []) + ["frame \(pc)", "end"]
        return try #require(CrashFile(path: "/x.crash", data: Data(lines.joined(separator: "\n").utf8), modifiedAt: Date(), now: Date()))
    }

    /// Where `library` has its `rh_plugin_entry`.
    func entryOffset(_ library: String) throws -> UInt64 {
        let symbols = try ChildProcess.run("/usr/bin/nm", ["--defined-only", library])
        let entry = try #require(symbols.stdout.split(separator: "\n").first { $0.hasSuffix(" T rh_plugin_entry") })
        return try #require(UInt64(entry.prefix { $0 != " " }, radix: 16))
    }

    @Test("D-1: crashes of processes that mapped one library at different addresses symbolicate alike through one cache")
    func oneLibraryManyProcesses() throws {
        let library = Products.directory.appendingPathComponent("libwrapper-sim.so").path
        let offset = try entryOffset(library)
        let cache = try #require(SymbolCache())
        for start: UInt64 in [0x7f00_0000_0000, 0x5500_0000_0000, 0x7f00_0000_0000] {
            let crashed = try crash(library, at: start, offset: offset)
            let symbolizer = try #require(ElfSymbols(for: crashed, cache: cache))
            #expect(symbolizer.refusals.isEmpty, "\(symbolizer.refusals)")
            let found = symbolizer.symbols(at: start + offset, isReturnAddress: false)
            #expect(found.last?.function == "rh_plugin_entry", "at 0x\(String(start, radix: 16)): \(found)")
            // An address outside the library's mapping names nothing.
            #expect(symbolizer.symbols(at: start - 0x1000, isReturnAddress: false).isEmpty)
        }
    }

    /// The GNU build id of the ELF file at `path`, in hex.
    func buildID(_ path: String) throws -> String {
        let notes = try ChildProcess.run("/usr/bin/readelf", ["-n", path]).stdout
        let line = try #require(notes.split(separator: "\n").first { $0.contains("Build ID:") })
        return String(try #require(line.split(separator: " ").last))
    }

    @Test("D-1: a library vetted for one crash serves the next while the same file is at its path; a file renamed over it is vetted again, and a crash that recorded the old file's build id is refused the new one")
    func replacedLibraryVettedAgain() throws {
        let folder = makeTemporaryDirectory("replaced-library")
        let path = folder.appendingPathComponent("libmodule.so").path
        let original = Products.directory.appendingPathComponent("libwrapper-sim.so").path
        try FileManager.default.copyItem(atPath: original, toPath: path)
        let offset = try entryOffset(original)
        let crashed = try crash(path, at: 0x7f00_0000_0000, offset: offset, buildID: try buildID(original))
        let cache = try #require(SymbolCache())
        for _ in 0..<2 {
            let symbolizer = try #require(ElfSymbols(for: crashed, cache: cache))
            #expect(symbolizer.refusals.isEmpty, "\(symbolizer.refusals)")
            #expect(symbolizer.symbols(at: 0x7f00_0000_0000 + offset, isReturnAddress: false).last?.function == "rh_plugin_entry")
        }
        // Another library renamed over it (as a package upgrade installs one).
        let other = folder.appendingPathComponent("new.so").path
        try FileManager.default.copyItem(atPath: Products.directory.appendingPathComponent("libscrub-pii.so").path, toPath: other)
        #expect(rename(other, path) == 0)
        let symbolizer = try #require(ElfSymbols(for: crashed, cache: cache))
        #expect(symbolizer.refusals.count == 1 && symbolizer.refusals[0].contains("differs"), "\(symbolizer.refusals)")
    }

    @Test("D-1: a frame is looked up once per library file and offset: another library's frame at the same offset is its own")
    func framesKeyedByLibrary() throws {
        let libraries = ["libwrapper-sim.so", "libscrub-pii.so"].map { Products.directory.appendingPathComponent($0).path }
        let offset = try entryOffset(libraries[0])
        let cache = try #require(SymbolCache())
        var found: [[FrameSymbol]] = []
        for library in libraries {
            for start: UInt64 in [0x7f00_0000_0000, 0x5500_0000_0000] {
                let crashed = try crash(library, at: start, offset: offset)
                let cached = try #require(ElfSymbols(for: crashed, cache: cache)).symbols(at: start + offset, isReturnAddress: false)
                let fresh = try #require(ElfSymbols(for: crashed)).symbols(at: start + offset, isReturnAddress: false)
                #expect(cached == fresh, "\(library) at 0x\(String(start, radix: 16))")
                found.append(cached)
            }
        }
        #expect(found[0].last?.function == "rh_plugin_entry" && found[0] == found[1])
        #expect(found[2] != found[0], "the other library's code at that offset is not rh_plugin_entry")
        #expect(cache.frames.count == 2, "one lookup per library and offset")
    }

    @Test("D-1: libc's compressed debug file read through its copy inflated by libdeflate gives the frames libelf's own reading gives")
    func inflatedCopySymbolicatesAlike() throws {
        // libc as this process has it, and its debug file (libc6-dbg, installed by scripts/setup).
        let maps = try String(decoding: BoundedFile.read("/proc/self/maps", limit: 1 << 22, system: SystemCalls()).get(), as: UTF8.self)
        let libc = try #require(maps.split(separator: "\n").compactMap { $0.split(separator: " ").last }.first { $0.hasSuffix("/libc.so.6") })
        let library = String(libc)
        let id = try buildID(library)
        let debugFile = "/usr/lib/debug/.build-id/\(id.prefix(2))/\(id.dropFirst(2)).debug"
        let sections = try ChildProcess.run("/usr/bin/readelf", ["-S", "-W", debugFile]).stdout
        #expect(sections.contains(".debug_info") && sections.contains(".debug_loclists"), "\(debugFile): \(sections)")
        // Every 8th function libc exports, 5 bytes in.
        let exported = try ChildProcess.run("/usr/bin/nm", ["-D", "--defined-only", library]).stdout.split(separator: "\n")
            .filter { $0.contains(" T ") }.compactMap { UInt64($0.prefix { $0 != " " }, radix: 16) }
        let offsets = Set(exported).sorted().enumerated().filter { $0.offset % 8 == 0 }.map { $0.element + 5 }
        #expect(offsets.count > 100)
        let start: UInt64 = 0x7f00_0000_0000
        var found: [SymbolCache.Reading: [[FrameSymbol]]] = [:]
        for reading in [SymbolCache.Reading.byLibelf, .inflated] {
            let cache = try #require(SymbolCache(reading: reading))
            let symbolizer = try #require(ElfSymbols(for: try crash(library, at: start, offset: offsets[0], size: 0x400000), cache: cache))
            #expect(symbolizer.refusals.isEmpty, "\(symbolizer.refusals)")
            found[reading] = offsets.map { symbolizer.symbols(at: start + $0, isReturnAddress: false) }
            let expected = [SymbolCache.Reading.byLibelf: "libelf", .inflated: "libdeflate"][reading]
            #expect(cache.lastInflater == expected, "\(reading)")
        }
        let asLibelf = try #require(found[.byLibelf])
        // What is compared is real DWARF: names, places and inlined frames.
        #expect(asLibelf.filter { $0.last?.line != nil }.count > offsets.count / 2, "\(asLibelf.prefix(5))")
        #expect(asLibelf.contains { $0.contains { $0.inlined } })
        let differing = zip(asLibelf, try #require(found[.inflated])).filter { $0.0 != $0.1 }
        let count = differing.count
        #expect(count == 0, "\(count) of \(offsets.count) differ; the first: \(differing.prefix(1))")
    }
}
