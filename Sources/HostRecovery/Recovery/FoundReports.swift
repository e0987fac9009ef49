import FoundationEssentials
import Glibc
import HostModel
import HostSupport
import HostPlugins
import HostStore

/// The reports the host raises itself, outside any chain, from what a launch finds: a crash
/// file, a crash file it cannot read, a session that never stopped, a watched program a
/// signal ended without a crash file. Built here only, so each kind reads the same wherever
/// it is found.
enum FoundReports {
    /// The report a crash file becomes: its attributes, the plugin call it happened in, the
    /// watched program it came from (`reporthost run`: its name and the tail of its standard
    /// error), and copies of the attachments it names (a missing, unreadable, oversized or
    /// non-regular one is omitted with a diagnostic, D-3).
    /// `unsymbolicated` says, a line per module, why its frames have no symbols. An attachment
    /// line is honoured only for a file the crashed session `registered`, while it is still
    /// that file (device and inode): a line planted in a crash file copies nothing.
    static func crash(
        _ crash: CrashFile, culprit: QuarantineEntry?, program: ProgramExit?, unsymbolicated: [String] = [],
        registered: [String: FileIdentity] = [:], system: SystemCalls
    ) -> ReportDocument {
        var content = ReportContent()
        content.summary = crash.summary
        content.attributes = crash.attributes
        var notes: [InternalLogEntry] = []
        if !crash.complete {
            notes.append(note(.warn, "the crash file was not complete; recovered what it held"))
        }
        if let plugin = crash.plugin {
            content.attributes["reporthost.crashed_in_plugin"] = plugin.displayName
            content.attributes["reporthost.crashed_in_callback"] = plugin.callback
            let module = crash.faultModule.map { "; the faulting instruction is in \(LocalPaths.fileName($0))" } ?? ""
            let outcome = culprit != nil
                ? "the plugin is quarantined: it is not loaded again until it is rebuilt or the quarantine is cleared"
                : "the fault was in the host's own code: the plugin is not quarantined"
            notes.append(InternalLogEntry(
                level: .error, handler: plugin.displayName,
                message: "the host crashed with SIG\(crash.signalName) inside \(plugin.displayName).\(plugin.callback)\(module); \(outcome)"))
        }
        // File names only in what is sent: the module list carries full paths (home as `~`).
        if let module = crash.faultModule { content.attributes["reporthost.crashed_in_module"] = LocalPaths.fileName(module) }
        for refusal in unsymbolicated { notes.append(note(.info, "frames not symbolicated: \(refusal)")) }
        if crash.ignoredAttachments > 0 {
            notes.append(note(.warn, "\(crash.ignoredAttachments) attachment line(s) past the first \(CrashFile.maxAttachments) ignored"))
        }
        for path in crash.attachmentPaths {
            guard let identity = registered[path] else {
                notes.append(note(.warn, "attachment \(LocalPaths.fileName(path)) not read: the crashed session did not register it"))
                continue
            }
            if let now = FileIdentity.of(path, system: system), now != identity {
                notes.append(note(.warn, "attachment \(LocalPaths.fileName(path)) not read: it is another file now"))
                continue
            }
            switch BoundedFile.read(path, limit: ReportContent.attachmentMaxBytes, system: system) {
            case .success(let data) where !data.isEmpty:
                let name = LocalPaths.fileName(path)
                content.attachments.append(Attachment(name: name, filename: name, data: data, source: .recovered))
            case .success:
                notes.append(note(.warn, "attachment \(LocalPaths.fileName(path)) is empty: omitted"))
            case .failure(.system(_, ENOENT)):
                notes.append(note(.warn, "attachment \(LocalPaths.fileName(path)) is missing: omitted"))
            case .failure(let failure):
                notes.append(note(.warn, "attachment \(LocalPaths.fileName(path)) omitted: \(failure.description.replacing(path, with: LocalPaths.fileName(path)))"))
            }
        }
        if let program {
            content.attributes["reporthost.program"] = program.program
            if let output = standardError(of: program) { content.attachments.append(output) }
            content.breadcrumbs = program.breadcrumbs
        }
        return make(.crash, content, notes, createdAt: crash.time)
    }

