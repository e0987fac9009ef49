import Dispatch
import FoundationEssentials
import Glibc
import Host
import HostCapture
import HostDelivery
import HostRecovery
import HostStore
import HostSupport

/// `reporthost launch [--watch]`: recover what earlier runs left, deliver what is admissible
/// now, then exit (SPEC I-2, I-3). As a secondary (another process holds the repository) it
/// says which process that is and exits 0. `--watch` waits to become primary, keeps running
/// with the retry timers and the admission window, and stops cleanly on SIGINT or SIGTERM.
enum LaunchCommand {
    static let options: [String: Bool] = Arguments.common.merging(["watch": false]) { a, _ in a }

    static func run(_ arguments: Arguments, output: DocumentOutput) throws -> Int32 {
        let watch = arguments.flag("watch")
        var options = try arguments.runtimeOptions()
        let stopped = WaitableState(false)
        let started = Locked<Runtime?>(nil)
        let signals = InterruptHandler(runtime: { started.withLock { $0 } }) { stopped.update { $0 = true } }
        if watch { options.whenLockHeld = .waitToBePrimary(giveUp: { stopped.read { $0 } }) }
        // One pass with the retries due, or (`--watch`) the worker until SIGINT or SIGTERM.
        options.delivery = watch ? .worker : .onePass(retries: true)
        let runtime: Runtime
        switch Result(catching: { () throws(HostError) in try Runtime.start(options) }) {
        case .success(let started): runtime = started
        case .failure(.lockHeld): return 0  // stopped by a signal while waiting to become primary
        case .failure(let error): throw error
        }
        started.withLock { $0 = runtime }
        defer { runtime.stop() }
        guard runtime.isPrimary else {
            let holder = runtime.primaryProcess.map { "process \($0)" } ?? "another process"
            runtime.logger.info("launch: \(holder) holds \(runtime.repositoryFolder.path) and recovers and delivers there; nothing to do")
            return 0
        }
        try runtime.recover()
        try runtime.rerunHeld()
        guard watch else {
            let summary = try runtime.deliver()
            let held = runtime.heldForRequired
            runtime.logger.info("launch: \(runtime.recovered.count) recovered\(held > 0 ? ", \(held) held for a required slot" : ""), \(summary.accepted) delivered, \(summary.retained) retained, \(summary.terminal) terminal\(summary.held > 0 ? ", \(summary.held) held" : "")\(summary.rateLimited ? "; the local rate limit stopped the pass" : "")")
            withExtendedLifetime(signals) {}
            return 0
        }
        // The one delivery worker decides what is due and when to wake, as in an embedding
        // program; this thread waits for SIGINT or SIGTERM.
        runtime.logger.info("launch: \(runtime.recovered.count) recovered; watching until SIGINT or SIGTERM")
        let logger = runtime.logger
        try runtime.deliver { pass in
            guard pass != Deliverer.Summary() else { return }
            logger.info("watch: \(pass.accepted) delivered, \(pass.retained) retained, \(pass.terminal) terminal")
        }
        _ = stopped.wait(until: nil, clock: SystemClock(), for: { $0 }, then: { value, _ in value })
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

    static func run(_ arguments: Arguments, output: DocumentOutput) throws -> Int32 {
        let name = (arguments.value("signal") ?? "SEGV").uppercased().replacing("SIG", with: "")
        guard let signal = signals[name] else {
            throw UsageError("--signal '\(arguments.value("signal") ?? "")' is not one of SEGV, BUS, ILL, FPE, ABRT, TRAP")
        }
        let runtime = try Runtime.start(try arguments.runtimeOptions())
        try runtime.recover()
        // Files the crash report should carry: copied by the next launch (SPEC D-1, D-3).
        for path in arguments.values("attach") { try runtime.registerCrashAttachment(Paths.absolute(path)) }
        runtime.logger.info("crashing on purpose with SIG\(name) (session \(runtime.sessionID))")
        CrashCapture.crash(signal)
    }
}

/// `reporthost status [--json]`: what the repository holds, per record and in total. Only
/// reads: works while another host holds the lock, and creates nothing.
enum StatusCommand {
    static let options: [String: Bool] = [
        "config": true, "repository": true, "json": false, "all": false, "limit": true, "log-level": true,
    ]
    /// How many of the newest records the text form lists without `--limit` or `--all`.
    static let defaultLimit = 20

