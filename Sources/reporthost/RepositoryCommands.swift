import Dispatch
import Foundation
import Host

/// `reporthost launch [--watch]`: recover what earlier runs left, deliver what is admissible
/// now, then exit (SPEC I-2, I-3). `--watch` keeps running with the retry timers and the
/// admission window, and stops cleanly on SIGINT or SIGTERM.
enum LaunchCommand {
    static let options: [String: Bool] = Arguments.common.merging(["watch": false]) { a, _ in a }

    static func run(_ arguments: Arguments, output: DocumentOutput) throws(HostError) -> Int32 {
        let configuration = try arguments.configuration()
        let logger = try configuration.makeLogger(overrideLevel: try arguments.logLevel())
        let host = try ReportHost(configuration: configuration, logger: logger, mainExecutor: DispatchQueue.main)
        defer { host.stop() }
        let stopped = WaitableState(false)
        let signals = InterruptHandler(host: host) { stopped.update { $0 = true } }
        let session = try HostSession.launch(host: host)
        defer { session.end() }
        let deliverer = session.deliverer()
        var summary = try deliverer.deliver(retries: true)
        logger.info("launch: \(session.recovered.count) recovered, \(summary.accepted) delivered, \(summary.retained) retained, \(summary.terminal) terminal\(summary.rateLimited ? "; the local rate limit stopped the pass" : "")")
        while arguments.flag("watch") {
            let clock = SystemClock()
            let wake = try deliverer.nextWake()
            if let wake { logger.debug("watch: next pass at \(ReportDocument.timestamp(wake))") }
            let deadline = wake.map { clock.now().advanced(byMilliseconds: max(0, Int($0.timeIntervalSinceNow * 1000)) + 1) }
            let stop = stopped.wait(until: deadline, clock: clock, for: { $0 }, then: { value, _ in value })
            if stop { break }
            summary = try deliverer.deliver(retries: true)
            if summary != Deliverer.Summary() {
                logger.info("watch: \(summary.accepted) delivered, \(summary.retained) retained, \(summary.terminal) terminal")
            }
        }
        withExtendedLifetime(signals) {}
        return 0
    }
}

/// `reporthost crash [--signal …] [--attach FILE]…`: launches the host (recovering first),
/// then crashes on purpose so the signal-safe writer leaves a crash file naming the attached
/// files. Delivers nothing.
enum CrashCommand {
    static let options: [String: Bool] = Arguments.common.merging(["signal": true, "attach": true]) { a, _ in a }

    /// "SEGV" → SIGSEGV, from the crash writer's own table.
    static let signals = Dictionary(uniqueKeysWithValues: CrashFile.signalNames.map { ($0.value, $0.key) })

    static func run(_ arguments: Arguments, output: DocumentOutput) throws(HostError) -> Int32 {
        let name = (arguments.value("signal") ?? "SEGV").uppercased().replacingOccurrences(of: "SIG", with: "")
        guard let signal = signals[name] else {
            throw .usage("--signal '\(arguments.value("signal") ?? "")' is not one of SEGV, BUS, ILL, FPE, ABRT, TRAP")
        }
        let configuration = try arguments.configuration()
        let logger = try configuration.makeLogger(overrideLevel: try arguments.logLevel())
        let host = try ReportHost(configuration: configuration, logger: logger, mainExecutor: DispatchQueue.main)
        let session = try HostSession.launch(host: host)
        // Files the crash report should carry: copied by the next launch (SPEC D-1, D-3).
        for path in arguments.values("attach") { CrashCapture.addAttachment(path: PluginLoader.absolutePath(path)) }
        logger.info("crashing on purpose with SIG\(name) (session \(session.sessionID))")
        CrashCapture.crash(signal)
    }
}

/// `reporthost status [--json]`: what the repository holds, per record and in total. Only
/// reads: works while another host holds the lock, and creates nothing.
enum StatusCommand {
    static let options: [String: Bool] = ["config": true, "repository": true, "json": false, "log-level": true]

    static func run(_ arguments: Arguments, output: DocumentOutput) throws(HostError) -> Int32 {
        let configuration = try arguments.configuration()
        let folder = URL(fileURLWithPath: PluginLoader.absolutePath(configuration.repository))
        let repository: Repository?
        let records: [ReportRecord]
        do {
            repository = try Repository.openForReading(folder: folder)
            records = try repository?.records() ?? []
        } catch {
            throw .io(path: error.path, reason: error.message)
        }
        let status = StatusReport(records: records, databaseBytes: repository?.databaseBytes ?? 0)
        output.write(arguments.flag("json") ? status.json.serialized(pretty: true) + "\n" : status.text(folder: folder.path))
        return 0
    }
}

/// The `status` document of SPEC I.
struct StatusReport {
    let records: [ReportRecord]
    let databaseBytes: Int

    var json: JSONValue {
        var byState: [(String, JSONValue)] = []
        for state in RecordState.allCases {
            let count = records.filter { $0.state == state }.count
            if count > 0 { byState.append((state.rawValue, .int(count))) }
        }
        return .object([
            ("records", .array(records.map { record in
                .object([
                    ("report_id", .string(record.reportID)),
                    ("type", .string(record.document.type.name)),
                    ("trigger", .string(record.trigger.name)),
                    ("state", .string(record.state.rawValue)),
                    ("attempts", .int(record.attempts)),
                    ("next_attempt_at", record.nextAttemptAt.map { .string(ReportDocument.timestamp($0)) } ?? .null),
                    ("created_at", .string(ReportDocument.timestamp(record.document.createdAt))),
                    ("bytes", .int(record.bytes)),
                    ("outcome", .optional(record.outcome)),
                ])
            })),
            ("totals", .object([("records", .int(records.count)), ("by_state", .object(byState))])),
            ("database_bytes", .int(databaseBytes)),
            ("crash_points", .array(FaultPoint.allCases.map { .string($0.rawValue) })),
        ])
    }

    func text(folder: String) -> String {
        var lines = ["repository \(folder): \(records.count) record(s), database \(databaseBytes) bytes"]
        for record in records {
            lines.append(
                "  \(record.reportID)  \(record.trigger.name.padding(toLength: 13, withPad: " ", startingAt: 0)) \(record.state.rawValue.padding(toLength: 22, withPad: " ", startingAt: 0)) attempts \(record.attempts)  \(record.bytes) bytes  \(ReportDocument.timestamp(record.document.createdAt))\(record.nextAttemptAt.map { "  next \(ReportDocument.timestamp($0))" } ?? "")\(record.outcome.map { "  \($0)" } ?? "")")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
