import Foundation
import Host
import HostStore
import HostSupport
import HostTestSupport
import Testing

/// Ordinary machines that are short of something: a real small file system (tmpfs, mounted
/// as root, as CI runs), as a container or a small partition gives one, where no report is
/// lost for the space the host itself takes; and a low descriptor limit.
@Suite(.serialized) struct OrdinaryUseTests {
    /// A tmpfs of `kilobytes` mounted on a fresh folder, unmounted when `body` ends.
    func withSmallDisk<T>(kilobytes: Int, _ body: (URL) throws -> T) throws -> T {
        #expect(getuid() == 0, "these tests mount a tmpfs: run them as root (CI does)")
        let folder = makeTemporaryDirectory("small-disk")
        let mount = try ChildProcess.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(kilobytes)k", "tmpfs", folder.path])
        try #require(mount.status == 0, "mount: \(mount.stderr)")
        defer { _ = try? ChildProcess.run("/bin/umount", ["-l", folder.path]) }
        return try body(folder)
    }

    func report(_ disk: URL, _ summary: String, attach: URL? = nil) throws -> ChildProcess.Result {
        try ChildProcess.reporthost(
            ["report", "bug", "--summary", summary] + (attach.map { ["--attach", $0.path] } ?? []), directory: disk)
    }

    func documents(_ disk: URL) throws -> [JSONValue] {
        let status = try ChildProcess.reporthost(["status", "--json", "--all"], directory: disk)
        try #require(status.status == 0, "\(status.stderr)")
        let ids = try JSONValue.parse(status.stdout)["records"]?.arrayValue?.compactMap { $0["report_id"]?.stringValue } ?? []
        return try ids.map { id in
            let shown = try ChildProcess.reporthost(["show", id, "--json"], directory: disk)
            try #require(shown.status == 0, "\(shown.stderr)")
            return try JSONValue.parse(shown.stdout)
        }
    }

    /// Fills the disk with a file of its own, leaving about `leaving` bytes free.
    func fill(_ disk: URL, leaving: Int) throws {
        var info = statvfs()
        try #require(statvfs(disk.path, &info) == 0)
        let free = Int(info.f_bavail) * Int(info.f_frsize)
        try Data(count: max(free - leaving, 0)).write(to: disk.appendingPathComponent("filler-\(UUID().uuidString)"))
    }

    static let attachment: URL = {
        let file = makeTemporaryDirectory("attachment").appendingPathComponent("big.bin")
        try! Data((0..<1_500_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }).write(to: file)
        return file
    }()

    @Test("D-3: on a 4.5 MB disk the log takes no 4 MB; a report whose attachment does not fit is stored without it, noted, warned, exit 0")
    func attachmentThatDoesNotFit() async throws {
        try await offPool { [self] in
            try withSmallDisk(kilobytes: 4_500) { disk in
                for summary in ["first", "second", "third"] {
                    let result = try report(disk, summary, attach: Self.attachment)
                    #expect(result.status == 0, "\(summary): \(result.stderr)")
                    if summary == "third" {
                        #expect(result.stderr.contains("attachment big.bin (1500000 bytes) not stored: no space left"), "\(result.stderr)")
                    } else {
                        #expect(!result.stderr.contains("not stored"), "\(summary): \(result.stderr)")
                    }
                }
                let log = try FileManager.default.attributesOfItem(atPath: disk.appendingPathComponent(".reporthost/reporthost.sqlite-wal").path)
                #expect((log[.size] as? Int ?? 0) < Repository.logBytes, "the log was preallocated on a 4.5 MB disk")
                let stored = try documents(disk)
                #expect(Set(stored.compactMap { $0["summary"]?.stringValue }) == ["first", "second", "third"])
                for document in stored {
                    let attachments = document["attachments"]?.arrayValue ?? []
                    if document["summary"] == .string("third") {
                        #expect(attachments.isEmpty)
                        let notes = document["internal_log"]?.arrayValue?.compactMap { $0["message"]?.stringValue } ?? []
                        #expect(notes.contains { $0.contains("attachment big.bin (1500000 bytes) omitted: no space left") }, "\(notes)")
                    } else {
                        #expect(attachments.count == 1 && attachments.first?["size"] == .number(1_500_000))
                    }
                }
            }
        }
    }

    @Test("D-13: a disk too full for the report itself is a clear error (exit 1) and loses nothing already stored")
    func diskTooFullForTheReport() async throws {
        try await offPool { [self] in
            try withSmallDisk(kilobytes: 4_500) { disk in
                #expect(try report(disk, "kept").status == 0)
                try fill(disk, leaving: 0)
                let full = try report(disk, "lost", attach: Self.attachment)
                #expect(full.status == 1)
                #expect(full.stderr.contains("the disk is full"), "\(full.stderr)")
                #expect(!full.stderr.contains("Fatal") && full.signal == nil)
                #expect(try documents(disk).compactMap { $0["summary"]?.stringValue } == ["kept"])
            }
        }
    }

    @Test("D-3: on a disk with room the log is preallocated, and given back when a report needs the space")
    func logGivenBack() async throws {
        try await offPool { [self] in
            // Room for the log and the 64 MB it must leave free, and a little more.
            try withSmallDisk(kilobytes: (Repository.logBytes + Repository.spareAfterLogBytes) / 1024 + 2_048) { disk in
                #expect(try ChildProcess.reporthost(["launch"], directory: disk).status == 0)
                let log = disk.appendingPathComponent(".reporthost/reporthost.sqlite-wal").path
                #expect((try FileManager.default.attributesOfItem(atPath: log)[.size] as? Int) == Repository.logBytes)
                // The attachment fits only in the blocks the log holds.
                try fill(disk, leaving: 1_000_000)
                let result = try report(disk, "needs the log's room", attach: Self.attachment)
                #expect(result.status == 0, "\(result.stderr)")
                #expect(!result.stderr.contains("not stored"), "\(result.stderr)")
                let stored = try documents(disk)
                #expect(stored.first?["attachments"]?.arrayValue?.first?["size"] == .number(1_500_000))
            }
        }
    }

    @Test("I-4: with too few descriptors (ulimit -n 12) a command is a clear error, exit 1, never a trap; a low soft limit is raised")
    func fewDescriptors() async throws {
        try await offPool {
            let folder = makeTemporaryDirectory("few-fds")
            let hard = try ChildProcess.run(
                "/bin/sh", ["-c", "ulimit -n 12; exec \"$0\" report bug --summary s", Products.reporthost.path], directory: folder)
            #expect(hard.status == 1 && hard.signal == nil, "\(hard.status) \(hard.stderr)")
            #expect(hard.stderr.contains("only 12 open file descriptors are allowed"), "\(hard.stderr)")
            let soft = try ChildProcess.run(
                "/bin/sh", ["-c", "ulimit -Sn 12; exec \"$0\" report bug --summary s", Products.reporthost.path], directory: folder)
            #expect(soft.status == 0, "\(soft.stderr)")
            #expect(soft.stderr.contains("stored"), "\(soft.stderr)")
        }
    }
}