    static func run(_ arguments: Arguments, output: DocumentOutput) throws -> Int32 {
        let configuration = try arguments.configuration()
        let limit = try listLimit(arguments)
        let folder = URL(fileURLWithPath: Paths.absolute(configuration.repository))
        let repository: Repository?
        let records: [Repository.Summary]
        do {
            repository = try Repository.openForReading(existingFolder: folder, system: Switches.system)
            // Stored order: the last listed is what `show latest` shows.
            records = try repository?.summaries(storedOrder: true) ?? []
        } catch {
            throw HostError.io(path: error.path, reason: error.message)
        }
        let quarantine: [QuarantineEntry]
        let unreadable: [(rowID: Int64, reason: String)]
        let evicted: Repository.EvictionTotals
        let sessions: [Repository.ReleaseSessions]
        let window = configuration.sessions.windowDays
        do {
            sessions = try repository?.sessionsByRelease(since: Switches.system.now().addingTimeInterval(-Double(window) * 86_400)) ?? []
            quarantine = try repository?.quarantined() ?? []
            unreadable = try repository?.unreadableRecords() ?? []
            evicted = try repository?.evictionTotals() ?? Repository.EvictionTotals()
        } catch {
            throw HostError.io(path: error.path, reason: error.message)
        }
        for row in unreadable { writeStandardError("reporthost: warn: \(row.reason); it is skipped and kept as it is\n") }
        let status = StatusReport(
            records: records, databaseBytes: repository?.databaseBytes ?? 0, quarantine: quarantine, unreadable: unreadable,
            evicted: evicted, sessions: sessions, windowDays: window)
        if arguments.flag("json") {
            // Every record unless --limit says otherwise: scripts read this list.
            output.write(status.json(limit: arguments.value("limit") == nil ? nil : limit).serialized(pretty: true) + "\n")
        } else {
            output.writeText(status.text(folder: folder.path, limit: limit))
        }
        return 0
    }

    /// `--all`: nil (every record); `--limit N` (N ≥ 0); else `defaultLimit`.
    static func listLimit(_ arguments: Arguments) throws -> Int? {
        if arguments.flag("all") {
            guard arguments.value("limit") == nil else { throw UsageError("status: --all and --limit exclude each other") }
            return nil
        }
        guard let text = arguments.value("limit") else { return defaultLimit }
        guard let limit = Int(text), limit >= 0 else { throw UsageError("--limit '\(text)' is not a count of records (0 or more)") }
        return limit
    }
}

/// The `status` document of SPEC I.
struct StatusReport {
    let records: [Repository.Summary]
    let databaseBytes: Int
    let quarantine: [QuarantineEntry]
    /// Rows that could not be read: skipped by every command, kept as they are (D-13).
    let unreadable: [(rowID: Int64, reason: String)]
    /// Records evicted by the storage limits since the repository was created (D-12).
    let evicted: Repository.EvictionTotals
    /// Sessions per release that started in the last `windowDays` (SPEC B-2).
    let sessions: [Repository.ReleaseSessions]
    let windowDays: Int

    /// Records that still wait to be sent (a first attempt, a retry, or held).
    var waiting: [Repository.Summary] { records.filter { $0.state.isWaiting } }

    /// Counts by a record's key, in the order of `keys`, the ones that occur.
    func counts(_ keys: [String], of key: (Repository.Summary) -> String) -> [(String, Int)] {
        let counted = records.reduce(into: [String: Int]()) { $0[key($1), default: 0] += 1 }
        return keys.compactMap { name in counted[name].map { (name, $0) } }
    }

    var byState: [(String, Int)] { counts(RecordState.allCases.map(\.rawValue)) { $0.state.rawValue } }
    var byType: [(String, Int)] { counts(["crash", "error", "bug"]) { $0.trigger.type.name } }
    var nextAttempt: Date? { records.filter { $0.state == .retry }.compactMap(\.nextAttemptAt).min() }
    /// The waiting record created first (records are listed in stored order).
    var oldestWaiting: Repository.Summary? { waiting.min { ($0.createdAt, $0.rowID) < ($1.createdAt, $1.rowID) } }
    /// Held records by reason.
    var heldReasons: [(String, Int)] {
        let reasons = records.filter { $0.state == .held }.map { $0.held ?? "unknown" }
        return Dictionary(grouping: reasons) { $0 }.map { ($0.key, $0.value.count) }.sorted { $0.0 < $1.0 }
    }

