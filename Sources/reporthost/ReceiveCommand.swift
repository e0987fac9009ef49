import Dispatch
import FoundationEssentials
import Glibc
import Host
import HostDelivery
import HostSupport
import Receiver

/// `reporthost receive [--port N] [--dir DIR] [--respond CODES] [--inbox] [--chaos SPEC
/// [--chaos-seed N]]`: a local submission endpoint on loopback, with the inbox's pages and API
/// beside it (SPEC T-2). Prints one line per received report on stdout; stops on SIGINT or
/// SIGTERM. Does not touch any repository (SPEC I-2).
enum ReceiveCommand {
    static let options: [String: Bool] = [
        "port": true, "dir": true, "respond": true, "inbox": false, "chaos": true, "chaos-seed": true, "log-level": true,
    ]

    static func run(_ arguments: Arguments, output: DocumentOutput) throws -> Int32 {
        let port: UInt16
        if let text = arguments.value("port") {
            guard let value = UInt16(text) else { throw UsageError("--port '\(text)' is not a port number from 0 to 65535") }
            port = value
        } else {
            port = 0
        }
        let folder = URL(fileURLWithPath: Paths.absolute(arguments.value("dir") ?? "received"))
        let script = try arguments.value("respond").map { text throws in try LocalReceiver.parseScript(text) } ?? [.status(200)]
        let chaos = try self.chaos(arguments)
        let receiver = try LocalReceiver(
            port: port, folder: folder, script: script, keepInMemory: false, inbox: arguments.flag("inbox"), chaos: chaos
        ) { received in
            let type = received.report["attributes"]?["error.type"]?.stringValue ?? "report"
            let answer: String =
                switch received.answer {
                case .status(let code): String(code)
                case .reset: "reset"
                case .stall: "stall"
                }
            // The summary on one line, at most 80 characters: what arrived, at a glance.
            let summary = (received.report["attributes"]?["error.message"]?.stringValue ?? "")
                .split(whereSeparator: \.isNewline).joined(separator: " ")
            let shown = summary.count > 80 ? summary.prefix(79) + "…" : Substring(summary)
            // One line per report, whatever a client sends: its text cannot break or fake one.
            output.write(TerminalText.visible("received \(received.uuid) (\(type), \(counts(received))) \"\(shown)\" -> \(answer)") + "\n")
        }
        // The addresses last: whoever waits for them (a script, a test) has read the rest.
        if let chaos {
            let faults = chaos.faults.map { "\($0.fault.word):\($0.probability)" }.joined(separator: ",")
            writeStandardError("reporthost: chaos \(faults), seed \(try chaosSeed(arguments))\n")
        }
        writeStandardError("reporthost: receiving on \(receiver.url) into \(folder.path)\n")
        if arguments.flag("inbox") { writeStandardError("reporthost: inbox on \(receiver.inboxURL)\n") }
        let stop = DispatchSemaphore(value: 0)
        let sources = [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { stop.signal() }
            source.resume()
            return source
        }
        stop.wait()
        receiver.stop()
        sources.forEach { $0.cancel() }
        return 0
    }

    /// `--chaos SPEC` with `--chaos-seed N` (0 when not given).
    static func chaos(_ arguments: Arguments) throws -> Chaos? {
        guard let text = arguments.value("chaos") else {
            if arguments.value("chaos-seed") != nil { throw UsageError("--chaos-seed needs --chaos") }
            return nil
        }
        let seed = try chaosSeed(arguments)
        do {
            return try Chaos(text, seed: seed)
        } catch {
            throw UsageError(error.description)
        }
    }

    /// `--chaos-seed N`; 0 when not given.
    static func chaosSeed(_ arguments: Arguments) throws -> UInt64 {
        guard let text = arguments.value("chaos-seed") else { return 0 }
        guard let seed = UInt64(text) else { throw UsageError("--chaos-seed '\(text)' is not a non-negative integer") }
        return seed
    }

    /// `1 attachment(s), 3 breadcrumb(s)`: Backtrace's breadcrumb attachment is counted as
    /// breadcrumbs, not as a file (as `show` and the inbox count them).
    static func counts(_ received: LocalReceiver.Received) -> String {
        let breadcrumbs = received.attachments[BacktraceReport.breadcrumbsAttachment].flatMap { try? JSONValue.parse($0).arrayValue }
        let files = received.attachments.keys.filter { $0 != BacktraceReport.breadcrumbsAttachment }.count
        return "\(files) attachment(s)" + (breadcrumbs.map { ", \($0.count) breadcrumb(s)" } ?? "")
    }
}
