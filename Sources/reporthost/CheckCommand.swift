import Conformance
import Dispatch
import FoundationEssentials
import Glibc
import Host
import HostCapture
import HostRecovery
import HostSupport

/// `reporthost check PLUGIN.so [--slot S] [--json] [--junit FILE] [--scrub] [--fuzz N]
/// [--reproduce SEED] [--include RE] [--exclude RE] [--seed N] [--in-process]` and
/// `reporthost check --list` (SPEC I-8). Each check runs in a child process (this executable
/// with `--in-process`), so a plugin that crashes or hangs is reported as `crashed` or
/// `timed_out` and the next check still runs. Touches no repository.
enum CheckCommand {
    static let options: [String: Bool] = [
        "slot": true, "json": false, "include": true, "exclude": true, "seed": true, "in-process": false, "list": false,
        "options": true, "corpus": true, "min-recall": true, "max-false-positive-rate": true,
        "timeout-ms": true, "log-level": true, "scrub": false, "junit": true, "fuzz": true, "reproduce": true,
        "write-corpus": true, "documents": true,
    ]

    /// The most generated reports one `--fuzz` run takes.
    static let maxFuzzCount = 100_000

    static func run(_ arguments: Arguments, output: DocumentOutput) throws -> Int32 {
        if arguments.flag("list") {
            let all = Catalogue.checks + Catalogue.scrubChecks + [Catalogue.fuzzCheck(seeds: [], reproducing: false)]
            output.write(all.map { "\($0.name)  \($0.summary)" }.joined(separator: "\n") + "\n")
            return 0
        }
        if let path = arguments.value("write-corpus") { return try writeCorpus(to: path, arguments, output: output) }
        guard arguments.positionals.count == 1, let path = arguments.positionals.first else {
            throw UsageError("'check' needs one plugin path (or --list)")
        }
        // Through a link (`libfoo.so -> libfoo.so.1.0`) the checks open the file it names: a
        // copy of the link itself would point nowhere from the copies' folder.
        let plugin = Switches.system.realpath(Paths.absolute(path)) ?? Paths.absolute(path)
        try requireSharedObject(plugin)
        let slotName = arguments.value("slot") ?? "handler"
        guard let slot = PluginSlot(rawValue: slotName) else { throw UsageError("--slot '\(slotName)' is not one of wrapper, handler, delegate") }
        let seedText = arguments.value("seed") ?? "1"
        guard let seed = UInt64(seedText) else { throw UsageError("--seed '\(seedText)' is not a non-negative integer") }
        let timeoutText = arguments.value("timeout-ms") ?? "60000"
        guard let timeoutMs = Int(timeoutText), timeoutMs > 0 else { throw UsageError("--timeout-ms '\(timeoutText)' is not a positive integer") }
        let include = try regex(arguments.value("include"), "--include")
        let exclude = try regex(arguments.value("exclude"), "--exclude")
        let chosen = try catalogue(arguments, seed: seed)
        var passedOn = chosen.passedOn
        let options = try pluginOptions(arguments)
        if let text = arguments.value("options") { passedOn += ["--options", text] }
        let scrub = try scrubSettings(arguments)
        for name in ["corpus", "min-recall", "max-false-positive-rate"] {
            if let text = arguments.value(name) { passedOn += ["--\(name)", name == "corpus" ? scrub.corpus ?? text : text] }
        }
        let selected = chosen.checks.filter { check in
            check.slots.contains(slot) && (include.map { matches($0, check.name) } ?? true) && !(exclude.map { matches($0, check.name) } ?? false)
        }
        // A selection that runs nothing would pass with nothing proved.
        guard !selected.isEmpty else {
            throw UsageError("check: --include/--exclude select no check for the \(slot.rawValue) slot (reporthost check --list shows them)")
        }
        let junit = try arguments.value("junit").map { try RequestedFile($0, standardOutput: output, option: "--junit") }

        // The children's plugin copies live here and go with it, whatever became of them.
        let copies = FileManager.default.temporaryDirectory.appendingPathComponent("rh-check-run-\(UUID().uuidString)")
        let isolatedRun = !arguments.flag("in-process")
        if isolatedRun { try? FileManager.default.createDirectory(at: copies, withIntermediateDirectories: true) }
        defer { if isolatedRun { try? FileManager.default.removeItem(at: copies) } }
        var results: [CheckResult] = []
        for check in selected {
            if arguments.flag("in-process") {
                results.append(inProcess(check, plugin: plugin, slot: slot, seed: seed, options: options, scrub: scrub))
            } else {
                // A fuzz run gets the limit once per 20 cases.
                let limit = check.name == "fuzz" ? timeoutMs * max(1, (chosen.fuzzCases + 19) / 20) : timeoutMs
                results.append(isolated(
                    check.name, plugin: plugin, slot: slot, seed: seed, timeoutMs: limit, copies: copies, passing: passedOn))
            }
        }
        // A parent's judgements over its children's figures (a child reports its field only).
        if ProcessInfo.processInfo.environment[CheckContext.copiesFolderVariable] == nil {
            results += Catalogue.scrubJudgements(results, settings: scrub)
        }
        try junit?.write(JUnit.document(plugin: plugin, results: results))
        if arguments.flag("json") {
            let document = JSONValue.object([("plugin", .string(plugin)), ("results", .array(results.map(\.json)))])
            output.write(document.serialized(pretty: true) + "\n")
        } else {
            output.writeText(humanReport(plugin: plugin, slot: slot, seed: seed, results: results))
        }
        return results.contains { $0.status.fails } ? 1 : 0
    }

