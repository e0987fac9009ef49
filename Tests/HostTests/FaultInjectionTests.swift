import Foundation
@testable import Host
@testable import HostCapture
@testable import HostModel
@testable import HostSupport
@testable import HostDelivery
@testable import HostPlugins
@testable import HostRecovery
@testable import HostStore
import Receiver
import HostTestSupport
import Testing

/// System calls that fail at chosen points (a full disk, an I/O error, no descriptors left,
/// a closed pipe), injected through the seam as values: the host reports a clear error and
/// loses nothing (SPEC D-3, D-9, D-14, I-4).
@Suite struct FaultInjectionTests {
    let folder = makeTemporaryDirectory("faults")

    func document(attachment: Data? = nil) -> ReportDocument {
        var content = ReportContent()
        content.summary = "s"
        if let attachment { content.attachments = [Attachment(name: "a.log", filename: "a.log", data: attachment, source: .extended)] }
        return ReportDocument(id: UUID().uuidString.lowercased(), trigger: .logError, content: content, internalLog: [], createdAt: Date())
    }

    @Test("I-6: one fault mechanism: the environment's disk-full, denied closures and kill point are faults of one plan; a sweep fails none of them")
    func oneFaultMechanism() throws {
        let armed = Faults(environment: ["REPORTHOST_FAULT": "disk-full", "REPORTHOST_DENY_CLOSURES": "1", "REPORTHOST_CRASH_AT": "after-save"])
        #expect(armed.fails(.databaseWrite) && armed.fails(.closure))
        #expect(armed.crashAt == .afterSave && armed.calls?.crashAt == .afterSave)
        #expect(armed.systemCalls.faults === armed.calls, "the seam carries the same plan")
        #expect(armed.calls?.calls(of: .databaseWrite) == 1 && armed.calls?.calls(of: .closure) == 1)
        let none = Faults(environment: [:])
        #expect(none.calls == nil && !none.fails(.databaseWrite) && none.crashAt == nil)
        // A sweep counts every call, but fails only system calls that can fail with its errno.
        let swept = Faults(environment: ["REPORTHOST_CRASH_AT": "after-accept"], sweep: (1, ENOSPC))
        #expect(!swept.fails(.databaseWrite) && !swept.fails(.closure) && swept.crashAt == .afterAccept)
        // A repository on a disk-full plan refuses to store, with SQLite's words.
        let folder = makeTemporaryDirectory("one-plan")
        let disk = Faults(calls: FaultPlan([FaultPlan.Fault(.databaseWrite, from: 1, errno: ENOSPC)]))
        #expect(throws: StorageError.self) { try Repository.open(folder: folder, faults: disk) }
    }

    @Test("D-9: ENOSPC or EIO while the request body is written: no attempt is made or counted, the record stays; the next pass delivers")
    func bodyWriteFails() throws {
        let repository = try Repository.open(folder: folder.appendingPathComponent("repo"))
        let receiver = try LocalReceiver(folder: folder.appendingPathComponent("got"))
        defer { receiver.stop() }
        var configuration = Configuration()
        configuration.submission.url = receiver.url
        configuration.reportsPerMin = 0
        let log = MemoryDestination()
        let rowID = try repository.seedRecord(document(attachment: Data(repeating: 7, count: 100_000)), state: .awaitingFirstAttempt)
        for (errno, from) in [(ENOSPC, 1), (EIO, 3), (ENOSPC, 5)] {
            let plan = FaultPlan([FaultPlan.Fault(.write, from: from, errno: errno)])
            let failing = Deliverer(
                repository: repository, configuration: configuration, transport: CurlTransport(), logger: HostLogger(destinations: [log]),
                system: SystemCalls(faults: plan))
            let summary = try failing.deliver(retries: true)
            var expected = Deliverer.Summary()
            expected.notBuilt = 1
            #expect(summary == expected)
            // A loop of passes waits before meeting the full disk again, even with a report due now.
            let now = Date()
            let next = try #require(Deliverer.earliestNextPass(after: summary, wake: try failing.nextWake(), now: now))
            #expect(next.timeIntervalSince(now) >= Double(Deliverer.localFaultPauseMs) / 1000)
            #expect(Deliverer.earliestNextPass(after: Deliverer.Summary(), wake: now, now: now) == now)
            #expect(plan.calls(of: .write) >= from)
            let record = try #require(try repository.records().first { $0.rowID == rowID })
            #expect(record.state == .awaitingFirstAttempt && record.attempts == 0)
            #expect(receiver.received.isEmpty)
        }
        #expect(log.lines.contains { $0.contains("cannot build the request") && $0.contains("No space left on device") })
        let live = Deliverer(repository: repository, configuration: configuration, transport: CurlTransport(), logger: HostLogger(destinations: [log]))
        #expect(try live.deliver(retries: true).accepted == 1)
        #expect(receiver.received.first?.attachments["a.log"]?.count == 100_000)
    }

