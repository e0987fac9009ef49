import Dispatch
import Foundation
import Host

// A closed pipe must not kill the host (documents may go to `head`).
signal(SIGPIPE, SIG_IGN)
let output = DocumentOutput.claimStandardOutput()

let usage = """
    usage: reporthost <command> [options]

      report bug|error|exception [--summary S] [--description D] [--email E]
             [--severity N] [--label L]... [--attribute K=V]... [--attach FILE]...
             [--terminating] [--print]
      launch                   recover what earlier runs left (crashes, abnormal exits), then exit
      status [--json]          what the repository holds, per record and in total
      crash [--signal SEGV|BUS|ILL|FPE|ABRT|TRAP]   crash on purpose (recovered by the next launch)
      receive [--port N] [--dir DIR] [--respond CODES]   a local submission endpoint
      check PLUGIN.so [--slot S] [--json] [--include RE] [--exclude RE] [--seed N] [--in-process]
      check --list             the conformance checks, one per line
      quarantine [--clear [PATH]] [--json]   plugins that crashed the host (not loaded again)
      run [--attach-output KB] -- PROGRAM ARGS...   run a program with crash capture preloaded;
                               recover what it left when it ends; exit with its status
      demo                     a bug, an error and an exception report through the sample plugins

    common options: --config FILE  --repository DIR  --wrapper PATH  --handler PATH
                    --log-level debug|info|warn|error

    """

let commands: [String: (options: [String: Bool], run: @Sendable (Arguments, DocumentOutput) throws -> Int32)] = [
    "report": (ReportCommand.options, ReportCommand.run),
    "demo": (DemoCommand.options, DemoCommand.run),
    "launch": (LaunchCommand.options, LaunchCommand.run),
    "status": (StatusCommand.options, StatusCommand.run),
    "crash": (CrashCommand.options, CrashCommand.run),
    "receive": (ReceiveCommand.options, ReceiveCommand.run),
    "check": (CheckCommand.options, CheckCommand.run),
    "quarantine": (QuarantineCommand.options, QuarantineCommand.run),
    "run": (RunCommand.options, RunCommand.run),
]

let words = Array(CommandLine.arguments.dropFirst())
if words == ["--help"] || words == ["-h"] || words == ["help"] {
    output.write(usage)
    exit(0)
}
if words.isEmpty {
    writeStandardError(usage)
    printError("missing command (try: reporthost --help)")
    exit(2)
}

// The command runs off the main thread: the main thread serves the main queue, where
// running-app callbacks run (SPEC H-8). The main thread runs Foundation's run loop, which
// drains DispatchQueue.main on this very thread; `dispatchMain()` would not do: on Linux it
// exits the main thread and lets a pool thread serve the queue.
Thread.detachNewThread {
    let status: Int32
    do {
        let arguments = try Arguments.parse(words) { commands[$0]?.options }
        guard let command = commands[arguments.command] else { throw UsageError("unknown command '\(arguments.command)'") }
        status = try command.run(arguments, output)
    } catch let error as HostError {
        printError(error.description)
        status = error.exitStatus
    } catch {
        printError("\(error)")
        status = 2  // a UsageError: the command line itself is wrong
    }
    if status == 0, let lost = output.lostDocument {
        printError("the document could not be written to standard output (\(lost))")
        exit(1)
    }
    exit(status)
}
let keepAlive = Timer(timeInterval: 1e9, repeats: true) { _ in }
RunLoop.main.add(keepAlive, forMode: .default)
while true { _ = RunLoop.main.run(mode: .default, before: .distantFuture) }