    /// The checks `--scrub`, `--reproduce SEED` and `--fuzz N` choose, the flags that choose
    /// them again in a check child, and how many fuzz cases run.
    private static func catalogue(
        _ arguments: Arguments, seed: UInt64
    ) throws -> (checks: [ConformanceCheck], passedOn: [String], fuzzCases: Int) {
        var catalogue = Catalogue.checks + (arguments.flag("scrub") ? Catalogue.scrubChecks : [])
        var passedOn: [String] = arguments.flag("scrub") ? ["--scrub"] : []
        var fuzzCases = 0
        if let text = arguments.value("reproduce") {
            guard let caseSeed = UInt64(text) else { throw UsageError("--reproduce '\(text)' is not a case seed (a non-negative integer)") }
            catalogue = [Catalogue.fuzzCheck(seeds: [caseSeed], reproducing: true)]
            passedOn = ["--reproduce", text]
            fuzzCases = 1
        } else if let text = arguments.value("fuzz") {
            guard let count = Int(text), (1...maxFuzzCount).contains(count) else {
                throw UsageError("--fuzz '\(text)' is not a count from 1 to \(maxFuzzCount)")
            }
            catalogue.append(Catalogue.fuzzCheck(seeds: Catalogue.fuzzSeeds(count: count, seed: seed), reproducing: false))
            passedOn += ["--fuzz", text]
            fuzzCases = count
        }
        return (catalogue, passedOn, fuzzCases)
    }

    /// Runs `check` in this process, for a parent `check` (`--in-process`).
    private static func inProcess(
        _ check: ConformanceCheck, plugin: String, slot: PluginSlot, seed: UInt64, options: JSONValue?, scrub: ScrubSettings
    ) -> CheckResult {
        // Run for a parent `check`: a crash leaves a crash file naming the plugin call.
        if let crashes = ProcessInfo.processInfo.environment[crashesFolderVariable] {
            Runtime.captureCrashes(into: URL(fileURLWithPath: crashes), session: "check")
        }
        // Under a parent run, copies go to its folder, which it removes even when this
        // child crashes or is killed.
        let copiesFolder = ProcessInfo.processInfo.environment[CheckContext.copiesFolderVariable]
            .map { URL(fileURLWithPath: $0) } ?? FileManager.default.temporaryDirectory
        let context = CheckContext(
            pluginPath: plugin, slot: slot, seed: seed, mainExecutor: DispatchQueue.main, system: Switches.system, copiesFolder: copiesFolder,
            options: options, scrub: scrub)
        let result = check.run(context)
        CheckContext.removeCopies()
        return result
    }

