import FoundationEssentials
import Glibc
import Host
import HostPlugins
import HostSupport

/// `check --fuzz N [--seed S]` and `check --reproduce SEED` (issue: the author's kit): N
/// generated reports through the plugin on one host, in the check's child process. Each case
/// has a seed of its own, written to a progress file before it runs, so a crash or hang that
/// ends the child still names the case that caused it; `--reproduce` runs that case alone
/// and describes its input.
extension Catalogue {
    /// The environment variable naming the file a fuzz child writes `case <seed>` lines to.
    package static let fuzzProgressVariable = "REPORTHOST_FUZZ_PROGRESS"

    /// What counts as a breach on a fuzz case: a callback that hung or was given up on, a
    /// completion or decision rule broken, a handle misused. A refusal the host makes by design
    /// (past a limit, an attachment over its budget) is the host keeping its rules, never the
    /// plugin's failure.
    static let fuzzProblems: Set<RuleEvent.Kind> = callbackProblems.union([
        .secondCompletion, .lateCompletion, .useAfterClose, .useAfterBundle,
    ])

    /// The case seeds of a run: `count` seeds derived from `seed`.
    package static func fuzzSeeds(count: Int, seed: UInt64) -> [UInt64] {
        var random = SplitMix64(seed: seed)
        return (0..<count).map { _ in random.next() }
    }

    /// The `fuzz` check over `seeds` (a run's, or the one case `--reproduce` names).
    package static func fuzzCheck(seeds: [UInt64], reproducing: Bool) -> ConformanceCheck {
        ConformanceCheck(
            name: "fuzz", summary: "copes with generated reports: long, empty, invalid UTF-8, many labels and attributes, large attachments",
            slots: Set(PluginSlot.allCases)
        ) { context in
            let progress = ProcessInfo.processInfo.environment[fuzzProgressVariable].map { open($0, O_WRONLY | O_APPEND | O_CLOEXEC) }
            defer { if let progress, progress >= 0 { close(progress) } }
            // Generous limits: a case of two 3 MB attachments on a loaded machine is slow, not
            // broken; a plugin that hangs is still found (the fuzz judges what the plugin does,
            // `recovered-returns-in-time` and its kin judge its speed).
            var limits = CheckContext.limits
            limits.callbackTimeoutMs = 15_000
            limits.reportBudgetMs = 45_000
            let (host, events, plugin) = try context.host(limits: limits)
            defer { host.stop() }
            for seed in seeds {
                // Before the case runs, where a crash cannot take it back.
                if let progress, progress >= 0 { _ = context.system.writeAll(progress, "case \(seed)\n") }
                let input = FuzzCase(seed: seed)
                let before = events.count
                var request = input.request
                if context.slot == .delegate { request.trigger = .upload }
                let document = try host.raise(request)
                let problem = document == nil ? "no document" : events.first(of: fuzzProblems, about: plugin.name, skipping: before)?.message
                if let problem {
                    return (.failed, "case \(seed) (\(input.description)): \(problem); reproduce with --reproduce \(seed)")
                }
            }
            if reproducing, let seed = seeds.first {
                return (.passed, "case \(seed) (\(FuzzCase(seed: seed).description)): no crash, hang or limit breach")
            }
            return (.passed, "\(seeds.count) generated report(s), no crash, hang or limit breach")
        }
    }
}

/// One generated report: its shape chosen from the seed.
struct FuzzCase {
    var request: ReportRequest
    /// The input in words (sizes and counts), for a failure's details.
    var description: String

    init(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let triggers: [Trigger] = [.upload, .logError, .logException]
        var request = ReportRequest(trigger: triggers[random.int(0..<3)])
        var words: [String] = [request.trigger.name]
        // At most `limit` characters, made at that size (a label's text is never cut from a
        // 64 KiB one: that made a case cost 150 ms).
        func text(_ random: inout SplitMix64, limit: Int = 70_000) -> String {
            switch random.int(0..<5) {
            case 0: return ""
            case 1: return String(repeating: "x", count: min(limit, random.int(60_000..<70_000)))  // around the 64 KiB text limit
            case 2:
                // Bytes from outside (a command line, a file) are not UTF-8: the host hands the
                // plugin what they decode to, replacement characters included.
                let bytes = (0..<min(limit, random.int(1..<512))).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                return String(String(decoding: bytes, as: UTF8.self).prefix(limit))
            case 3: return String(("e\u{301}🙂ﷺ\u{202E}\u{0}" + String(repeating: "€", count: min(limit, random.int(0..<5_000)))).prefix(limit))
            default: return String("ordinary text \(random.next())".prefix(limit))
            }
        }
        if random.int(0..<4) > 0 { request.summary = text(&random) }
        if random.int(0..<4) > 0 { request.description = text(&random) }
        words.append("summary \(request.summary?.utf8.count ?? 0) bytes, description \(request.description?.utf8.count ?? 0) bytes")
        // Within the host's documented limits (1,000 labels, 1,000 attributes, 3 MB an
        // attachment), with room for what the plugin adds: a refusal the host makes by design
        // must not be what a case finds.
        let labels = [0, 1, 10, 900][random.int(0..<4)]
        request.labels = (0..<labels).map { "label-\($0)-\(text(&random, limit: 40))" }
        let attributes = [0, 3, 100, 900][random.int(0..<4)]
        for index in 0..<attributes { request.attributes["fuzz.\(index)"] = text(&random, limit: 1_000) }
        words.append("\(labels) labels, \(attributes) attributes")
        let sizes = (0..<random.int(0..<3)).map { _ in [1, 4_096, 3 << 20][random.int(0..<3)] }
        request.attachments = sizes.enumerated().map { index, size in
            OfferedAttachment(name: "fuzz-\(index).bin", filename: "fuzz-\(index).bin", data: Data(repeating: UInt8(index), count: size))
        }
        words.append(sizes.isEmpty ? "no attachments" : "attachments of \(sizes.map(String.init).joined(separator: ", ")) bytes")
        self.request = request
        description = words.joined(separator: ", ")
    }
}
