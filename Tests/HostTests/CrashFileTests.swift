import Foundation
import Host
import HostRecovery
import HostSupport
import HostTestSupport
import Testing

/// Reading crash files, which come from a dying process: whatever their lines hold, the
/// reader never traps and keeps what it can (SPEC D-1), and it blames a plugin only for its
/// own faults.
@Suite struct CrashFileTests {
    /// A crash file whose stack runs through `frames` (the signal handler's frames first).
    static func file(pc: String, frames: [String], plugin: Bool = true) -> CrashFile? {
        var lines = [
            "reporthost-crash 1", "session s", "signal 11", "code 1", "address 0x0", "thread 7", "time 1700000000",
            "register rip \(pc)",
            "module 0x1000 0x2000 /usr/bin/host-program",
            "module 0x3000 0x4000 /lib/libc.so.6",
            "module 0x5000 0x6000 /plugins/p.so",
        ]
        if plugin { lines += ["plugin_path /plugins/p.so", "plugin_digest abc", "plugin_name p", "callback on_before_report_created"] }
        lines += frames.map { "frame \($0)" } + ["end"]
        return CrashFile(path: "/x.crash", data: Data(lines.joined(separator: "\n").utf8), modifiedAt: Date(), now: Date())
    }

    let host: Set<String> = ["/usr/bin/host-program"]

    @Test("I: the plugin is blamed for a fault in its own code, and for bad arguments it passed to libc")
    func blamesThePlugin() throws {
        // Fault in the plugin; the handler's own frames (host program) come first in the list.
        #expect(try #require(Self.file(pc: "0x5010", frames: ["0x1500", "0x3100", "0x5010", "0x1200"])).blamesPlugin(hostModules: host))
        // Fault in libc (strlen(NULL)) called from the plugin.
        #expect(try #require(Self.file(pc: "0x3010", frames: ["0x1500", "0x3010", "0x5020", "0x1200"])).blamesPlugin(hostModules: host))
        // No usable stack: its call was running, so it is blamed.
        #expect(try #require(Self.file(pc: "0x9999", frames: [])).blamesPlugin(hostModules: host))
    }

    @Test("I: a fault in host code a plugin called back into, or outside any plugin call, blames no plugin")
    func blamesTheHost() throws {
        // The host function the plugin called faults (in the host program, or in libc under it).
        #expect(try !#require(Self.file(pc: "0x1010", frames: ["0x1500", "0x1010", "0x5020"])).blamesPlugin(hostModules: host))
        #expect(try !#require(Self.file(pc: "0x3010", frames: ["0x1500", "0x3010", "0x1020", "0x5020"])).blamesPlugin(hostModules: host))
        // Not in a plugin call at all.
        #expect(try !#require(Self.file(pc: "0x5010", frames: ["0x5010"], plugin: false)).blamesPlugin(hostModules: host))
    }

