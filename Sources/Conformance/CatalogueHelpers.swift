import Dispatch
import FoundationEssentials
import Glibc
import Host
import HostPlugins
import HostSupport

/// The helpers the checks of `Catalogue.checks` share.
extension Catalogue {
    /// An ordinary report for the checks that are not about odd input (the fuzz checks own
    /// empty, huge and unusual fields).
    static func ordinary(_ trigger: Trigger) -> ReportRequest {
        var request = ReportRequest(trigger: trigger)
        request.summary = "conformance check"
        request.description = "raised by reporthost check"
        return request
    }

    /// A terminating report: the host waits only for each method to return, so the fuzz and
    /// stress checks see crashes and hangs, not the completion rules other checks own.
    static func stress(_ host: ReportHost, _ request: ReportRequest) throws -> ReportDocument? {
        var request = request
        request.isTerminating = true
        return try host.raise(request)
    }

    /// What the host notes when a callback hangs or is given up on.
    static let callbackProblems: Set<RuleEvent.Kind> = [.notCompleted, .notReturned, .returnedLate, .skipped]

    /// Runs `body` on a fresh host with the plugin, then fails on the first rule event of one
    /// of `kinds` about the plugin (about any handler with `anyHandler`: a use of a handle
    /// whose report is gone no longer knows its handler).
    static func probe(
        _ context: CheckContext, kinds: Set<RuleEvent.Kind>, anyHandler: Bool = false, limits: Limits = CheckContext.limits,
        passed: String? = nil, _ body: (ReportHost) throws -> [ReportDocument?]
    ) throws -> (CheckStatus, String) {
        let (host, events, plugin) = try context.host(limits: limits)
        defer { host.stop() }
        let documents = try body(host)
        if documents.contains(where: { $0 == nil }) { return (.failed, "no document") }
        if let event = events.first(of: kinds, about: anyHandler ? nil : plugin.name) { return (.failed, event.message) }
        return (.passed, passed ?? "\(documents.count) report(s), no problem noted")
    }

    /// The first rule event of one of `kinds` about `plugin`; "no document" when the chain
    /// produced none.
    static func problem(in document: ReportDocument?, _ events: RuleEvents, of plugin: String, _ kinds: Set<RuleEvent.Kind>)
        -> String?
    {
        guard document != nil else { return "no document" }
        return events.first(of: kinds, about: plugin)?.message
    }

    /// How long the main executor's thread, which loads plugins, has waited, runnable, for a
    /// processor (nanoseconds, the kernel's `/proc/thread-self/schedstat`); nil when the kernel
    /// does not say.
    static func waitedForProcessor(_ context: CheckContext) -> UInt64? {
        let system = context.system
        return context.mainExecutor.sync(timeoutMilliseconds: 1_000) { runQueueWait(system: system) } ?? nil
    }

    /// The calling thread's wait for a processor so far (nanoseconds), from schedstat's second field.
    static func runQueueWait(system: SystemCalls) -> UInt64? {
        guard case .success(let data) = BoundedFile.read("/proc/thread-self/schedstat", limit: 256, system: system) else { return nil }
        let fields = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isWhitespace)
        return fields.count >= 2 ? UInt64(fields[1]) : nil
    }

    /// The defined dynamic symbols of a library, via nm; nil when nm is missing. Of nm's
    /// output the first 4 MB are kept (a plugin's symbol table is input from outside).
    static func exportedSymbols(_ path: String, system: SystemCalls) -> [String]? {
        guard case .success(let nm) = Subprocess.spawn(["nm", "-D", "--defined-only", path], captureOutput: true),
            let output = nm.output
        else { return nil }
        let data = system.drain(output, keep: .first(4 << 20))
        close(output)
        guard nm.wait() == .exited(0) else { return nil }
        // Global symbols only (nm's type letter in capitals, or `u`): a local one in the
        // dynamic table (Swift leaves protocol conformance descriptors there) is not exported.
        return String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap { line -> String? in
            let fields = line.split(separator: " ")
            guard fields.count >= 2, let type = fields[fields.count - 2].first, type.isUppercase || type == "u" else { return nil }
            return String(fields[fields.count - 1])
        }
    }
}

/// A dialog that sends the report as it is (checks of the delegate's fields hooks).
struct SendingDialog: DialogPresenter {
    func present(_ fields: DialogFields) -> DialogDecision { .send(fields) }
}

/// Random reports for `fuzz-seeded`.
extension SplitMix64 {
    mutating func text() -> String {
        let alphabet = Array("abcXYZ019 -_./@=é€🙂\t")
        return String((0..<int(0..<200)).map { _ in alphabet[int(0..<alphabet.count)] })
    }

    mutating func report() -> ReportRequest {
        let triggers: [Trigger] = [.upload, .logError, .logException]
        var request = ReportRequest(trigger: triggers[int(0..<3)])
        if int(0..<2) == 0 { request.summary = text() }
        if int(0..<2) == 0 { request.description = text() }
        request.labels = (0..<int(0..<5)).map { _ in text() }
        for _ in 0..<int(0..<20) { request.attributes[text()] = text() }
        if int(0..<3) == 0 { request.severity = Int32(int(1..<6)) }
        return request
    }
}
