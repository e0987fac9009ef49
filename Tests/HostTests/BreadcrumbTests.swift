import Breadcrumbs
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

/// The breadcrumb ring (SPEC B-1), session history (B-2) and crash-loop records (B-3) over
/// real files and a real repository.
@Suite struct BreadcrumbTests {
    let folder = makeTemporaryDirectory("breadcrumbs")

    func ring(slots: Int) throws -> BreadcrumbRing {
        try BreadcrumbRing.create(at: folder.appendingPathComponent("\(UUID().uuidString).ring").path, slots: slots).get()
    }

    @Test("B-1: the ring keeps the last N breadcrumbs, oldest first, read back from its file")
    func lastInOrder() throws {
        let ring = try ring(slots: 100)
        for index in 1...150 { ring.write(level: index % 2 == 0 ? 2 : 1, category: "app", "step \(index)") }
        let read = try #require(BreadcrumbRing.read(fileAt: ring.path, last: 100))
        #expect(read.torn == 0)
        #expect(read.entries.map(\.message) == (51...150).map { "step \($0)" })
        #expect(read.entries.map(\.sequence) == (51...150).map(UInt64.init))
        #expect(read.entries.first?.level == 1 && read.entries.first?.category == "app")
        #expect(BreadcrumbRing.read(fileAt: ring.path, last: 10)?.entries.map(\.message) == (141...150).map { "step \($0)" })
    }

    @Test("B-1, I-6: the ring's allocation and mapping go through the seam: a full disk or a refused mapping is an error, never a ring")
    func ringThroughTheSeam() throws {
        for (call, number) in [(SystemCall.truncate, ENOSPC), (.map, ENOMEM)] {
            let system = SystemCalls(faults: FaultPlan([FaultPlan.Fault(call, errno: number)]))
            let path = folder.appendingPathComponent("\(call.rawValue).ring").path
            switch BreadcrumbRing.create(at: path, slots: 8, system: system) {
            case .success: Issue.record("\(call.rawValue) failing with \(number) still made a ring")
            case .failure(let error): #expect(error == SystemError(call, number))
            }
            #expect(system.faults?.calls(of: call) == 1)
        }
        let ring = try ring(slots: 8)
        ring.write(level: 1, category: "app", "mapped")
        let refused = SystemCalls(faults: FaultPlan([FaultPlan.Fault(.map, errno: ENOMEM)]))
        #expect(BreadcrumbRing.read(fileAt: ring.path, last: 8, system: refused) == nil, "a mapping refused reads nothing")
    }

