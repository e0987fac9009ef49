import Dispatch
import FoundationEssentials
import Glibc
import Host
import HostCapture
import HostSupport
import MainQueue
import MallocArena

// One malloc arena for every thread of the commands that only read: their work runs on a
// thread of its own, and a second arena grows a page range at a time (an mprotect each, 300
// for `status --all` at 10,000 records). Not for the commands that recover: a backlog is
// read, saved and unlinked on several threads at once, which one arena's lock would queue
// (a launch with 10,000 crash files took a fifth longer). Nor for `receive`, whose
// connections are served on threads at once; it gives back what a large request took once
// it is answered: its memory stays flat whatever size of posts arrives. The embedding
// library leaves its host's malloc alone.
switch CommandLine.arguments.dropFirst().first {
case "receive": _ = rh_return_large_blocks()
case "report", "launch", "crash", "run", "demo": break
default: _ = rh_use_one_malloc_arena()
}
// What `run` may pass on to its program: recorded before anything opens a descriptor.
InheritedDescriptors.record(system: Switches.system)
// A failure sweep routes SQLite's calls before any database opens.
_ = Switches.faults
// A closed pipe must not kill the host (documents may go to `head`).
signal(SIGPIPE, SIG_IGN)
let output = DocumentOutput.claimStandardOutput()

/// One command of the CLI: its usage lines (the list in `--help`, and `COMMAND --help`),
/// the options it takes (and whether each takes a value), how many words may follow it, and
/// what runs it.
struct Command {
    let name: String
    let usage: String
    let options: [String: Bool]
    let positionals: ClosedRange<Int>
    let run: @Sendable (Arguments, DocumentOutput) throws -> Int32
}

let commonUsage = """
    common options (report, launch, crash, run): --config FILE  --repository DIR
                    --wrapper PATH  --handler PATH  --delegate PATH  --log-level debug|info|warn|error
    """

let commandList: [Command] = [
    Command(
        name: "report", usage: """
            report bug|error|exception [--summary S] [--description D] [--email E]
                   [--severity N] [--label L]... [--attribute K=V]... [--attach FILE]...
                   [--dialog | --dialog-script FILE] [--terminating] [--print]
                                       raise a report, run it through the plugins, store it and make
                                       its first attempt
            """, options: ReportCommand.options, positionals: 1...1, run: ReportCommand.run),
    Command(
        name: "launch", usage: """
            launch [--watch]           recover what earlier runs left (crashes, abnormal exits), deliver, then exit;
                                       --watch keeps delivering until SIGINT or SIGTERM
            """, options: LaunchCommand.options, positionals: 0...0, run: LaunchCommand.run),
    Command(
        name: "status", usage: """
            status [--json] [--limit N | --all] [--config FILE] [--repository DIR]
                   [--log-level L]
                                       what the repository holds: a summary and the newest 20 records
                                       (--limit N: the newest N, --all: every record)
            """, options: StatusCommand.options, positionals: 0...0, run: StatusCommand.run),
    Command(
        name: "show", usage: """
            show ID|latest [--json] [--config FILE] [--repository DIR] [--log-level L]
                                       one stored report as a person reads it (--json: its document)
            """, options: ShowCommand.options, positionals: 1...1, run: ShowCommand.run),
    Command(
        name: "crash", usage: """
            crash [--signal SEGV|BUS|ILL|FPE|ABRT|TRAP] [--attach FILE]...
                                       crash on purpose (recovered by the next launch)
            """, options: CrashCommand.options, positionals: 0...0, run: CrashCommand.run),
    Command(
        name: "run", usage: """
            run [--attach-output KB] [--stderr-breadcrumbs N] [--capture=preload|ptrace]
                -- PROGRAM ARGS...
                                       run a program with crash capture preloaded; record how it ended;
                                       exit with its status
            """, options: RunCommand.options, positionals: 0...0, run: RunCommand.run),
    Command(
        name: "receive", usage: """
            receive [--port N] [--dir DIR] [--respond CODES] [--inbox]
                    [--chaos CODE:P,... [--chaos-seed N]] [--log-level L]
                                       a local submission endpoint (Backtrace-compatible); --inbox
                                       serves a page of what it received on the same port
            """, options: ReceiveCommand.options, positionals: 0...0, run: ReceiveCommand.run),
    Command(
        name: "check", usage: """
            check PLUGIN.so [--slot wrapper|handler|delegate] [--json] [--junit FILE] [--scrub]
                  [--corpus FILE] [--min-recall R] [--max-false-positive-rate F]
                  [--fuzz N] [--reproduce SEED] [--include RE] [--exclude RE] [--seed N]
                  [--options JSON] [--timeout-ms MS] [--in-process] [--log-level L]
                                       prove a plugin keeps the ABI contract (and, with --scrub, that it
                                       scrubs), each check in a child process
            check --list               the conformance checks, one per line
            check --write-corpus FILE [--seed N] [--documents N]
                                       the corpus --scrub generates, as JSON lines (--corpus's format)
            """, options: CheckCommand.options, positionals: 0...1, run: CheckCommand.run),
    Command(
        name: "quarantine", usage: """
            quarantine [--clear [PATH]] [--json] [--config FILE] [--repository DIR]
                       [--log-level L]
                                       plugins that crashed the host (not loaded again)
            """, options: QuarantineCommand.options, positionals: 0...1, run: QuarantineCommand.run),
    Command(
        name: "demo", usage: """
            demo [--repository DIR] [--log-level L]
                                       a crash, a bug, an error and an exception report through the sample plugins
            """, options: DemoCommand.options, positionals: 0...0, run: DemoCommand.run),
]
let commands = Dictionary(uniqueKeysWithValues: commandList.map { ($0.name, $0) })