    /// A file in `crashes/` that cannot be read as a crash file: a crash report saying what
    /// could be read and where the file was kept.
    static func unreadableCrashFile(named name: String, reason: String, kept: String, modified: Date, now: Date) -> ReportDocument {
        var content = ReportContent()
        content.summary = "An unreadable crash file was found (\(reason))"
        return make(
            .crash, content, [note(.warn, "crash file \(name) could not be read: \(reason); \(kept)")],
            createdAt: CrashFile.plausible(modified, now: now) ?? now)
    }

    /// D-16: a session that never stopped cleanly and left no crash file. One that died while
    /// it ran chains over recovered reports is sent without the chain (it would likely end
    /// this launch too).
    /// `exitCause` (SPEC B-5): `oom_kill` when the session's memory cgroup counted an OOM kill
    /// since it started, `unknown` when it did not or cannot tell, nil when nothing was kept.
    static func abnormalExit(session: String, startedAt: Date, duringRecovery: Bool, exitCause: String? = nil) -> ReportDocument {
        var content = ReportContent()
        content.summary = exitCause == "oom_kill"
            ? "The host was killed by the kernel's OOM killer (session \(session))"
            : "The host exited abnormally (session \(session))"
        if let exitCause { content.attributes["reporthost.exit_cause"] = exitCause }
        var notes = [note(.info, "session \(session) started at \(ReportDocument.timestamp(startedAt)) never stopped cleanly")]
        if exitCause == "oom_kill" { notes.append(note(.info, "its memory cgroup counted an OOM kill after the session started")) }
        if duringRecovery {
            notes.append(note(.warn, "the session ended during recovery; sent without the handler chain"))
        }
        return make(.abnormalExit, content, notes, createdAt: startedAt)
    }

    /// A program watched by `reporthost run` that a signal ended without a crash file
    /// (SIGKILL, the OOM killer).
    static func killed(_ exit: ProgramExit, signalName: String, hostAttributes: [String: String], now: Date) -> ReportDocument {
        var content = ReportContent()
        content.summary = exit.exitCause == "oom_kill"
            ? "\(exit.program) was killed by the kernel's OOM killer (\(signalName))"
            : "\(exit.program) was killed by \(signalName) and left no crash file"
        var found = ["reporthost.program": exit.program, "reporthost.exit_signal": signalName, "reporthost.exit_status": "\(exit.status)"]
        // SPEC B-5: why SIGKILL came, from the memory cgroup's counters.
        if let cause = exit.exitCause { found["reporthost.exit_cause"] = cause }
        if let peak = exit.memoryPeakBytes { found["reporthost.memory_peak_bytes"] = String(peak) }
        if let limit = exit.memoryLimitBytes { found["reporthost.memory_limit_bytes"] = String(limit) }
        content.attributes = hostAttributes.merging(found) { _, exit in exit }
        if let output = standardError(of: exit) { content.attachments = [output] }
        content.breadcrumbs = exit.breadcrumbs
        let cause = exit.exitCause == "oom_kill"
            ? "\(exit.program) (session \(exit.session)) ended by \(signalName): its memory cgroup counted one more OOM kill while it ran"
            : "\(exit.program) (session \(exit.session)) ended by \(signalName) (a signal the crash writer cannot catch, or before it was installed)"
        return make(.abnormalExit, content, [note(.info, cause)], createdAt: now)
    }

    private static func standardError(of exit: ProgramExit) -> Attachment? {
        exit.output.map { Attachment(name: "stderr.txt", filename: "stderr.txt", data: $0, source: .recovered) }
    }

    private static func note(_ level: LogLevel, _ message: String) -> InternalLogEntry {
        InternalLogEntry(level: level, handler: "host", message: message)
    }

    private static func make(
        _ trigger: Trigger, _ content: ReportContent, _ notes: [InternalLogEntry], createdAt: Date
    ) -> ReportDocument {
        ReportDocument(id: randomUUID(), trigger: trigger, content: content, internalLog: notes, createdAt: createdAt)
    }
}
