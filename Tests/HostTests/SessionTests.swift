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

/// One launch over a real repository folder (SPEC I-2, D-1, D-16).
@Suite struct SessionTests {
    let folder = makeTemporaryDirectory("session").appendingPathComponent("repo")
    let log = MemoryDestination()

    /// Opens a session, recovers it saving `batch` crash files per transaction, then ends it.
    func launch(batch: Int) throws {
        let host = try TestHost.make(log: log) { $0.repository = folder.path }
        defer { host.stop() }
        let session = try HostSession.open(host: host, installCrashCapture: false)
        defer { session.end() }
        #expect(try triggers().isEmpty, "open reads no crash file that names no plugin: the backlog is recover's")
        try session.recover(crashFilesPerBatch: batch)
    }

    func triggers() throws -> [String] {
        let stored = try #require(try Repository.openForReading(folder: folder))
        return try stored.records().map(\.trigger.name)
    }

    @Test("D-1, D-16: one launch saves every crash file, oldest first, a batch per transaction; then abnormal exits")
    func crashFileBacklog() throws {
        let repository = try Repository.open(folder: folder)
        // A session that died without a crash file: nobody holds its liveness lock.
        try repository.markSession("dead-session")
        try FileManager.default.createDirectory(at: repository.crashesFolder, withIntermediateDirectories: true)
        for index in 0..<7 {
            let text = ["reporthost-crash 1", "session crash-loop", "signal 11", "attribute loop=\(index)", "end"].joined(separator: "\n") + "\n"
            let file = repository.crashesFolder.appendingPathComponent("loop-\(index).crash")
            try text.write(to: file, atomically: true, encoding: .utf8)
            // Distinct times, so "oldest first" means something.
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: Double(index - 100))], ofItemAtPath: file.path)
        }

        try launch(batch: 3)
        let records = try #require(try Repository.openForReading(folder: folder)).records()
        #expect(records.map(\.trigger.name) == Array(repeating: "crash", count: 7) + ["abnormal_exit"])
        #expect(records.prefix(7).map { $0.document.content.attributes["loop"] } == (0..<7).map { "\($0)" }, "oldest first")
        #expect(records.allSatisfy { $0.state == .awaitingFirstAttempt && $0.crashFile == nil })
        let left = try FileManager.default.contentsOfDirectory(atPath: repository.crashesFolder.path).filter { $0.contains(".crash") }
        #expect(left.isEmpty, "no file waits for a later launch")
    }

    @Test("H-13: a report no callback sees is stored once, as the chain left it; with a handler it is journaled before the first callback")
    func journalOnlyBeforeCallbacks() throws {
        let host = try TestHost.make(log: log) { $0.repository = folder.path }
        defer { host.stop() }
        let session = try HostSession.open(host: host, installCrashCapture: false)
        defer { session.end() }
        // Rows this connection inserted, updated or deleted so far.
        func rowsWritten() throws -> Int64 { try session.repository.database.query("SELECT total_changes()").first?.first?.int ?? -1 }

        let before = try rowsWritten()
        let plain = try #require(try session.raise(ReportRequest(trigger: .logError)))
        // Breadcrumbs are a row of their own (schema 16), written once.
        func apart(_ document: ReportDocument) -> Int64 { document.content.breadcrumbs.isEmpty ? 0 : 1 }
        #expect(try rowsWritten() - before == 1 + apart(plain), "one insert, no journal to update")
        let stored = try #require(try session.repository.records().first { $0.reportID == plain.id })
        #expect(stored.state == .awaitingFirstAttempt && stored.document.json.serialized() == plain.json.serialized())

        let seen = Locked<[RecordState]>([])
        host.setHandler(SwiftHandler(name: "looks", before: .completion { [session] report, _, done in
            // The record is already stored, as raised, when the first callback runs.
            let id = try? report.reportID()
            let states = (try? session.repository.records().filter { $0.reportID == id }.map(\.state)) ?? []
            seen.withLock { $0 += states }
            done()
        }), for: .handler)
        let middle = try rowsWritten()
        let handled = try #require(try session.raise(ReportRequest(trigger: .logError)))
        #expect(seen.withLock { $0 } == [.pendingChain])
        #expect(!handled.content.breadcrumbs.isEmpty, "the first report's own breadcrumb")
        #expect(try rowsWritten() - middle == 2 + apart(handled), "the journal, then the chain's result (its breadcrumbs unchanged)")
        #expect(try session.repository.records().first { $0.reportID == handled.id }?.state == .awaitingFirstAttempt)
    }

    /// A host whose system calls go through `plan` (counted, and failed where it says).
    func host(calls plan: FaultPlan) throws -> ReportHost {
        var configuration = Configuration()
        configuration.repository = folder.path
        return try ReportHost(
            configuration: configuration, logger: HostLogger(destinations: [log]), mainExecutor: ThreadExecutor(name: "test-main"),
            faults: Faults(calls: plan))
    }

    /// A handler that marks the summary, so a stored report shows whether its chain's result was kept.
    static let marking = SwiftHandler(name: "marks", before: .completion { report, _, done in
        try? report.setSummary("marked")
        done()
    })

    @Test("H-13, D-1: the journal is flushed on the log's own thread while the callbacks run (through the seam, which SQLite's own flushes do not take), and raise returns once that flush is done")
    func journalFlushedBehindCallbacks() throws {
        let plan = FaultPlan([])
        let host = try host(calls: plan)
        defer { host.stop() }
        let session = try HostSession.open(host: host, installCrashCapture: false)
        defer { session.end() }
        host.setHandler(Self.marking, for: .handler)
        // The first flush also makes the folder's entries durable (the log's name).
        _ = try #require(try session.raise(ReportRequest(trigger: .logError)))
        for _ in 0..<3 {
            let before = plan.calls(of: .fsync)
            let handled = try #require(try session.raise(ReportRequest(trigger: .logError)))
            // SQLite's own flushes do not go through the seam: this one is the flusher's, done by now.
            #expect(plan.calls(of: .fsync) - before == 1, "one flush of the log per report, done before raise returned")
            let stored = try #require(try session.repository.records().first { $0.reportID == handled.id })
            #expect(stored.state == .awaitingFirstAttempt && stored.document.content.summary == "marked")
        }
    }

    @Test("H-13, D-1: the log's flusher runs as a batch thread (SCHED_BATCH): asked for a flush, it never takes the processor from the report that asked")
    func flusherYieldsItsWakeUps() throws {
        let host = try host(calls: FaultPlan([]))
        defer { host.stop() }
        let session = try HostSession.open(host: host, installCrashCapture: false)
        defer { session.end() }
        host.setHandler(Self.marking, for: .handler)
        _ = try #require(try session.raise(ReportRequest(trigger: .logError)))
        // Other tests' flushers run in this process too: every one of them is a batch thread.
        let flushers = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").compactMap(Int32.init)
            .filter { Self.threadName($0) == "rh-log-flush" }
        #expect(!flushers.isEmpty, "the session's flusher is running")
        for thread in flushers {
            #expect(sched_getscheduler(thread) == batchScheduling, "thread \(thread): policy \(sched_getscheduler(thread))")
        }
    }

    /// A thread's name from `/proc` (nil once the thread has ended).
    static func threadName(_ thread: Int32) -> String? {
        let name = ExpectedCallbackTests.procText("/proc/self/task/\(thread)/comm")
        return name.isEmpty ? nil : name.trimmingCharacters(in: .newlines)
    }

    @Test("H-13, D-1: a flush of the journal that fails (EIO) fails raise with the log's path and the reason; the report is stored with its chain's changes, and the next report is flushed again")
    func journalFlushFails() throws {
        let plan = FaultPlan([FaultPlan.Fault(.fsync, from: 1, count: 1, errno: EIO)])
        let host = try host(calls: plan)
        defer { host.stop() }
        let session = try HostSession.open(host: host, installCrashCapture: false)
        defer { session.end() }
        host.setHandler(Self.marking, for: .handler)
        #expect(plan.calls(of: .fsync) == 0, "no flush through the seam before the first journal")
        do throws(HostError) {
            _ = try session.raise(ReportRequest(trigger: .logError))
            Issue.record("raise returned although the journal's flush failed")
        } catch {
            let said = "\(error)"
            #expect(said.contains("reporthost.sqlite-wal") && said.contains("cannot flush the log") && said.contains(String(cString: strerror(EIO))), "\(said)")
        }
        let stored = try session.repository.records()
        #expect(stored.count == 1 && stored.first?.document.content.summary == "marked", "nothing lost: \(stored.map(\.state))")
        #expect(try session.raise(ReportRequest(trigger: .logError)) != nil, "the next flush succeeds")
        #expect(plan.calls(of: .fsync) >= 2)
    }
}