    @Test("D-1: a line read as bytes gives the numbers and build ids its text gives, and is cut as String.split cuts it: 20,000 random lines of hex digits, prefixes, signs, spaces and bytes that are not UTF-8")
    func bytesAsText() {
        let alphabet: [[UInt8]] = [
            Array("0".utf8), Array("9".utf8), Array("a".utf8), Array("f".utf8), Array("A".utf8), Array("F".utf8), Array("g".utf8),
            Array("0x".utf8), Array("x".utf8), Array("X".utf8), Array("+".utf8), Array("-".utf8), Array(" ".utf8), Array("  ".utf8),
            Array("é".utf8), [0xFF], [0xC3], Array("ffffffffffffffff".utf8), Array("%20".utf8),
        ]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let bytes = (0..<Int.random(in: 0...8, using: &generator)).flatMap { _ in alphabet.randomElement(using: &generator)! }
            let text = String(decoding: bytes, as: UTF8.self)
            bytes.withUnsafeBytes { raw in
                #expect(CrashFile.hex(raw) == CrashFile.hex(text), "\(bytes)")
                #expect(CrashFile.isBuildID(raw) == CrashFile.isBuildID(text), "\(bytes)")
                // Fields are cut from bytes either way (fieldsAsSplit holds them to String.split).
                for limit in [1, 2, 3, Int.max] {
                    let expected = text.split(separator: " ", maxSplits: limit == .max ? .max : limit - 1).map(String.init)
                    #expect(CrashFile.fieldRanges(raw, limit: limit).map { String(decoding: raw[$0], as: UTF8.self) } == expected, "\(bytes) limit \(limit)")
                }
            }
        }
    }

    @Test("D-1: an address in a payload is written as \"0x\" + String(radix: 16) writes it: 0, each power of 16, the largest, and 10,000 random ones")
    func hexText() {
        var generator = SystemRandomNumberGenerator()
        let values: [UInt64] = [0, 1, 9, 10, 15, .max, .max - 1] + (0..<16).map { 1 << (4 * UInt64($0)) }
            + (0..<10_000).map { _ in UInt64.random(in: 0...UInt64.max, using: &generator) >> UInt64.random(in: 0...63, using: &generator) }
        for value in values {
            #expect(CrashFile.hexText(value) == "0x" + String(value, radix: 16), "\(value)")
        }
    }

    @Test("D-1: module and register lines are cut into fields exactly as String.split cuts them, multi-byte text included")
    func fieldsAsSplit() {
        let samples = [
            "a b  c d", "a  b c", " a b", "a b c ", "a b  ", "", "   ", "rax 0x1", "rax 0x1  ", "é e\u{301} ü  ñ x",
            "0x7f00 0x7f10 /usr/lib/x86_64-linux-gnu/libc.so.6", "0x1 0x2 /a%20path/with spaces",
        ]
        for text in samples {
            for limit in [1, 2, 3, Int.max] {
                let expected = text.split(separator: " ", maxSplits: limit == .max ? .max : limit - 1).map(String.init)
                #expect(CrashFile.fields(text, limit: limit) == expected, "\(text.debugDescription) limit \(limit)")
            }
        }
    }

    @Test("D-1: CR-LF lines, repeated, garbled, binary and out-of-range lines are read or left at their defaults, never trap")
    func hostileLines() throws {
        let text = "reporthost-crash 1\r\nsignal 11\r\nsignal 99999999999999999999\r\ncode -\r\nthread 18446744073709551616\r\n"
            + "time 99999999999999999999\r\nframe zz\r\nframe 0x10\r\nmodule 0x1 oops\r\nattribute noequals\r\n\u{0}\u{1}\u{FFFF}\r\nend\r\n"
        var data = Data(text.utf8)
        data.append(contentsOf: [0xff, 0xfe, 0x0a, 0x80])
        let fallback = Date(timeIntervalSince1970: 1_700_000_000)
        let crash = try #require(CrashFile(path: "/x.crash", data: data, modifiedAt: fallback, now: Date()))
        #expect(crash.signal == 0)  // the last signal line is out of range
        #expect(crash.thread == 0)
        #expect(crash.time == fallback)
        #expect(crash.frames == [0x10])
        #expect(crash.modules.isEmpty)
        #expect(crash.complete)
        #expect(crash.payload().serialized().contains("\"signal\":0"))
    }

    @Test("D-1: a value can neither end a line nor start a field: encoded control bytes decode into the value, a lone CR splits nothing")
    func encodedValues() throws {
        let text = "reporthost-crash 1\nsignal 11\nattribute k%3Dx=a%0Dattachment /etc/shadow\nattribute plain=100%25\n"
            + "attachment /tmp/registered%0A.log\nplugin_path /p/x%0Dattachment /etc/passwd.so\nplugin_digest ab\ncallback destroy\n"
            + "attribute raw=a\rattachment /etc/hostname\nmodule 0x1 0x2 /lib/a%20b%ZZ.so\nend\n"
        let crash = try #require(CrashFile(path: "/x.crash", data: Data(text.utf8), modifiedAt: Date(), now: Date()))
        #expect(crash.attributes["k=x"] == "a\rattachment /etc/shadow")
        #expect(crash.attributes["plain"] == "100%")
        #expect(crash.attributes["raw"] == "a\rattachment /etc/hostname", "a lone CR is part of the value")
        #expect(crash.attachmentPaths == ["/tmp/registered\n.log"], "only the one attachment line")
        #expect(crash.plugin?.path == "/p/x\rattachment /etc/passwd.so")
        #expect(crash.modules.first?.path == "/lib/a b%ZZ.so", "an escape that is not two hex digits stays")
    }

    @Test("D-1: a crash time far in the future or before 2000 is replaced by the file's time")
    func implausibleTimes() throws {
        let fallback = Date(timeIntervalSince1970: 1_700_000_000)
        for line in ["time 32503680000", "time 9223372036854775807", "time 1", "time -5"] {
            let crash = try #require(CrashFile(path: "/x", data: Data("reporthost-crash 1\n\(line)\n".utf8), modifiedAt: fallback, now: Date()))
            #expect(crash.time == fallback, "\(line)")
        }
        let now = Int(Date().timeIntervalSince1970)
        let crash = try #require(CrashFile(path: "/x", data: Data("reporthost-crash 1\ntime \(now)\n".utf8), modifiedAt: fallback, now: Date()))
        #expect(Int(crash.time.timeIntervalSince1970) == now)
    }

    @Test("D-1: a file that is not a crash file is not read as one; a FIFO or a device is never opened for reading whole")
    func notCrashFiles() throws {
        #expect(CrashFile(path: "/x", data: Data("hello\n".utf8), modifiedAt: Date(), now: Date()) == nil)
        #expect(CrashFile(path: "/dev/zero", modifiedAt: Date(), system: .live) == nil)
        let fifo = makeTemporaryDirectory("fifo").appendingPathComponent("f.crash").path
        #expect(mkfifo(fifo, 0o600) == 0)
        #expect(CrashFile(path: fifo, modifiedAt: Date(), system: .live) == nil)  // returns at once: no writer ever comes
        #expect(BoundedFile.read(fifo, limit: 10) == .failure(.notRegular))
        #expect(BoundedFile.read("/dev/zero", limit: 10) == .failure(.notRegular))
    }
}