    /// The newest `limit` records (every one when nil), newest last.
    func listed(_ limit: Int?) -> [Repository.Summary] { limit.map { Array(records.suffix($0)) } ?? records }

    func json(limit: Int? = nil) -> JSONValue {
        let oldest = oldestWaiting
        return .object([
            ("records", .array(listed(limit).map { record in
                .object([
                    ("report_id", .string(record.reportID)),
                    ("type", .string(record.trigger.type.name)),
                    ("trigger", .string(record.trigger.name)),
                    ("state", .string(record.state.rawValue)),
                    ("attempts", .int(record.attempts)),
                    ("next_attempt_at", record.nextAttemptAt.map { .string(ReportDocument.timestamp($0)) } ?? .null),
                    ("created_at", .string(ReportDocument.timestamp(record.createdAt))),
                    ("bytes", .int(record.bytes)),
                    ("outcome", .optional(record.outcome)),
                ] + (record.state == .held ? [("held", .optional(record.held))] : []))
            })),
            ("totals", .object([
                ("records", .int(records.count)), ("by_state", .object(byState.map { ($0.0, .int($0.1)) })),
                ("evicted", .object([("records", .int(evicted.records)), ("bytes", .int(evicted.bytes))])),
                ("by_type", .object(byType.map { ($0.0, .int($0.1)) })),
                ("oldest_waiting", oldest.map { .object([
                    ("report_id", .string($0.reportID)), ("created_at", .string(ReportDocument.timestamp($0.createdAt))),
                ]) } ?? .null),
                ("next_attempt_at", nextAttempt.map { .string(ReportDocument.timestamp($0)) } ?? .null),
                ("held", .object(heldReasons.map { ($0.0, .int($0.1)) })),
            ])),
            ("database_bytes", .int(databaseBytes)),
            ("crash_points", .array(FaultPoint.allCases.map { .string($0.rawValue) })),
            ("quarantine", .array(quarantine.map(\.json))),
            ("unreadable_records", .array(unreadable.map { .object([("row", .int($0.rowID)), ("reason", .string($0.reason))]) })),
            ("sessions", .object([
                ("window_days", .int(windowDays)),
                ("releases", .array(sessions.map { release in
                    .object([
                        ("release", .optional(release.release)),
                        ("sessions", .int(release.sessions)),
                        ("ended", .int(release.ended)),
                        ("crashed", .int(release.crashed)),
                        ("abnormal_exit", .int(release.abnormalExit)),
                        ("crash_free", release.crashFree.map { .number($0) } ?? .null),
                    ])
                })),
            ])),
        ])
    }

    /// SPEC B-2: "2.3.0: 70.0% crash-free (7 of 10 sessions)", a release a line.
    var sessionLines: [String] {
        guard !sessions.isEmpty else { return [] }
        return ["sessions in the last \(windowDays) days, by release:"] + sessions.map { release in
            let name = release.release ?? "(no release)"
            let running = release.sessions - release.ended
            let still = running > 0 ? "; \(running) running" : ""
            guard let rate = release.crashFree else { return "  \(name): no session ended yet\(still)" }
            let free = release.ended - release.crashed - release.abnormalExit
            let percent = (rate * 1000).rounded() / 10
            let causes = [(release.crashed, "crashed"), (release.abnormalExit, "ended abnormally")].filter { $0.0 > 0 }
                .map { "\($0.0) \($0.1)" }.joined(separator: ", ")
            return "  \(name): \(percent)% crash-free (\(free) of \(release.ended) sessions)"
                + (causes.isEmpty ? "" : "; \(causes)") + still
        }
    }