    @Test("D-1, I-4: ENOSPC or EIO while the write-ahead log is preallocated: it is cut back to its size, nothing fails, the next report is stored")
    func logPreallocationFails() throws {
        for (call, errno, from) in [(SystemCall.write, ENOSPC, 3), (.fsync, EIO, 1), (.open, EMFILE, 1)] {
            let repository = try Repository.open(
                folder: folder.appendingPathComponent("log-\(call.rawValue)"),
                system: SystemCalls(faults: FaultPlan([FaultPlan.Fault(call, from: from, errno: errno)])))
            let log = repository.databasePath + "-wal"
            let before = try #require(try FileManager.default.attributesOfItem(atPath: log)[.size] as? Int)
            try repository.preallocateLog()
            #expect(try FileManager.default.attributesOfItem(atPath: log)[.size] as? Int == before, "\(call): cut back")
            try repository.seedRecord(document(), state: .awaitingFirstAttempt)
            #expect(try repository.records().count == 1, "\(call)")
        }
        let healthy = try Repository.open(folder: folder.appendingPathComponent("log-healthy"))
        try healthy.preallocateLog()
        #expect(try FileManager.default.attributesOfItem(atPath: healthy.databasePath + "-wal")[.size] as? Int == Repository.logBytes)
    }

    @Test("D-1: EIO or EMFILE while an attachment copy is written: the save fails with the path, nothing half-stored; ENOSPC on every try stores the report without the copy, noted")
    func attachmentCopyFails() throws {
        let full = try Repository.open(
            folder: folder.appendingPathComponent("repo-full"), system: SystemCalls(faults: FaultPlan([FaultPlan.Fault(.write, errno: ENOSPC)])))
        try full.seedRecord(document(attachment: Data("bytes".utf8)), state: .awaitingFirstAttempt)
        let stored = try #require(try full.records().first)
        #expect(stored.document.content.attachments.isEmpty)
        #expect(try full.attachments(of: stored.rowID).isEmpty)
        #expect(stored.document.internalLog.contains { $0.message.contains("omitted: no space left on the disk") }, "\(stored.document.internalLog)")
        #expect(files(under: full.attachmentsFolder).isEmpty, "a failed copy leaves no file")
        for (call, errno) in [(SystemCall.fsync, EIO), (.open, EMFILE)] {
            let repository = try Repository.open(
                folder: folder.appendingPathComponent("repo-\(call.rawValue)"),
                system: SystemCalls(faults: FaultPlan([FaultPlan.Fault(call, errno: errno)])))
            do throws(StorageError) {
                try repository.seedRecord(document(attachment: Data("bytes".utf8)), state: .awaitingFirstAttempt)
                Issue.record("\(call): the insert should have failed")
            } catch {
                #expect(error.message.contains(String(cString: strerror(errno))), "\(call): \(error.message)")
                #expect(error.path.contains("attachments"))
            }
            #expect(try repository.records().isEmpty, "\(call): a half-stored record")
        }
    }

