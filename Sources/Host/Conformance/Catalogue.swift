import Foundation

/// The checks `reporthost check` runs, in order. Each reads what the host itself noted in the
/// report's internal log, so a check fails exactly when the host saw the rule broken.
public enum Catalogue {
    static let handlerSlots: Set<PluginSlot> = [.wrapper, .handler]

    public static let checks: [ConformanceCheck] = [
        ConformanceCheck(
            name: "loads", summary: "loads with RTLD_NOW into its slot; the descriptor's version, size and name are valid",
            slots: Set(PluginSlot.allCases)
        ) { context in
            _ = try context.host()
            return (.passed, "loaded into the \(context.slot.rawValue) slot")
        },
        ConformanceCheck(
            name: "exports-only-entry", summary: "exports rh_plugin_entry and nothing else (a warning otherwise)",
            slots: Set(PluginSlot.allCases)
        ) { context in
            guard let symbols = exportedSymbols(context.pluginPath) else { return (.skipped, "nm is not installed") }
            guard symbols.contains("rh_plugin_entry") else { return (.failed, "rh_plugin_entry is not exported") }
            let others = symbols.filter { $0 != "rh_plugin_entry" }
            return others.isEmpty
                ? (.passed, "only rh_plugin_entry")
                : (.warning, "\(others.count) other symbol(s) exported, e.g. \(others.prefix(3).joined(separator: ", "))")
        },
        ConformanceCheck(
            name: "entry-time", summary: "rh_plugin_entry and loading take at most 100 ms (a warning otherwise)",
            slots: Set(PluginSlot.allCases)
        ) { context in
            let clock = SystemClock()
            let start = clock.now()
            _ = try context.host()
            let elapsed = clock.now().milliseconds(since: start)
            return elapsed > 100 ? (.warning, "loading took \(elapsed) ms") : (.passed, "loading took \(elapsed) ms")
        },
        ConformanceCheck(
            name: "completes-once-running-app",
            summary: "for bug, error and exception reports, each callback completes exactly once within the limit",
            slots: handlerSlots
        ) { context in
            let (host, _, plugin) = try context.host()
            defer { host.stop() }
            for trigger in [Trigger.upload, .logError, .logException] {
                let document = try host.raise(ReportRequest(trigger: trigger))
                if let problem = problem(in: document, of: plugin.name, matching: ["completion called again", "did not complete", "skipped"]) {
                    return (.failed, "\(trigger.name) report: \(problem)")
                }
            }
            return (.passed, "3 reports, each callback completed once")
        },
        ConformanceCheck(
            name: "recovered-returns-in-time",
            summary: "on a recovered report each method returns within the recovered limit (1 s here, 3 s by default)",
            slots: handlerSlots
        ) { context in
            let (host, _, plugin) = try context.host()
            defer { host.stop() }
            let document = try host.runChain(host.makeReport(ReportRequest(trigger: .crash)), mode: .recovered)
            if let problem = problem(in: document, of: plugin.name, matching: ["did not return", "abandoned"]) { return (.failed, problem) }
            return (.passed, "returned in time")
        },
        ConformanceCheck(
            name: "terminating-work-before-return",
            summary: "with is_terminating, a method returns in time and changes nothing after returning",
            slots: handlerSlots
        ) { context in
            let (host, _, plugin) = try context.host()
            defer { host.stop() }
            var request = ReportRequest(trigger: .logException)
            request.isTerminating = true
            let document = try host.raise(request)
            if let problem = problem(in: document, of: plugin.name, matching: ["did not return", "through a closed handle"]) {
                return (.failed, problem)
            }
            return (.passed, "all work done before returning")
        },
        ConformanceCheck(
            name: "no-writes-after-completion", summary: "never uses a report handle after completing its callback",
            slots: handlerSlots
        ) { context in
            let (host, _, plugin) = try context.host()
            defer { host.stop() }
            let document = try host.raise(ReportRequest(trigger: .upload))
            if let problem = problem(in: document, of: plugin.name, matching: ["through a closed handle"]) { return (.failed, problem) }
            return (.passed, "no use after completion")
        },
        ConformanceCheck(
            name: "attachment-budget", summary: "adds at most 3 attachments of at most 3 MB, none empty, per callback",
            slots: Set(PluginSlot.allCases)
        ) { context in
            let (host, _, plugin) = try context.host()
            defer { host.stop() }
            let document = try host.raise(ReportRequest(trigger: .logError))
            if let problem = problem(in: document, of: plugin.name, matching: ["dropped"]) { return (.failed, problem) }
            return (.passed, "\(document?.content.attachments.count ?? 0) attachment(s), within the budget")
        },
        ConformanceCheck(
            name: "idempotent",
            summary: "running the plugin again over its own result changes nothing (no duplicate labels, attachments or counters)",
            slots: handlerSlots
        ) { context in
            let (host, _, _) = try context.host()
            defer { host.stop() }
            var request = ReportRequest(trigger: .logError)
            request.labels = ["existing"]
            guard let first = try host.raise(request) else { return (.failed, "no document") }
            var again = ReportRequest(trigger: .logError)
            again.summary = first.content.summary
            again.description = first.content.description
            again.labels = first.content.labels
            again.attributes = first.content.attributes
            again.severity = first.content.severity == 0 ? nil : first.content.severity
            guard let second = try host.raise(again) else { return (.failed, "no document") }
            var differences: [String] = []
            if second.content.labels != first.content.labels { differences.append("labels \(first.content.labels) -> \(second.content.labels)") }
            if second.content.attributes != first.content.attributes { differences.append("attributes changed") }
            if second.content.summary != first.content.summary { differences.append("summary changed") }
            if second.content.description != first.content.description { differences.append("description changed") }
            return differences.isEmpty ? (.passed, "a second run changed nothing") : (.failed, differences.joined(separator: "; "))
        },
    ]

    /// The first internal-log message about `plugin` containing one of `phrases`.
    static func problem(in document: ReportDocument?, of plugin: String, matching phrases: [String]) -> String? {
        guard let document else { return "no document" }
        return document.internalLog.first { entry in
            (entry.handler == plugin || entry.message.hasPrefix(plugin + ".")) && phrases.contains { entry.message.contains($0) }
        }?.message
    }

    /// The defined dynamic symbols of a library, via nm; nil when nm is missing.
    static func exportedSymbols(_ path: String) -> [String]? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["nm", "-D", "--defined-only", path]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return nil }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { return nil }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap { $0.split(separator: " ").last.map(String.init) }
    }
}