    /// `--write-corpus FILE [--seed N] [--documents N]`: the corpus `--scrub` generates from the
    /// seed (20 documents unless told), as JSON lines in `--corpus`'s format, so other tools can
    /// be scored on the same text (`scripts/scrub-peers`). No plugin is loaded.
    static func writeCorpus(to path: String, _ arguments: Arguments, output: DocumentOutput) throws -> Int32 {
        let file = try RequestedFile(path, standardOutput: output, option: "--write-corpus")
        let seedText = arguments.value("seed") ?? "1"
        guard let seed = UInt64(seedText) else { throw UsageError("--seed '\(seedText)' is not a non-negative integer") }
        let countText = arguments.value("documents") ?? "20"
        guard let count = Int(countText), (1...ScrubCorpus.maxDocuments).contains(count) else {
            throw UsageError("--documents '\(countText)' is not a count from 1 to \(ScrubCorpus.maxDocuments)")
        }
        let lines = ScrubCorpus.generated(seed: seed, documents: count).documents.map { document in
            JSONValue.object([
                ("text", .string(document.text)),
                ("spans", .array(document.spans.map { span in
                    .object([("start", .int(span.start)), ("end", .int(span.end)), ("kind", .string(span.kind))]
                        + (span.label.map { [("label", JSONValue.string($0))] } ?? []))
                })),
            ]).serialized()
        }
        try file.write(lines.joined(separator: "\n") + "\n")
        return 0
    }

    /// `--corpus FILE`, `--min-recall R`, `--max-false-positive-rate F` (SPEC T-4): only with
    /// `--scrub`; the corpus is read now, so a bad line is a usage error before any check runs.
    static func scrubSettings(_ arguments: Arguments) throws -> ScrubSettings {
        var settings = ScrubSettings()
        for name in ["corpus", "min-recall", "max-false-positive-rate"] where arguments.value(name) != nil && !arguments.flag("scrub") {
            throw UsageError("--\(name) needs --scrub")
        }
        func rate(_ name: String) throws -> Double? {
            guard let text = arguments.value(name) else { return nil }
            guard let value = Double(text), value >= 0, value <= 1 else { throw UsageError("--\(name) '\(text)' is not a number from 0 to 1") }
            return value
        }
        settings.minRecall = try rate("min-recall")
        settings.maxFalsePositiveRate = try rate("max-false-positive-rate")
        if let path = arguments.value("corpus") {
            settings.corpus = Paths.absolute(path)
            do {
                _ = try settings.loadCorpus(seed: 0, system: Switches.system)
            } catch {
                throw UsageError(error.description)
            }
        }
        return settings
    }

    /// `--options JSON`: the object the plugin under test reads through `options_json` (SPEC T-3).
    static func pluginOptions(_ arguments: Arguments) throws -> JSONValue? {
        guard let text = arguments.value("options") else { return nil }
        let value: JSONValue
        do {
            value = try JSONValue.parse(Data(text.utf8))
        } catch {
            throw UsageError("--options '\(text.prefix(80))': not JSON (\(error))")
        }
        guard value.objectValue != nil else { throw UsageError("--options '\(text.prefix(80))': expected a JSON object, got \(value.typeName)") }
        return value
    }