    @Test("B-1: a slot whose bytes do not match its checksum is skipped and counted, never shown")
    func tornSlotSkipped() throws {
        let ring = try ring(slots: 8)
        for index in 1...8 { ring.write(level: 1, category: "app", "message number \(index)") }
        // Damage one byte of the third breadcrumb's message, as a half-finished write would leave it.
        let third = try #require(try Data(contentsOf: URL(fileURLWithPath: ring.path)).firstRange(of: Data("message number 3".utf8)))
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: ring.path))
        try handle.seek(toOffset: UInt64(third.lowerBound + 5))
        try handle.write(contentsOf: Data("X".utf8))
        try handle.close()
        let read = try #require(BreadcrumbRing.read(fileAt: ring.path, last: 100))
        #expect(read.torn == 1)
        #expect(read.entries.map(\.message) == [1, 2, 4, 5, 6, 7, 8].map { "message number \($0)" })
        // A reader that reads slot by slot (a session's, keeping what it read) skips it too.
        let bySlot = ring.read(last: 100, known: { _ in nil }).compactMap(\.entry)
        #expect(bySlot.map(\.message) == [1, 2, 4, 5, 6, 7, 8].map { "message number \($0)" })
    }

    @Test("B-1: a reader that keeps what it read (a session's, report after report) gets what a fresh read gets, and copies only the breadcrumbs written since, as the ring laps")
    func keptBreadcrumbsReused() throws {
        let ring = try ring(slots: 16)
        var random = SplitMix64(seed: 51)
        var kept: [BreadcrumbRing.Entry] = []
        var written = 0
        for round in 0..<300 {
            for _ in 0..<random.int(0..<(round % 10 == 0 ? 40 : 6)) {
                written += 1
                ring.write(level: Int32(written % 5), category: "c\(written % 3)", "breadcrumb \(written)")
            }
            let slots = ring.read(last: 12) { position in kept.firstIndex { $0.locator == position.locator } }
            let made = slots.filter { $0.entry != nil }.count
            let read = slots.map { $0.entry(or: kept) }
            #expect(read == ring.read(last: 12), "round \(round)")
            let new = read.filter { entry in !kept.contains { $0.locator == entry.locator } }.count
            #expect(made == new, "round \(round): \(made) slots copied for \(new) new breadcrumbs")
            kept = read
        }
        #expect(kept.last?.sequence == UInt64(written) && kept.count == 12)
    }

    @Test("B-1: eight threads writing while another reads, afresh and keeping what it read: every breadcrumb read is one that was written")
    func concurrentWritersNeverTorn() async throws {
        let ring = try BreadcrumbRing.create(at: folder.appendingPathComponent("threads.ring").path, slots: 64, threads: true).get()
        // Each message says who wrote it and carries a payload its number determines.
        func message(_ thread: Int, _ index: Int) -> String {
            "t\(thread) n\(index) " + String(repeating: Character(Unicode.Scalar(UInt8(97 + (thread + index) % 26))), count: (index * 7) % 300)
        }
        let written = 20_000
        await withTaskGroup(of: Void.self) { group in
            for thread in 0..<8 {
                group.addTask { for index in 0..<written { ring.write(level: 1, category: "t\(thread)", message(thread, index)) } }
            }
            group.addTask {
                var kept: [BreadcrumbRing.Entry] = []
                for pass in 0..<200 {
                    // A fresh read, and one that keeps what the last read found (by locator).
                    let known = kept
                    let read = pass % 2 == 0
                        ? ring.read(last: 64)
                        : ring.read(last: 64) { position in known.firstIndex { $0.locator == position.locator } }
                            .map { $0.entry(or: known) }
                    kept = read
                    for crumb in read {
                        let fields = crumb.message.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
                        guard fields.count >= 2, let thread = Int(fields[0].dropFirst()), let index = Int(fields[1].dropFirst()) else {
                            Issue.record("a breadcrumb no writer wrote: \(crumb.message.prefix(80))")
                            continue
                        }
                        #expect(crumb.message == message(thread, index) && crumb.category == "t\(thread)")
                    }
                }
            }
        }
        let last = ring.read(last: 64)
        #expect(last.count == 64)
        #expect(last.last?.sequence == UInt64(8 * written))
    }

    @Test("B-1: a message longer than a slot is cut at a UTF-8 character boundary; an empty ring reads as none")
    func longMessageCut() throws {
        let ring = try ring(slots: 4)
        #expect(ring.read(last: 10).isEmpty)
        ring.write(level: 3, category: String(repeating: "c", count: 100), String(repeating: "é", count: 2_000))
        let crumb = try #require(ring.read(last: 10).first)
        #expect(crumb.category.utf8.count == Int(RH_CRUMB_CATEGORY_MAX))
        #expect(crumb.message.utf8.count <= Int(RH_CRUMB_TEXT_MAX) - Int(RH_CRUMB_CATEGORY_MAX))
        #expect(crumb.message.allSatisfy { $0 == "é" } && crumb.message.count > 400)
        #expect(crumb.level == 3)
    }

    @Test("B-1: a breadcrumb whose time is far out of range (a ring written by another program) is shown and sent, never a trap")
    func absurdTime() throws {
        let ring = try ring(slots: 4)
        for time in [Int64.max, Int64.min] { _ = rh_crumb_write(ring.address, time, 1, "app", 3, "odd", 3) }
        let crumbs = ring.read(last: 4).map(Breadcrumb.init)
        #expect(crumbs.count == 2)
        var content = ReportContent()
        content.breadcrumbs = crumbs
        let document = ReportDocument(id: randomUUID(), trigger: .logError, content: content, internalLog: [], createdAt: Date())
        #expect(document.json["breadcrumbs"]?.arrayValue?.count == 2)
        let part = try #require(BacktraceReport.breadcrumbsPart(document))
        #expect(try JSONValue.parse(Data(part.bytes)).arrayValue?.count == 2)
    }

    @Test("B-1: a file that is not a ring (wrong magic, too short, a folder) reads as nil, never a trap")
    func notARing() throws {
        let bad = folder.appendingPathComponent("bad.ring")
        try Data(repeating: 0xAB, count: 4096).write(to: bad)
        #expect(BreadcrumbRing.read(fileAt: bad.path, last: 10) == nil)
        try Data("RHBC".utf8).write(to: bad)
        #expect(BreadcrumbRing.read(fileAt: bad.path, last: 10) == nil)
        #expect(BreadcrumbRing.read(fileAt: folder.path, last: 10) == nil)
        #expect(BreadcrumbRing.read(fileAt: folder.appendingPathComponent("missing").path, last: 10) == nil)
    }

    @Test("B-1: the document carries breadcrumbs with millisecond timestamps, and reads them back")
    func documentRoundTrip() throws {
        var content = ReportContent()
        let time = Date(timeIntervalSince1970: 1_796_184_660.123)
        content.breadcrumbs = [Breadcrumb(sequence: 7, timestamp: time, level: .warn, category: "net", message: "retrying")]
        var document = ReportDocument(id: randomUUID(), trigger: .crash, content: content, internalLog: [], createdAt: time)
        document.duplicates = 4
        let json = document.json
        let first = try #require(json["breadcrumbs"]?.arrayValue?.first)
        #expect(first["timestamp"]?.stringValue == "2026-12-02T04:11:00.123Z")
        #expect(first["level"]?.stringValue == "warn" && first["category"]?.stringValue == "net" && first["message"]?.stringValue == "retrying")
        #expect(json["duplicates"]?.intValue == 4)
        let back = try #require(ReportDocument(json: JSONValue.parse(json.serialized())))
        let crumb = try #require(back.content.breadcrumbs.first)
        #expect(Breadcrumb.timestamp(crumb.timestamp) == "2026-12-02T04:11:00.123Z")
        #expect(crumb.sequence == 7 && crumb.level == .warn && crumb.category == "net" && crumb.message == "retrying")
        #expect(back.duplicates == 4)
    }

    // MARK: Sessions (B-2) and crash loops (B-3)

    @Test("B-2: ten sessions with three crashed read 70.0% crash-free for their release; running ones are not ended")
    func crashFreeRate() throws {
        let repository = try Repository.open(folder: folder.appendingPathComponent("repo"))
        let start = Repository.SessionStart(release: "2.3.0", limits: SessionHistory())
        for index in 0..<10 {
            let id = "s\(index)"
            try repository.markSession(id, history: start)
            if index < 3 {
                try repository.database.transaction { () throws(StorageError) in try repository.recordEnd(of: id, .crashed, at: nil) }
            } else {
                try repository.endSession(id)
            }
        }
        try repository.markSession("other", history: Repository.SessionStart(release: "2.4.0", limits: SessionHistory()))
        let rates = try repository.sessionsByRelease(since: Date(timeIntervalSince1970: 0))
        let release = try #require(rates.first { $0.release == "2.3.0" })
        #expect(release.sessions == 10 && release.ended == 10 && release.crashed == 3 && release.abnormalExit == 0)
        #expect(release.crashFree == 0.7)
        let running = try #require(rates.first { $0.release == "2.4.0" })
        #expect(running.sessions == 1 && running.ended == 0 && running.crashFree == nil)
    }

    @Test("B-2: the history keeps at most maxCount sessions, the newest")
    func historyBounded() throws {
        let repository = try Repository.open(folder: folder.appendingPathComponent("repo"))
        var limits = SessionHistory()
        limits.maxCount = 5
        for index in 0..<12 {
            try repository.markSession("s\(index)", history: Repository.SessionStart(release: "1", limits: limits))
            try repository.endSession("s\(index)")
        }
        let kept = try repository.database.query("SELECT id FROM session_history ORDER BY seq").compactMap { $0.first?.string }
        #expect(kept == (7..<12).map { "s\($0)" })
    }

    @Test("B-3: crashed and abnormal sessions in a row are counted back to the last clean end; live ones are passed over")
    func consecutive() throws {
        let repository = try Repository.open(folder: folder.appendingPathComponent("repo"))
        let start = Repository.SessionStart(release: nil, limits: SessionHistory())
        try repository.markSession("clean", history: start)
        try repository.endSession("clean")
        try repository.markSession("crashed", history: start)
        try repository.database.transaction { () throws(StorageError) in try repository.recordEnd(of: "crashed", .crashed, at: nil) }
        try repository.markSession("killed", history: start)  // still marked: no process holds it
        let alive = try repository.holdAlive("alive")
        defer { alive.release() }
        try repository.markSession("alive", history: start)
        try repository.markSession("now", history: start)
        #expect(try repository.consecutiveCrashes(before: "now") == 2)
        try repository.endSession("killed")
        #expect(try repository.consecutiveCrashes(before: "now") == 0, "a clean end resets the count")
    }

    @Test("B-3: sessions that start in the same millisecond are counted in the order they started, never by the clock")
    func sameMillisecondSessions() throws {
        // A wall clock that never moves: every stamp falls in one millisecond.
        let clock = ManualWallClock()
        let repository = try Repository.open(folder: folder.appendingPathComponent("repo"), system: SystemCalls(wallClock: clock))
        let start = Repository.SessionStart(release: nil, limits: SessionHistory())
        try repository.markSession("clean", history: start)
        try repository.endSession("clean")
        try repository.markSession("crashed", history: start)
        try repository.database.transaction { () throws(StorageError) in try repository.recordEnd(of: "crashed", .crashed, at: nil) }
        try repository.markSession("killed", history: start)
        try repository.markSession("now", history: start)
        #expect(try repository.consecutiveCrashes(before: "now") == 2)
        #expect(try repository.sessions(except: "now").map(\.id) == ["crashed", "killed"])
        // The wall clock steps back an hour: the sequence still says which started last.
        clock.set(clock.now().addingTimeInterval(-3_600))
        try repository.markSession("later", history: start)
        try repository.endSession("later")
        #expect(try repository.consecutiveCrashes(before: "now") == 0, "a clean end, though stamped earlier, is the newest")
    }

    @Test("B-3: a schema-12 repository gains the session sequence from its rows' order of insertion")
    func sequenceMigrated() throws {
        let repoFolder = folder.appendingPathComponent("repo")
        let old = try Repository.open(folder: repoFolder, system: SystemCalls(wallClock: ManualWallClock()))
        let start = Repository.SessionStart(release: nil, limits: SessionHistory())
        try old.markSession("clean", history: start)
        try old.endSession("clean")
        try old.markSession("crashed", history: start)
        try old.database.transaction { () throws(StorageError) in try old.recordEnd(of: "crashed", .crashed, at: nil) }
        // What a host of schema 12 left: no sequence.
        try old.database.execute("""
            DROP INDEX session_history_by_seq;
            ALTER TABLE session_history DROP COLUMN seq;
            ALTER TABLE sessions DROP COLUMN seq;
            PRAGMA user_version = 12;
            """)
        let reopened = try Repository.open(folder: repoFolder, system: SystemCalls(wallClock: ManualWallClock()))
        #expect(try reopened.database.query("SELECT id FROM session_history ORDER BY seq").compactMap { $0.first?.string } == ["clean", "crashed"])
        try reopened.markSession("now", history: start)
        #expect(try reopened.consecutiveCrashes(before: "now") == 1)
    }

    @Test("B-2: the history bound keeps the newest sessions by their order, when all start in the same millisecond")
    func historyBoundSameMillisecond() throws {
        let repository = try Repository.open(
            folder: folder.appendingPathComponent("repo"), system: SystemCalls(wallClock: ManualWallClock()))
        var limits = SessionHistory()
        limits.maxCount = 3
        for index in 0..<8 {
            try repository.markSession("s\(index)", history: Repository.SessionStart(release: "1", limits: limits))
            try repository.endSession("s\(index)")
        }
        let kept = try repository.database.query("SELECT id FROM session_history ORDER BY seq").compactMap { $0.first?.string }
        #expect(kept == ["s5", "s6", "s7"])
    }

    @Test("B-3: a thousand identical crash files become one record counting 1000; another crash and an abnormal exit stay apart")
    func identicalCrashesCounted() throws {
        let repoFolder = folder.appendingPathComponent("repo")
        let repository = try Repository.open(folder: repoFolder)
        try FileManager.default.createDirectory(at: repository.crashesFolder, withIntermediateDirectories: true)
        func crashFile(session: String, frames: [String], time: Int) -> String {
            (["reporthost-crash 1", "session \(session)", "signal 11", "code 1", "address 0x0", "thread 7", "time \(time)",
              "module 0x400000 0x500000 /usr/bin/app 0123abcd", "module 0x7f0000 0x7f8000 /lib/libc.so.6 feedbeef"]
                + frames.map { "frame \($0)" } + ["end"]).joined(separator: "\n") + "\n"
        }
        for index in 0..<1_000 {
            // Each under its own session, as a program that crashes at every start leaves them.
            let text = crashFile(session: "loop-\(index)", frames: ["0x401234", "0x402000", "0x7f0100"], time: 1_700_000_000 + index)
            try text.write(to: repository.crashesFolder.appendingPathComponent("loop-\(index)-1-1-1-1.crash"), atomically: false, encoding: .utf8)
        }
        try crashFile(session: "other", frames: ["0x409999", "0x7f0100"], time: 1_700_000_500)
            .write(to: repository.crashesFolder.appendingPathComponent("other-1-1-1-1.crash"), atomically: false, encoding: .utf8)
        try repository.markSession("killed-1")
        try repository.markSession("killed-2")
        let host = try TestHost.make { $0.repository = repoFolder.path }
        defer { host.stop() }
        let session = try HostSession.open(host: host, installCrashCapture: false)
        defer { session.end() }
        try session.recover()
        let records = try #require(try Repository.openForReading(folder: repoFolder)).records()
        let crashes = records.filter { $0.trigger == .crash }
        #expect(crashes.map(\.document.duplicates).sorted() == [1, 1_000])
        #expect(records.filter { $0.trigger == .abnormalExit }.count == 2, "abnormal exits carry no frames: never merged")
        #expect(try FileManager.default.contentsOfDirectory(atPath: repository.crashesFolder.path).filter { $0.hasSuffix(".crash") }.isEmpty)
        // The loop's sessions are crashed ones, not abnormal exits (their crash is counted elsewhere).
        let loop = try #require(crashes.first { $0.document.duplicates == 1_000 })
        let wire = BacktraceReport.json(loop.document, crash: loop.crash)
        #expect(wire["attributes"]?["reporthost.duplicates"]?.stringValue == "1000")
    }

    @Test("B-3: identical crashes merge only within a release and the same host-wide attributes")
    func mergesKeepWhatDiffers() throws {
        let repoFolder = folder.appendingPathComponent("repo")
        let repository = try Repository.open(folder: repoFolder)
        try FileManager.default.createDirectory(at: repository.crashesFolder, withIntermediateDirectories: true)
        func crashFile(_ session: String, attribute: String?) throws {
            let lines = ["reporthost-crash 1", "session \(session)", "signal 11", "code 1", "address 0x0", "thread 7", "time 1700000000",
                         "module 0x400000 0x500000 /usr/bin/app 0123abcd"] + (attribute.map { ["attribute \($0)"] } ?? [])
                + ["frame 0x401234", "frame 0x402000", "end"]
            try (lines.joined(separator: "\n") + "\n").write(
                to: repository.crashesFolder.appendingPathComponent("\(session)-1-1-1-1.crash"), atomically: false, encoding: .utf8)
        }
        // Two sessions of release 2.3.0 and one of 2.4.0, then two whose attributes differ.
        for (session, release) in [("a", "2.3.0"), ("b", "2.3.0"), ("c", "2.4.0")] {
            try repository.markSession(session, history: Repository.SessionStart(release: release, limits: SessionHistory()))
            try repository.database.transaction { () throws(StorageError) in try repository.recordEnd(of: session, .crashed, at: nil) }
            try crashFile(session, attribute: nil)
        }
        try crashFile("d", attribute: "tenant=blue")
        try crashFile("e", attribute: "tenant=green")
        try crashFile("f", attribute: "tenant=green")
        let host = try TestHost.make { $0.repository = repoFolder.path }
        defer { host.stop() }
        let session = try HostSession.open(host: host, installCrashCapture: false)
        defer { session.end() }
        try session.recover()
        let crashes = try #require(try Repository.openForReading(folder: repoFolder)).records().filter { $0.trigger == .crash }
        #expect(crashes.map(\.document.duplicates).sorted() == [1, 1, 2, 2], "a+b, c, d, e+f: \(crashes.map(\.document.duplicates))")
    }

    @Test("B-2: the version attribute set through the runtime (rh_embed_set_attribute) becomes the running session's release")
    func versionSetLaterIsTheRelease() throws {
        var configuration = Configuration()
        configuration.repository = folder.appendingPathComponent("repo").path
        var options = RuntimeOptions(configuration: configuration, mainExecutor: ThreadExecutor(name: "release-main"))
        options.installCrashCapture = false
        let runtime = try Runtime.start(options)
        #expect(runtime.setAttribute("version", "3.1.0"))
        runtime.stop()
        let repository = try #require(try Repository.openForReading(folder: folder.appendingPathComponent("repo")))
        let releases = try repository.sessionsByRelease(since: Date(timeIntervalSince1970: 0))
        #expect(releases.map(\.release) == ["3.1.0"] && releases.first?.ended == 1)
    }

    @Test("B-2: the installation id is never written through a link, and a broken id file is replaced once, with a warning")
    func installationIDFile() throws {
        let log = MemoryDestination()
        let repoFolder = folder.appendingPathComponent("repo")
        let repository = try Repository.open(folder: repoFolder, logger: HostLogger(destinations: [log]))
        let outside = folder.appendingPathComponent("outside.txt")
        try Data("precious".utf8).write(to: outside)
        let guidPath = repoFolder.appendingPathComponent("guid").path
        // A link planted where the temporary file goes, and a guid that is garbage.
        try FileManager.default.createSymbolicLink(atPath: guidPath + ".tmp-\(getpid())", withDestinationPath: outside.path)
        try Data("not an id".utf8).write(to: URL(fileURLWithPath: guidPath))
        let first = repository.installationGUID()
        #expect(UUID(uuidString: first) != nil)
        #expect(try String(contentsOf: outside, encoding: .utf8) == "precious", "nothing written through the link")
        #expect(log.lines.filter { $0.contains("holds no id") }.count == 1)
        #expect(repository.installationGUID() == first, "replaced once: the next session reads the same id")
        #expect(log.lines.filter { $0.contains("holds no id") }.count == 1)
        // A link at the id itself is replaced, and what it points to is left alone.
        try FileManager.default.removeItem(atPath: guidPath)
        try FileManager.default.createSymbolicLink(atPath: guidPath, withDestinationPath: outside.path)
        #expect(repository.installationGUID() != first)
        #expect(try String(contentsOf: outside, encoding: .utf8) == "precious")
    }
}
