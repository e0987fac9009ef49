import Dispatch
import FoundationEssentials
import Glibc
import Host
import HostPlugins
import HostSupport

/// The checks `reporthost check` runs, in order. Each reads the typed rule events the host
/// itself noted (the events the internal log is written from), so a check fails exactly when
/// the host saw the rule broken, whatever the wording of the log.
package enum Catalogue {
    static let handlerSlots: Set<PluginSlot> = [.wrapper, .handler]

    package static let checks: [ConformanceCheck] = [
        ConformanceCheck(
            name: "loads", summary: "loads with RTLD_NOW into its slot; the descriptor's version, size and name are valid",
            slots: Set(PluginSlot.allCases)
        ) { context in
            _ = try context.host()
            return (.passed, "loaded into the \(context.slot.rawValue) slot")
        },
        ConformanceCheck(
            name: "abi-version", summary: "declares ABI major 1 and a minor the host has (version negotiation)",
            slots: Set(PluginSlot.allCases)
        ) { context in
            let host = try ReportHost(configuration: Configuration(), logger: .silent, mainExecutor: context.mainExecutor)
            guard let declared = try PluginLoader.declaredVersion(
                path: context.pluginPath, table: host.hostAPI(for: context.slot), on: context.mainExecutor, timeoutMs: CheckContext.limits.callbackTimeoutMs,
                system: host.system)
            else {
                return (.failed, "rh_plugin_entry is missing or returned NULL")
            }
            let text = "plugin ABI \(declared.major).\(declared.minor), host \(PluginLoader.hostVersion.major).\(PluginLoader.hostVersion.minor)"
            return declared.major == PluginLoader.hostVersion.major && declared.minor <= PluginLoader.hostVersion.minor
                ? (.passed, text) : (.failed, text)
        },
        ConformanceCheck(
            name: "descriptor-sanity", summary: "a printable name of at most 64 characters, a version string (a warning without one)",
            slots: Set(PluginSlot.allCases)
        ) { context in
            let (host, _, plugin) = try context.host()
            defer { host.stop() }
            if plugin.name.count > 64 || plugin.name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
                return (.failed, "name '\(plugin.name)' is over 64 characters or holds control characters")
            }
            guard let version = plugin.version, !version.isEmpty else { return (.warning, "no version string") }
            return (.passed, "\(plugin.name) \(version)")
        },
        ConformanceCheck(
            name: "exports-only-entry", summary: "exports rh_plugin_entry and nothing else (a warning otherwise)",
            slots: Set(PluginSlot.allCases)
        ) { context in
            guard let symbols = exportedSymbols(context.pluginPath, system: context.system) else { return (.skipped, "nm is not installed") }
            guard symbols.contains("rh_plugin_entry") else { return (.failed, "rh_plugin_entry is not exported") }
            let others = symbols.filter { $0 != "rh_plugin_entry" }
            return others.isEmpty
                ? (.passed, "only rh_plugin_entry")
                : (.warning, "\(others.count) other symbol(s) exported, e.g. \(others.prefix(3).joined(separator: ", "))")
        },
        ConformanceCheck(
            name: "entry-time",
            summary: "loading the plugin (dlopen and rh_plugin_entry) takes at most 100 ms, not counting time the loading thread waits for a processor (a warning otherwise)",
            slots: Set(PluginSlot.allCases)
        ) { context in
            let (host, _) = try context.emptyHost()
            defer { host.stop() }
            // The plugin is loaded on the main executor's thread while this one waits: a machine
            // busy with other work delays that thread, which is not the plugin's doing. A sleep or
            // a blocking call in the entry still counts. The span ends after the second reading of
            // that thread's wait, so a wait counted in one is counted in the other.
            let clock = SystemClock()
            let queuedBefore = waitedForProcessor(context)
            let start = clock.now()
            _ = try context.loadCopy(into: host)
            let queuedAfter = waitedForProcessor(context)
            let elapsed = clock.now().milliseconds(since: start)
            var queued = 0
            if let before = queuedBefore, let after = queuedAfter, after >= before { queued = Int((after - before) / 1_000_000) }
            let own = max(0, elapsed - queued)
            let note = "loading took \(own) ms" + (queued > 0 ? " (and \(queued) ms waiting for a processor)" : "")
            return own > 100 ? (.warning, note) : (.passed, note)
        },
        ConformanceCheck(
            name: "completes-once-running-app",
            summary: "for bug, error and exception reports, each callback completes exactly once within the limit",
            slots: handlerSlots
        ) { context in
            let (host, events, plugin) = try context.host()
            defer { host.stop() }
            for trigger in [Trigger.upload, .logError, .logException] {
                let document = try host.raise(ordinary(trigger))
                if let problem = problem(in: document, events, of: plugin.name, [.secondCompletion, .notCompleted, .skipped]) {
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
            try probe(context, kinds: [.notReturned, .returnedLate], passed: "returned in time") { host in
                [try host.runChain(host.makeReport(ordinary(.crash)), mode: .recovered)]
            }
        },
        ConformanceCheck(
            name: "terminating-work-before-return",
            summary: "with is_terminating, a method returns in time and changes nothing after returning",
            slots: handlerSlots
        ) { context in
            try probe(context, kinds: [.notReturned, .returnedLate, .useAfterClose], passed: "all work done before returning") { host in
                var request = ordinary(.logException)
                request.isTerminating = true
                return [try host.raise(request)]
            }
        },
        ConformanceCheck(
            name: "no-writes-after-completion", summary: "never uses a report handle after completing its callback",
            slots: handlerSlots
        ) { context in
            try probe(context, kinds: [.useAfterClose], passed: "no use after completion") { host in
                [try host.raise(ordinary(.upload))]
            }
        },
        ConformanceCheck(
            name: "attachment-budget", summary: "adds at most 3 attachments of at most 3 MB, none empty, per callback",
            slots: handlerSlots
        ) { context in
            try probe(context, kinds: [.droppedAttachment], passed: "attachments within the budget") { host in
                [try host.raise(ordinary(.logError))]
            }
        },
        ConformanceCheck(
            name: "content-limits",
            summary: "keeps each text within 64 KiB and labels and attributes within 1,000 (nothing cut or refused)",
            slots: handlerSlots
        ) { context in
            try probe(context, kinds: [.overLimit], passed: "nothing cut or refused") { host in
                [try host.raise(ordinary(.logError))]
            }
        },
        ConformanceCheck(
            name: "idempotent",
            summary: "running the plugin again over its own result changes nothing (no duplicate labels, attachments or counters)",
            slots: handlerSlots
        ) { context in
            let (host, _, _) = try context.host()
            defer { host.stop() }
            var request = ordinary(.logError)
            request.labels = ["existing"]
            guard let first = try host.raise(request) else { return (.failed, "no document") }
            var again = ordinary(.logError)
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
        ConformanceCheck(
            name: "keeps-others-changes",
            summary: "keeps the labels and attributes set before it in the chain (by the wrapper, by the user's command)",
            slots: handlerSlots
        ) { context in
            let (host, _, _) = try context.host()
            defer { host.stop() }
            var request = ordinary(.logError)
            request.labels = ["set-by-user"]
            request.attributes = ["user.plan": "pro"]
            var expectedLabels = ["set-by-user"]
            var expectedKeys = ["user.plan"]
            // A plugin in the handler slot runs after the wrapper, which adds its own.
            if context.slot == .handler {
                host.setHandler(
                    SwiftHandler(name: "check-wrapper", before: .completion { report, _, done in
                        try? report.addLabel("set-by-wrapper")
                        try? report.setAttribute("wrapper.framework", "flutter")
                        done()
                    }),
                    for: .wrapper)
                expectedLabels.append("set-by-wrapper")
                expectedKeys.append("wrapper.framework")
            }
            guard let document = try host.raise(request) else { return (.failed, "no document") }
            let lostLabels = expectedLabels.filter { !document.content.labels.contains($0) }
            let lostKeys = expectedKeys.filter { document.content.attributes[$0] == nil }
            guard lostLabels.isEmpty && lostKeys.isEmpty else {
                let lost = lostLabels.map { "label '\($0)'" } + lostKeys.map { "attribute '\($0)'" }
                return (.failed, "dropped what was set before it: \(lost.joined(separator: ", ")) (add labels with add_label, not set_labels)")
            }
            return (.passed, "kept \(expectedLabels.count) label(s) and \(expectedKeys.count) attribute(s) set before it")
        },
        ConformanceCheck(
            name: "completes-once-recovered", summary: "on a recovered report no callback completes twice",
            slots: handlerSlots
        ) { context in
            try probe(context, kinds: [.secondCompletion]) { host in
                [try host.runChain(host.makeReport(ordinary(.crash)), mode: .recovered)]
            }
        },
        ConformanceCheck(
            name: "completes-once-terminating", summary: "with is_terminating no callback completes twice",
            slots: handlerSlots
        ) { context in
            try probe(context, kinds: [.secondCompletion]) { host in
                var request = ordinary(.logException)
                request.isTerminating = true
                return [try host.raise(request)]
            }
        },
        ConformanceCheck(
            name: "late-completion", summary: "never calls a completion after the host stopped waiting for it",
            slots: handlerSlots
        ) { context in
            try probe(context, kinds: [.lateCompletion]) { host in
                [try host.raise(ordinary(.upload)), try host.raise(ordinary(.logError))]
            }
        },
        ConformanceCheck(
            name: "no-handle-use-after-callback", summary: "never uses a report handle once its report is bundled",
            slots: Set(PluginSlot.allCases)
        ) { context in
            try probe(context, kinds: [.useAfterBundle], anyHandler: true) { host in
                [try host.raise(ordinary(.upload)), try host.raise(ordinary(.logError)),
                 try host.raise(ordinary(.logException))]
            }
        },
        ConformanceCheck(
            name: "valid-utf8", summary: "writes only valid UTF-8 and no NULL where a value is required",
            slots: Set(PluginSlot.allCases)
        ) { context in
            try probe(context, kinds: [.refusedArgument]) { host in [try host.raise(ordinary(.upload))] }
        },
        ConformanceCheck(
            name: "concurrent-reports", summary: "handles 4 recovered reports at once, its callbacks running on 4 threads together",
            slots: handlerSlots
        ) { context in
            // Long limits: reports queued behind a slow (but legal) method are not this check's
            // business; a deadlock, hang or crash under concurrency is.
            var limits = CheckContext.limits
            limits.recoveredReturnMs = 15_000
            limits.reportBudgetMs = 30_000
            return try probe(context, kinds: Self.callbackProblems, limits: limits) { host in
                let documents = Locked<[ReportDocument?]>([])
                let errors = Locked<[String]>([])
                let group = DispatchGroup()
                for index in 0..<4 {
                    group.enter()
                    let started = startThread {
                        defer { group.leave() }
                        do {
                            // Recovered reports run their callbacks on threads of their own: at once.
                            let document = try host.runChain(host.makeReport(ordinary(.crash)), mode: .recovered)
                            documents.withLock { $0.append(document) }
                        } catch {
                            errors.withLock { $0.append("\(error)") }
                        }
                    }
                    if !started {
                        errors.withLock { $0.append("the system refused a thread for report \(index)") }
                        group.leave()
                    }
                }
                group.wait()
                if let error = errors.withLock({ $0.first }) { throw HostError.runtime(error) }
                return documents.withLock { $0 }
            }
        },
        ConformanceCheck(
            name: "fuzz-empty", summary: "copes with a report that has no fields at all",
            slots: Set(PluginSlot.allCases)
        ) { context in
            try probe(context, kinds: Self.callbackProblems) { host in [try stress(host, ReportRequest(trigger: .upload))] }
        },
        ConformanceCheck(
            name: "fuzz-large-strings", summary: "copes with a 1 MB summary, description and attribute value",
            slots: Set(PluginSlot.allCases)
        ) { context in
            try probe(context, kinds: Self.callbackProblems) { host in
                let big = String(repeating: "x", count: 1 << 20)
                var request = ReportRequest(trigger: .logError)
                request.summary = big
                request.description = big
                request.attributes = ["big": big]
                return [try stress(host, request)]
            }
        },
        ConformanceCheck(
            name: "fuzz-many-attributes", summary: "copes with 5,000 attributes and 1,000 labels",
            slots: Set(PluginSlot.allCases)
        ) { context in
            try probe(context, kinds: Self.callbackProblems) { host in
                var request = ReportRequest(trigger: .logError)
                request.summary = "many attributes"
                for index in 0..<5_000 { request.attributes["key.\(index)"] = "value \(index)" }
                request.labels = (0..<1_000).map { "label-\($0)" }
                return [try stress(host, request)]
            }
        },
        ConformanceCheck(
            name: "fuzz-non-ascii", summary: "copes with non-ASCII text: accents, CJK, emoji, right-to-left, combining marks",
            slots: Set(PluginSlot.allCases)
        ) { context in
            try probe(context, kinds: Self.callbackProblems) { host in
                var request = ReportRequest(trigger: .upload)
                request.summary = "Überprüfung fehlgeschlagen — 失败 — 🚀🔥 — مرحبا — e\u{301}"
                request.description = String(repeating: "ñ€𝄞", count: 1_000)
                request.labels = ["ラベル", "🏷️"]
                request.attributes = ["ключ": "значение"]
                return [try stress(host, request)]
            }
        },
        ConformanceCheck(
            name: "fuzz-seeded", summary: "copes with 20 random reports (reproducible with --seed)",
            slots: Set(PluginSlot.allCases)
        ) { context in
            try probe(context, kinds: Self.callbackProblems) { host in
                var random = SplitMix64(seed: context.seed)
                return try (0..<20).map { _ in try stress(host, random.report()) }
            }
        },
        ConformanceCheck(
            name: "delegate-fields", summary: "on a dialog report, add_fields and check_fields return within the limit",
            slots: [.delegate]
        ) { context in
            try probe(context, kinds: [.notReturned, .returnedLate, .skipped]) { host in
                var request = ordinary(.dialog)
                request.dialog = SendingDialog()
                return [try host.raise(request)]
            }
        },
        ConformanceCheck(
            name: "delegate-attachments", summary: "the attachments step returns in time and stays within the delegate's budget",
            slots: [.delegate]
        ) { context in
            try probe(context, kinds: [.notReturned, .returnedLate, .droppedAttachment, .skipped]) { host in
                [try host.raise(ordinary(.logError))]
            }
        },
        ConformanceCheck(
            name: "delegate-decision", summary: "the asynchronous form decides exactly once within the decision limit",
            slots: [.delegate]
        ) { context in
            try probe(context, kinds: [.secondDecision, .notDecided, .lateDecision]) { host in
                [try host.raise(ordinary(.upload))]
            }
        },
        ConformanceCheck(
            name: "destroy-then-reload", summary: "after destroy, the plugin can be entered again and still works",
            slots: Set(PluginSlot.allCases)
        ) { context in
            let (host, _, plugin) = try context.host()
            _ = try stress(host, ordinary(.upload))
            host.stop()
            let events = RuleEvents()
            let again = try ReportHost(
                configuration: host.configuration, logger: .silent, mainExecutor: context.mainExecutor, observer: events.observe)
            defer { again.stop() }
            let reloaded = try again.loadPlugin(at: plugin.path, into: context.slot)
            let document = try stress(again, ordinary(.logError))
            if let problem = problem(in: document, events, of: reloaded.name, Self.callbackProblems) { return (.failed, problem) }
            return (.passed, "destroyed, entered again, handled a report")
        },
    ]
}
