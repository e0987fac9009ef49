import Foundation
import Host
import HostTestSupport
import Testing

/// One launch over a real repository folder (SPEC I-2, D-1, D-16).
@Suite struct SessionTests {
    let folder = makeTemporaryDirectory("session").appendingPathComponent("repo")
    let log = MemoryDestination()

    /// Opens and recovers a session saving at most `limit` crash files, then ends it.
    func launch(limit: Int) throws {
        let host = try TestHost.make(log: log) { $0.repository = folder.path }
        defer { host.stop() }
        let session = try HostSession.open(host: host, installCrashCapture: false, crashFilesPerLaunch: limit)
        defer { session.end() }
        try session.recover()
    }

    func triggers() throws -> [String] {
        let stored = try #require(try Repository.openForReading(folder: folder))
        return try stored.records().map(\.trigger.name)
    }

    @Test("D-1, D-16: a launch saves at most its limit of crash files, the newest; abnormal exits wait until none is left")
    func crashFilesPerLaunch() throws {
        let repository = try Repository.open(folder: folder)
        // A session that died without a crash file: nobody holds its liveness lock.
        try repository.markSession("dead-session")
        try FileManager.default.createDirectory(at: repository.crashesFolder, withIntermediateDirectories: true)
        for index in 0..<7 {
            let text = ["reporthost-crash 1", "session crash-loop", "signal 11", "attribute loop=\(index)", "end"].joined(separator: "\n") + "\n"
            let file = repository.crashesFolder.appendingPathComponent("loop-\(index).crash")
            try text.write(to: file, atomically: true, encoding: .utf8)
            // Distinct times, so "newest" means something.
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: Double(index - 100))], ofItemAtPath: file.path)
        }

        try launch(limit: 5)
        #expect(try triggers() == Array(repeating: "crash", count: 5), "no abnormal exit while crash files wait")
        let left = try FileManager.default.contentsOfDirectory(atPath: repository.crashesFolder.path).filter { $0.hasSuffix(".crash") }
        #expect(left.sorted() == ["loop-0.crash", "loop-1.crash"], "the oldest wait (the latest crash is the one that matters now)")
        #expect(log.lines.contains { $0.contains("2 crash file(s) left in") && $0.contains("at most 5 a launch") })

        try launch(limit: 5)
        #expect(try triggers().sorted() == ["abnormal_exit"] + Array(repeating: "crash", count: 7))
    }
}