    /// A path that does not exist or is not an ELF shared object is a usage error (SPEC I-8):
    /// one line, exit 2, before any check runs.
    static func requireSharedObject(_ path: String) throws {
        var info = stat()
        guard stat(path, &info) == 0 else { throw UsageError("check: \(path): \(String(cString: strerror(errno)))") }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw UsageError("check: \(path): not a regular file") }
        guard FileManager.default.isReadableFile(atPath: path) else { throw UsageError("check: \(path): cannot be read") }
        guard ELFFile(path: path, system: Switches.system)?.isSharedObject == true else {
            throw UsageError("check: \(path): not an ELF shared object (build the plugin with -shared)")
        }
    }

    /// Runs one check in a child process: crashed on a signal, timed_out past `timeoutMs`.
    /// `passing`: the flags that choose the catalogue (`--scrub`, `--fuzz N`, `--reproduce S`).
    static func isolated(
        _ name: String, plugin: String, slot: PluginSlot, seed: UInt64, timeoutMs: Int, copies: URL, passing: [String] = []
    ) -> CheckResult {
        let arguments = [
            ownExecutable, "check", plugin, "--slot", slot.rawValue, "--seed", String(seed), "--in-process", "--json", "--include",
            "^\(escapedPattern(name))$",
        ] + passing
        var environment = ProcessInfo.processInfo.environment
        environment[CheckContext.copiesFolderVariable] = copies.path
        // A fuzz child names each case before it runs it: a crash or hang still names its case.
        let progress = copies.appendingPathComponent("fuzz-progress-\(UUID().uuidString)")
        if name == "fuzz" {
            _ = FileManager.default.createFile(atPath: progress.path, contents: nil)
            environment[Catalogue.fuzzProgressVariable] = progress.path
        }
        let crashes = copies.appendingPathComponent("crashes-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: crashes, withIntermediateDirectories: true)
        environment[crashesFolderVariable] = crashes.path
        let clock = SystemClock()
        let start = clock.now()
        let child: Subprocess
        switch Subprocess.spawn(arguments, environment: environment, captureOutput: true, captureErrors: true) {
        case .success(let started): child = started
        case .failure(let error):
            return CheckResult(check: name, status: .failed, details: "cannot start the check process: \(error)", durationMs: 0)
        }
        let ended = WaitableState<Subprocess.Ending?>(nil)
        let watched = startThread {
            let ending = child.wait()
            ended.update { $0 = ending }
        }
        guard watched else {
            kill(child.pid, SIGKILL)
            _ = child.wait()
            [child.output, child.errors].compactMap { $0 }.forEach { close($0) }
            return CheckResult(check: name, status: .failed, details: "cannot watch the check process: the system refused a thread", durationMs: 0)
        }
        // Drain both pipes while waiting, so a chatty plugin cannot block the child.
        let drained = drainPipes(of: child)
        let ending = ended.wait(
            until: start.advanced(byMilliseconds: timeoutMs), clock: clock, for: { $0 != nil }, then: { value, _ in value })
        let elapsed = clock.now().milliseconds(since: start)
        if ending == nil {
            kill(child.pid, SIGKILL)
            // Reaped by the watching thread.
            _ = ended.wait(until: nil, clock: clock, for: { $0 != nil }, then: { value, _ in value })
            return CheckResult(
                check: name, status: .timedOut, details: "no result within \(timeoutMs) ms (killed)\(fuzzCase(in: progress))",
                durationMs: elapsed)
        }
        if case .signalled(let signal) = ending {
            let signalName = CrashFile.signalNames[signal].map { "SIG\($0)" } ?? "signal \(signal)"
            return CheckResult(
                check: name, status: .crashed,
                details: "the plugin crashed the check process with \(signalName)\(attribution(in: crashes))\(fuzzCase(in: progress))",
                durationMs: elapsed)
        }
        // The readers end when the pipes close: at the child's exit, unless a process the
        // plugin started still holds them (bounded).
        let (text, errors) = drained.wait(
            until: clock.now().advanced(byMilliseconds: 5_000), clock: clock, for: { $0.out != nil && $0.err != nil },
            then: { value, _ in (value.out ?? Data(), value.err ?? Data()) })
        if let json = try? JSONValue.parse(text), let first = json["results"]?.arrayValue?.first, let result = CheckResult(json: first) {
            return result
        }
        let stderrTail = String(decoding: errors.suffix(400), as: UTF8.self)
        let status = if case .exited(let status) = ending { status } else { Int32(-1) }
        return CheckResult(check: name, status: .failed, details: "no result (exit \(status)): \(stderrTail)", durationMs: elapsed)
    }

    /// Reads the child's standard output and error on their own threads until the pipes
    /// close; each side is set when its reader ends (empty when no thread could start).
    private static func drainPipes(of child: Subprocess) -> WaitableState<(out: Data?, err: Data?)> {
        let drained = WaitableState<(out: Data?, err: Data?)>((nil, nil))
        // Bounded: a plugin printing in a loop must not fill the parent's memory. The result
        // document is small (first 1 MB kept); of stderr only the tail is shown.
        let readers: [(Int32?, DrainKeep, @Sendable (Data) -> Void)] = [
            (child.output, .first(1 << 20), { data in drained.update { $0.out = data } }),
            (child.errors, .last(64 * 1024), { data in drained.update { $0.err = data } }),
        ]
        for (fd, keep, store) in readers {
            guard let fd else { continue }
            let started = startThread {
                store(Switches.system.drain(fd, keep: keep))
                close(fd)
            }
            if !started {
                close(fd)
                store(Data())
            }
        }
        return drained
    }

    /// " on case S; reproduce with --reproduce S": the case a fuzz child was running when it
    /// ended, from its progress file ("" for other checks).
    static func fuzzCase(in progress: URL) -> String {
        guard let data = FileManager.default.contents(atPath: progress.path),
            let last = String(decoding: data, as: UTF8.self).split(separator: "\n").last(where: { $0.hasPrefix("case ") })
        else { return "" }
        let seed = last.dropFirst("case ".count)
        return " on case \(seed); reproduce with --reproduce \(seed)"
    }

    /// The folder a check child writes its crash file into (set by the parent).
    static let crashesFolderVariable = "REPORTHOST_CHECK_CRASHES"

    /// " in <plugin>.<callback>" from the crash file a child left in `folder`, if it names one.
    static func attribution(in folder: URL) -> String {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        for name in names where name.hasSuffix(".crash") || name.hasSuffix(".crash.partial") {
            let path = folder.appendingPathComponent(name).path
            if let plugin = CrashFile(path: path, modifiedAt: Switches.system.now(), system: Switches.system)?.plugin {
                return " in \(plugin.displayName).\(plugin.callback)"
            }
        }
        return ""
    }

    static func humanReport(plugin: String, slot: PluginSlot, seed: UInt64, results: [CheckResult]) -> String {
        var lines = ["reporthost check \(plugin) (slot \(slot.rawValue), seed \(seed))"]
        let order: [CheckStatus] = [.failed, .crashed, .timedOut, .warning, .skipped, .passed]
        for status in order {
            let group = results.filter { $0.status == status }
            guard !group.isEmpty else { continue }
            lines.append("\(status.rawValue.uppercased()) (\(group.count))")
            for result in group {
                lines.append("  \(result.check.padded(toLength: 32)) \(String(result.durationMs).padded(toLength: 6))ms  \(result.details)")
            }
        }
        if let figures = results.first(where: { $0.check == "scrub-recall" })?.figures.flatMap(ScrubFigures.init(json:)) {
            lines += figures.lines
        }
        let failed = results.filter { $0.status.fails }.count
        lines.append("\(results.count - failed) passed, \(failed) failed")
        return lines.joined(separator: "\n") + "\n"
    }

    static func regex(_ pattern: String?, _ flag: String) throws -> Regex<AnyRegexOutput>? {
        guard let pattern else { return nil }
        do {
            return try Regex(pattern)
        } catch {
            throw UsageError("\(flag) '\(pattern)' is not a valid regular expression")
        }
    }

    static func matches(_ regex: Regex<AnyRegexOutput>, _ text: String) -> Bool { text.contains(regex) }

    /// `text` as a pattern that matches it literally (what `--include` a check child gets).
    static func escapedPattern(_ text: String) -> String {
        String(text.flatMap { "\\^$.|?*+()[]{}".contains($0) ? ["\\", $0] : [$0] })
    }

    /// This executable's path (a check's child process runs it again).
    static var ownExecutable: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }
}