    @Test("D-1, D-13: on a full disk an attachment is copied once (the journal's copy becomes the bundle's), a failed copy leaves no file, and the next report without attachments is stored")
    func fullDiskCopiesOnce() throws {
        // Every attachment write after the first meets a full disk.
        let plan = FaultPlan([FaultPlan.Fault(.write, from: 2, errno: ENOSPC)])
        let repository = try Repository.open(folder: folder.appendingPathComponent("full"), system: SystemCalls(faults: plan))
        let raised = document(attachment: Data(repeating: 1, count: 50_000))
        let rowID = try repository.journal(raised, session: "s", dialogPending: false)
        var bundled = raised
        bundled.content.summary = "changed by the chain"
        try repository.chainFinished(rowID, document: bundled)
        #expect(plan.calls(of: .write) == 1, "the bundle reused the journal's copy")
        let copies = try FileManager.default.contentsOfDirectory(atPath: repository.attachmentsFolder.appendingPathComponent("\(rowID)").path)
        #expect(copies.count == 1, "\(copies)")
        #expect(try repository.attachments(of: rowID).first?.data == Data(repeating: 1, count: 50_000))
        #expect(try repository.records().first?.state == .awaitingFirstAttempt)

        // A new attachment cannot be copied, even with the log's spare blocks given back: that
        // report is stored without it, and no partial file is left.
        let filesBefore = files(under: repository.attachmentsFolder)
        let second = try repository.journal(document(attachment: Data(repeating: 2, count: 50_000)), session: "s", dialogPending: false)
        #expect(files(under: repository.attachmentsFolder) == filesBefore, "the failed copy was removed")
        #expect(try repository.attachments(of: second).isEmpty)
        #expect(try repository.records().count == 2)
        try repository.journal(document(), session: "s", dialogPending: false)
        #expect(try repository.records().count == 3, "a report without attachments is stored")
    }

    /// The regular files under `folder`, empty ones included.
    func files(under folder: URL) -> Set<String> {
        let all = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: [.isRegularFileKey])?.allObjects as? [URL] ?? []
        return Set(all.filter { (try? $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true }.map(\.path))
    }

    @Test("D-14, I-4: a log destination whose writes fail (EPIPE, ENOSPC) drops the line; the host goes on")
    func logWritesFail() throws {
        let path = folder.appendingPathComponent("host.log").path
        let plan = FaultPlan([FaultPlan.Fault(.write, from: 2, count: 1, errno: ENOSPC)])
        let file = try FileDestination(path: path, level: .debug, system: SystemCalls(faults: plan))
        file.write("one")
        file.write("two (lost: the disk was full)")
        file.write("three")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "one\nthree\n")
        let console = ConsoleDestination(level: .debug, system: SystemCalls(faults: FaultPlan([FaultPlan.Fault(.write, errno: EPIPE)])))
        console.write("nobody reads this")  // returns: no trap, no signal
        #expect(throws: HostError.self) {
            try FileDestination(path: path, level: .debug, system: SystemCalls(faults: FaultPlan([FaultPlan.Fault(.open, errno: EMFILE)])))
        }
    }

    @Test("D-1: EIO while a crash file or an attachment is read is a clear failure, never a partial read taken as whole")
    func readsFail() throws {
        let file = folder.appendingPathComponent("a.crash")
        try Data("reporthost-crash 1\nend\n".utf8).write(to: file)
        let plan = FaultPlan([FaultPlan.Fault(.read, errno: EIO)])
        #expect(BoundedFile.read(file.path, limit: 1_000, system: SystemCalls(faults: plan)) == .failure(.system(call: "read", errno: EIO)))
        #expect(BoundedFile.read(file.path, limit: 1_000) == .success(try Data(contentsOf: file)))
        #expect(BoundedFile.read(file.path, limit: 5) == .failure(.tooLarge(size: 23, limit: 5)))
    }

    @Test("I-6: the seam's other kinds fail on demand: copies a failed removal left (the k-th unlink) are swept by the next launch, and a folder that cannot be listed sweeps nothing")
    func removalAndListingFail() throws {
        let folder = folder.appendingPathComponent("removal")
        let failing = try Repository.open(
            folder: folder, system: SystemCalls(faults: FaultPlan([FaultPlan.Fault(.unlink, from: 1, count: 1, errno: EIO)])))
        let rowID = try failing.seedRecord(document(attachment: Data("copy".utf8)), state: .awaitingFirstAttempt)
        try failing.finish(rowID, outcome: "accepted (HTTP 200)")
        let copies = failing.attachmentsFolder.appendingPathComponent("\(rowID)").path
        #expect(FileManager.default.fileExists(atPath: copies), "the first removal failed: the copies stay")
        let blind = try Repository.open(folder: folder, system: SystemCalls(faults: FaultPlan([FaultPlan.Fault(.inspect, errno: EIO)])))
        #expect(try blind.sweepLeftovers() == 0)
        #expect(try Repository.open(folder: folder).sweepLeftovers() == 1)
        #expect(!FileManager.default.fileExists(atPath: copies))
    }
}