let usage = """
    usage: reporthost <command> [options]
           reporthost --help | <command> --help | --version

    commands:
    \(commandList.map { $0.usage.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n") }.joined(separator: "\n"))

    \(commonUsage)

    """

let words = Array(CommandLine.arguments.dropFirst())
if words == ["--help"] || words == ["-h"] || words == ["help"] {
    output.write(usage)
    exit(0)
}
if words == ["--version"] {
    output.write("reporthost \(Runtime.version) (plugin ABI \(Runtime.pluginABI))\n")
    exit(0)
}
if words.isEmpty {
    writeStandardError(usage)
    printError("missing command (try: reporthost --help)")
    exit(2)
}
// `COMMAND --help`: before `--` only (after it, the words are `run`'s program's).
if let command = commands[words[0]], words.dropFirst().prefix(while: { $0 != "--" }).contains(where: { $0 == "--help" || $0 == "-h" }) {
    let common = ["report", "launch", "crash", "run"].contains(command.name) ? "\n" + commonUsage + "\n" : ""
    output.write("usage: reporthost " + command.usage.split(separator: "\n").joined(separator: "\n       ") + "\n" + common)
    exit(0)
}

if let problem = Switches.unknownCrashPoint {
    printError(problem)
    exit(2)
}

// Before the first queue: with too few descriptors libdispatch traps with no message.
do {
    try DescriptorLimit.ensure(system: Switches.system)
} catch {
    printError(error.description)
    exit(1)
}

// The command runs off the main thread: the main thread serves the main queue, where
// running-app callbacks run (SPEC H-8), on this very thread (`rh_serve_main_queue`);
// `dispatchMain()` would not do: on Linux it exits the main thread and lets a pool thread
// serve the queue.
let started = startThread {
    let status: Int32
    do {
        let arguments = try Arguments.parse(words) { commands[$0]?.options }
        guard let command = commands[arguments.command] else { throw UsageError("unknown command '\(arguments.command)'") }
        if let stray = arguments.positionals.dropFirst(command.positionals.upperBound).first {
            throw UsageError("'\(command.name)' takes no word '\(stray)' (try: reporthost \(command.name) --help)")
        }
        // Checked for every command that takes it, whether it logs or not.
        _ = try arguments.logLevel()
        status = try command.run(arguments, output)
    } catch let error as HostError {
        printError(error.description)
        status = error.exitStatus
    } catch {
        printError("\(error)")
        status = 2  // a UsageError: the command line itself is wrong
    }
    Switches.reportSweep()
    if status == 0, let lost = output.lostDocument {
        printError("the document could not be written to standard output (\(lost))")
        exit(1)
    }
    exit(status)
}
if !started {
    printError("the system refused a thread for the command")
    exit(1)
}
rh_serve_main_queue()