    /// A summary (counts by state and type, the oldest waiting, the next attempt, held
    /// reasons), then the newest `limit` records (every one when nil).
    func text(folder: String, limit: Int?) -> String {
        var lines = ["repository \(folder): \(records.count) record(s), database \(databaseBytes) bytes"]
        func joined(_ counts: [(String, Int)]) -> String { counts.map { "\($0.0) \($0.1)" }.joined(separator: ", ") }
        if !records.isEmpty {
            lines.append("  by state: \(joined(byState))")
            lines.append("  by type: \(joined(byType))")
        }
        if let oldest = oldestWaiting {
            lines.append("  oldest waiting: \(oldest.reportID) (\(oldest.state.rawValue)) since \(ReportDocument.timestamp(oldest.createdAt))")
        }
        if let next = nextAttempt { lines.append("  next attempt: \(ReportDocument.timestamp(next))") }
        for (reason, count) in heldReasons { lines.append("  held: \(count) (\(reason))") }
        if evicted.records > 0 {
            lines.append("  \(evicted.records) record(s) (\(evicted.bytes) bytes) evicted by the storage limits so far")
        }
        let shown = listed(limit)
        // The rows' columns named once: the summary counts types, a row shows its trigger.
        let columnNames = "id, trigger, state, attempts, size, created"
        if shown.count < records.count {
            lines.append("newest \(shown.count) of \(records.count) (\(columnNames); status --all lists every record, --limit N the newest N):")
        } else if !shown.isEmpty {
            lines.append("records (\(columnNames)):")
        }
        var text = lines.joined(separator: "\n") + "\n"
        // One string, its room reserved, grown piece by piece: `status --all` may list many
        // thousands. Trigger and state columns are padded once per value, not per line.
        text.reserveCapacity(text.utf8.count + shown.count * 160)
        var columns: [String: String] = [:]
        func column(_ value: String, _ width: Int) -> String {
            if let padded = columns[value] { return padded }
            let padded = value.padded(toLength: width)
            columns[value] = padded
            return padded
        }
        for record in shown {
            text += "  "
            text += record.reportID
            text += "  "
            text += column(record.trigger.name, 13)
            text += " "
            text += column(record.state.rawValue, 22)
            text += " attempts "
            text += String(record.attempts)
            text += "  "
            text += String(record.bytes)
            text += " bytes  "
            text += ReportDocument.timestamp(record.createdAt)
            if let next = record.nextAttemptAt {
                text += "  next "
                text += ReportDocument.timestamp(next)
            }
            if let outcome = record.outcome {
                text += "  "
                text += outcome
            }
            text += "\n"
        }
        let tail = unreadable.map { "  row \($0.rowID): unreadable, skipped (\($0.reason))" } + QuarantineCommand.lines(quarantine)
            + sessionLines
        return tail.isEmpty ? text : text + tail.joined(separator: "\n") + "\n"
    }
}

/// `reporthost quarantine [--clear [PATH]]`: the plugins that crashed the host and are not
/// loaded while their file is unchanged; `--clear` lifts one plugin's entries (PATH) or all.
enum QuarantineCommand {
    static let options: [String: Bool] = ["config": true, "repository": true, "clear": false, "json": false, "log-level": true]

    static func run(_ arguments: Arguments, output: DocumentOutput) throws -> Int32 {
        let configuration = try arguments.configuration()
        let folder = URL(fileURLWithPath: Paths.absolute(configuration.repository))
        guard arguments.positionals.count <= (arguments.flag("clear") ? 1 : 0) else {
            throw UsageError("'quarantine' takes at most one PATH, after --clear")
        }
        do throws(StorageError) {
            if arguments.flag("clear") {
                let path = arguments.positionals.first.map { PluginIdentity(path: $0, system: Switches.system).realPath }
                // Nothing to clear where there is no repository: create nothing.
                guard let cleared = try Repository.clearQuarantine(inFolder: folder, path: path, system: Switches.system) else {
                    output.write("no plugin is quarantined\n")
                    return 0
                }
                output.write("cleared \(cleared) quarantine entr\(cleared == 1 ? "y" : "ies")\(path.map { " for \($0)" } ?? "")\n")
                return 0
            }
            let entries = try Repository.openForReading(folder: folder, system: Switches.system)?.quarantined() ?? []
            if arguments.flag("json") {
                output.write(JSONValue.array(entries.map(\.json)).serialized(pretty: true) + "\n")
            } else {
                output.writeText((entries.isEmpty ? ["no plugin is quarantined"] : lines(entries)).joined(separator: "\n") + "\n")
            }
            return 0
        } catch {
            throw HostError.io(path: error.path, reason: error.message)
        }
    }

    /// One line per entry, for `quarantine` and `status`.
    static func lines(_ entries: [QuarantineEntry]) -> [String] {
        guard !entries.isEmpty else { return [] }
        return ["quarantined plugins (not loaded; `reporthost quarantine --clear PATH` lifts one):"] + entries.map { entry in
            "  \(entry.name)  \(entry.path)  SIG\(entry.signal) in \(entry.callback)  at \(ReportDocument.timestamp(entry.at))  crashes \(entry.crashes)  sha256 \(entry.digest.prefix(12))…"
        }
    }
}
