import Dispatch
import FoundationEssentials
import Glibc
import Host
import HostPlugins
import HostSupport

/// `reporthost report bug|error|exception`: raises a running-app report, runs it through
/// the handler chain and prints the bundled document with `--print` (SPEC I).
enum ReportCommand {
    static let options: [String: Bool] = Arguments.common.merging([
        "summary": true, "description": true, "email": true, "severity": true, "label": true, "attribute": true,
        "attach": true, "dialog": false, "dialog-script": true, "terminating": false, "print": false,
    ]) { a, _ in a }

    static func run(_ arguments: Arguments, output: DocumentOutput) throws -> Int32 {
        // Everything the command line can get wrong is checked before the host starts.
        var request = try makeRequest(arguments)
        var options = try arguments.runtimeOptions()
        // Initial attempts only, recovered reports first; retries are left to `launch` (I-3).
        options.delivery = .onePass(retries: false)
        let runtime = try Runtime.start(options)
        defer { runtime.stop() }
        let signals = InterruptHandler(runtime: runtime)
        try runtime.recover()
        request.dialog = request.dialog.map { DialogInProgress(presenter: $0, signals: signals) }
        guard let document = try runtime.raise(request) else { return 0 }  // the user cancelled the dialog
        if arguments.flag("print") { output.write(document.json.serialized(pretty: true) + "\n") }
        // After SIGINT/SIGTERM the report is stored; a later launch delivers it (H-15).
        if !runtime.isInterrupted { try runtime.deliver() }
        return 0
    }

    static func makeRequest(_ arguments: Arguments) throws -> ReportRequest {
        guard arguments.positionals.count == 1, let kind = arguments.positionals.first else {
            throw UsageError("'report' needs exactly one kind: bug, error or exception")
        }
        let dialog = try makeDialog(arguments, kind: kind)
        var request: ReportRequest
        switch kind {
        case "bug": request = ReportRequest(trigger: dialog == nil ? .upload : .dialog)
        case "error": request = ReportRequest(trigger: .logError)
        case "exception": request = ReportRequest(trigger: .logException)
        default: throw UsageError("unknown report kind '\(kind)' (expected bug, error or exception)")
        }
        request.dialog = dialog
        request.summary = arguments.value("summary")
        request.description = arguments.value("description")
        request.email = arguments.value("email")
        if let text = arguments.value("severity") {
            guard let severity = Int32(text), ReportContent.severityRange.contains(severity) else {
                throw UsageError("--severity '\(text)' is not an integer from 1 to 5")
            }
            request.severity = severity
        }
        request.labels = arguments.values("label")
        for pair in arguments.values("attribute") {
            guard let equals = pair.firstIndex(of: "="), equals != pair.startIndex else {
                throw UsageError("--attribute '\(pair)' is not KEY=VALUE")
            }
            request.attributes[String(pair[..<equals])] = String(pair[pair.index(after: equals)...])
        }
        for path in arguments.values("attach") {
            let url = URL(fileURLWithPath: Paths.absolute(path))
            var attachment = ReportRequest.ExtendedAttachment(name: url.lastPathComponent, filename: url.lastPathComponent, data: Data())
            // Read only up to the 3 MB limit: a larger file is dropped and noted (R-7), never
            // held in memory whole.
            switch BoundedFile.read(url.path, limit: ReportContent.attachmentMaxBytes, followLinks: true, system: Switches.system) {
            case .success(let data): attachment.data = data
            case .failure(.tooLarge(let size, _)): attachment.declaredSize = UInt(clamping: size)
            case .failure(let failure): throw UsageError("--attach '\(path)': the file is missing or unreadable (\(failure))")
            }
            request.attachments.append(attachment)
        }
        request.isTerminating = arguments.flag("terminating")
        return request
    }

    /// `--dialog` (a terminal is required) or `--dialog-script FILE`; bug reports only.
    static func makeDialog(_ arguments: Arguments, kind: String) throws -> (any DialogPresenter)? {
        let script = arguments.value("dialog-script")
        let terminal = arguments.flag("dialog")
        guard script != nil || terminal else { return nil }
        guard kind == "bug" else { throw UsageError("--dialog and --dialog-script are for bug reports, not '\(kind)'") }
        if let script {
            guard !terminal else { throw UsageError("--dialog and --dialog-script exclude each other") }
            return try ScriptedDialog(path: Paths.absolute(script))
        }
        guard TerminalDialog.isAvailable else { throw UsageError("--dialog needs a terminal on standard input and standard error") }
        return TerminalDialog()
    }
}

/// SIGINT and SIGTERM while a report runs (SPEC H-15): the remaining calls are skipped and
/// the report is bundled and stored. While the dialog is showing the user has not sent the
/// report yet, so the process ends with nothing stored, after a clean stop of its session.
///
/// # Thread safety
/// `@unchecked Sendable`: the signal sources are set once in `init`; the rest is `Locked`.
final class InterruptHandler: @unchecked Sendable {
    private var sources: [any DispatchSourceSignal] = []
    private let inDialog = Locked(false)

    /// - Parameter runtime: the runtime to interrupt, once started (`launch --watch` may be
    ///   signalled while it waits to become primary).
    /// - Parameter onSignal: also runs on each signal (`launch --watch` stops its loop).
    init(runtime: @escaping @Sendable () -> Runtime?, onSignal: @escaping @Sendable () -> Void = {}) {
        sources = [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [inDialog] in
                if inDialog.withLock({ $0 }), let runtime = runtime() {
                    runtime.logger.info("interrupted during the dialog: the report was not sent; nothing is stored")
                    runtime.abandon()
                    exit(0)
                }
                runtime()?.interrupt()
                onSignal()
                Self.endWithin(Self.graceMs, signal: number, log: runtime()?.logger)
            }
            source.resume()
            return source
        }
    }

    convenience init(runtime: Runtime) { self.init(runtime: { runtime }) }

    /// How long a command may go on after SIGINT or SIGTERM (finishing the report it stores,
    /// a delivery in flight, a step of recovery) before it ends anyway.
    static let graceMs = 10_000
    private static let deadlineStarted = Locked(false)

    /// Ends the process `ms` after the first signal if it has not ended by itself: whatever
    /// it was doing (a system call that blocks, a plugin that ignores its limits) stops.
    /// As safe as a kill, which the repository is made to survive: the next launch finishes
    /// what was left.
    private static func endWithin(_ ms: Int, signal number: Int32, log: HostLogger?) {
        guard deadlineStarted.withLock({ started in defer { started = true }; return !started }) else { return }
        _ = startThread {
            usleep(useconds_t(ms) * 1_000)
            log?.warn("still running \(ms / 1_000) s after SIG\(number == SIGTERM ? "TERM" : "INT"): ending now; the next launch finishes what was left")
            _exit(128 + number)
        }
    }

    func dialog(showing: Bool) { inDialog.withLock { $0 = showing } }

    deinit { sources.forEach { $0.cancel() } }
}

/// Marks the time the dialog is on screen, for `InterruptHandler`.
struct DialogInProgress: DialogPresenter {
    let presenter: any DialogPresenter
    let signals: InterruptHandler

    func present(_ fields: DialogFields) -> DialogDecision {
        signals.dialog(showing: true)
        defer { signals.dialog(showing: false) }
        return presenter.present(fields)
    }
}