/// The host's own main thread and a report's callbacks (SPEC H-8).
@Suite struct ExpectedCallbackTests {
    let folder = makeTemporaryDirectory("expected-callbacks").appendingPathComponent("repo")

    @Test("H-8: the host's own main thread is woken as a report with callbacks begins and looks for each callback rather than sleep before it; once the chain has ended it sleeps again")
    func mainThreadLooksForCallbacks() throws {
        // Bounded by a minute, so only the expectation, never the machine's speed, decides.
        let main = ThreadExecutor(name: "expecting-main", expectedSpinMicroseconds: 60_000_000)
        defer { main.finish() }
        var configuration = Configuration()
        configuration.repository = folder.path
        // Each callback after the first is queued 2 ms after the one before it returned: long
        // past the 50 µs an idle thread looks for work when nothing is expected.
        let queued = Locked(0)
        let host = try ReportHost(
            configuration: configuration, logger: .silent, mainExecutor: main,
            observer: { event in
                guard case .awaitingStart = event, queued.withLock({ $0 += 1; return $0 }) > 1 else { return }
                let until = SystemClock().now().advanced(byMilliseconds: 2)
                while SystemClock().now() < until {}
            })
        defer { host.stop() }
        let session = try HostSession.open(host: host, installCrashCapture: false)
        defer { session.end() }
        // Each callback notes its thread and how often that thread has slept so far.
        let seen = Locked<[(thread: String, sleeps: Int)]>([])
        let noting = SwiftHandler.Callback.completion { _, _, done in
            let status = Self.procText("/proc/thread-self/status")
            let sleeps = status.split(separator: "\n").first { $0.hasPrefix("voluntary_ctxt_switches:") }
                .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) }
            let thread = String(Self.procText("/proc/thread-self/stat").prefix { $0 != " " })
            seen.withLock { $0.append((thread, sleeps ?? -1)) }
            done()
        }
        host.setHandler(SwiftHandler(name: "wrapper", before: noting, after: noting), for: .wrapper)
        host.setHandler(SwiftHandler(name: "handler", before: noting, after: noting), for: .handler)
        _ = try #require(try session.raise(ReportRequest(trigger: .logError)))

        let calls = seen.withLock { $0 }
        try #require(calls.count == 4 && Set(calls.map(\.thread)).count == 1, "four callbacks on one thread: \(calls)")
        // Three gaps of 2 ms: a thread that slept in each would have slept three more times.
        // One is allowed: the thread may find the lock still held by the thread that queued the job.
        let slept = calls[3].sleeps - calls[0].sleeps
        #expect(calls[0].sleeps >= 0 && slept <= 1, "the main thread slept \(slept) times between the first callback and the last: \(calls)")
        // Nothing expected any more: the thread sleeps again (long before its minute is up).
        let deadline = SystemClock().now().advanced(byMilliseconds: 10_000)
        var state = ""
        repeat {
            state = Self.procText("/proc/self/task/\(calls[0].thread)/stat").split(separator: ")").last.map { String($0.dropFirst().prefix(1)) } ?? ""
        } while state != "S" && SystemClock().now() < deadline
        #expect(state == "S", "the main thread is asleep once the chain has ended, not looking for more callbacks (state \(state))")
    }

    /// A `/proc` file read whole (`String(contentsOfFile:)` cuts them); empty when it cannot be read.
    static func procText(_ path: String) -> String {
        guard case .success(let data) = BoundedFile.read(path, limit: 65_536, system: .live) else { return "" }
        return String(decoding: data, as: UTF8.self)
    }
}
