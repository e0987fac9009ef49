import Dispatch
import Foundation
import Host
import HostDelivery
import HostModel
import HostPlugins
import HostStore
import HostSupport
import Receiver

// The Swift side of scripts/bench: each mode makes one measurement and prints `name value`
// lines (a rate in per second, a time in ms). Modes that compare two things in this process
// (the chain, the host call, JSON keys) interleave them in rounds themselves.
//
//   reporthost-bench chain N           reports through 2 C plugins, 2 Swift handlers, none
//   reporthost-bench trail N           the change trail's work for a chain's changes, against that chain
//   reporthost-bench hostcall N        set_attribute through the C table against the Swift call
//   reporthost-bench json              a JSON object repeating its keys against distinct keys
//   reporthost-bench fill REPO N       stores N reports awaiting their first attempt
//   reporthost-bench deliver REPO URL  one delivery pass of what REPO holds to URL (`dsn:DSN`: a Sentry DSN)
//   reporthost-bench body FILE         writes the request body of one filled report; prints its type

let arguments = Array(CommandLine.arguments.dropFirst())
let directory = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0])
    .deletingLastPathComponent()

func seconds(_ body: () throws -> Void) rethrows -> Double {
    let clock = SystemClock()
    let start = clock.now()
    try body()
    return Double(clock.now().nanoseconds - start.nanoseconds) / 1e9
}

func makeHost() throws -> ReportHost {
    var configuration = Configuration()
    configuration.limits.completionWindowMs = 100
    return try ReportHost(configuration: configuration, logger: .silent, mainExecutor: DispatchQueue(label: "bench.main"))
}

func chain(reports: Int) throws {
    let pluginHost = try makeHost()
    let plugin = directory.appendingPathComponent("librh-bench-plugin.so").path
    try pluginHost.loadPlugin(at: plugin, into: .wrapper)
    try pluginHost.loadPlugin(at: plugin, into: .handler)
    let swiftHost = try makeHost()
    let completing = SwiftHandler.Callback.completion { report, _, completion in
        try? report.setAttribute("bench", "1")
        completion()
    }
    let swiftHandler = SwiftHandler(name: "bench-swift", before: completing, after: completing)
    swiftHost.setHandler(.swift(swiftHandler), for: .wrapper)
    swiftHost.setHandler(.swift(swiftHandler), for: .handler)
    let emptyHost = try makeHost()
    func run(_ host: ReportHost) throws -> Double {
        try seconds { for _ in 0..<reports { _ = try host.raise(ReportRequest(trigger: .logError)) } }
    }
    _ = try (run(emptyHost), run(swiftHost), run(pluginHost))  // warm-up
    print("chain_empty_per_s", Double(reports) / (try run(emptyHost)))
    print("chain_swift_callbacks_per_s", Double(reports * 4) / (try run(swiftHost)))
    print("chain_c_callbacks_per_s", Double(reports * 4) / (try run(pluginHost)))
}

/// The change trail's share of a chain that changes text: the trail's own work for the
/// chain's text changes (`ChangeTrail.record`: the comparison and the ranges), replayed
/// alone, against the chain. Two chains: the samples' (wrapper-sim and scrub-pii, through the
/// C ABI) on a report whose 2.7 KB description holds 80 values to scrub, the figure; and a
/// Swift handler that replaces a name in the same report, cheaper than any plugin. Rounds
/// alternate the chain and the replay.
func trail(reports: Int) throws {
    let lines = (0..<40).map { "line \($0): alice\($0)@example.com paid from 10.0.0.\($0) at /home/alice/cart" }
    var request = ReportRequest(trigger: .logError)
    request.summary = "checkout failed for alice@example.com"
    request.description = lines.joined(separator: "\n")
    request.attributes = ["user": "alice", "email": "alice@example.com", "path": "/home/alice/cart", "note": lines[0]]

    let samples = try makeHost()
    try samples.loadPlugin(at: directory.appendingPathComponent("libwrapper-sim.so").path, into: .wrapper)
    try samples.loadPlugin(at: directory.appendingPathComponent("libscrub-pii.so").path, into: .handler)
    let (chain, record) = try trailShare(samples, request, reports: reports)
    print("trail_chain_us", chain)
    print("trail_record_us", record)

    /// Every `alice` as `[user]`, byte by byte (Foundation's search would cost more than the
    /// chain it stands in).
    @Sendable func named(_ text: String) -> String {
        let name = Array("alice".utf8)
        var out: [UInt8] = []
        var bytes = Array(text.utf8)[...]
        while let first = bytes.first {
            if bytes.starts(with: name) {
                out += "[user]".utf8
                bytes = bytes.dropFirst(name.count)
            } else {
                out.append(first)
                bytes = bytes.dropFirst()
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
    let swift = try makeHost()
    let replacing = SwiftHandler.Callback.completion { report, _, completion in
        if let text = try? report.summary() { try? report.setSummary(named(text)) }
        if let text = try? report.description() { try? report.setDescription(named(text)) }
        for key in ["user", "email", "path", "note"] {
            if let text = try? report.attribute(key) { try? report.setAttribute(key, named(text)) }
        }
        completion()
    }
    swift.setHandler(.swift(SwiftHandler(name: "bench-replace", before: replacing, after: nil)), for: .handler)
    let (swiftChain, swiftRecord) = try trailShare(swift, request, reports: reports)
    print("trail_swift_chain_us", swiftChain)
    print("trail_swift_record_us", swiftRecord)
}

/// Microseconds per report of `host`'s chain over `request`, and of the trail's work for the
/// text changes that chain makes (read from its document), replayed alone.
func trailShare(_ host: ReportHost, _ request: ReportRequest, reports: Int) throws -> (chain: Double, record: Double) {
    guard let document = try host.raise(request) else { fatalError("reporthost-bench: the chain dropped the report") }
    let before = [("summary", request.summary), ("description", request.description)]
        + request.attributes.map { ("attribute:\($0.key)", Optional($0.value)) }
    let after = [("summary", document.content.summary), ("description", document.content.description)]
        + document.content.attributes.map { ("attribute:\($0.key)", Optional($0.value)) }
    let old = Dictionary(uniqueKeysWithValues: before)
    let changes = after.filter { old[$0.0] ?? nil != $0.1 }.sorted { $0.0 < $1.0 }.map { (field: $0.0, old: old[$0.0] ?? nil, new: $0.1) }
    precondition(!changes.isEmpty, "the chain changed no text")
    let who = Contributor(handler: "bench", slot: "handler", step: "handler.before", source: .handlerBefore, budgetKey: "handler.before")
    func chain() throws -> Double { try seconds { for _ in 0..<reports { _ = try host.raise(request) } } }
    func replay() -> Double {
        seconds {
            for _ in 0..<reports {
                var trail = ChangeTrail()
                for change in changes { trail.record(who, field: change.field, from: change.old, to: change.new) }
                precondition(trail.entries.count == changes.count)
            }
        }
    }
    _ = try (chain(), replay())  // warm-up
    var times: (chain: Double, record: Double) = (0, 0)
    for round in 0..<4 {
        if round % 2 == 0 {
            times.chain += try chain()
            times.record += replay()
        } else {
            times.record += replay()
            times.chain += try chain()
        }
    }
    return (times.chain / Double(4 * reports) * 1e6, times.record / Double(4 * reports) * 1e6)
}

/// The ABI table's setter against the Swift call it wraps, on one open handle.
func hostCall(calls: Int) throws {
    let host = try makeHost()
    let report = LiveReport(trigger: .upload, createdAt: Date(), hostID: host.hostID)
    let handle = report.openHandle(for: .extended)
    let api = host.hostAPI().pointee
    let pointer = OpaquePointer(bitPattern: UInt(handle.rawValue))!
    let swift = seconds { for _ in 0..<calls { try? handle.setAttribute("k", "v") } }
    let table = seconds { for _ in 0..<calls { _ = api.set_attribute(pointer, "k", "v") } }
    print("hostcall_swift_per_s", Double(calls) / swift)
    print("hostcall_table_per_s", Double(calls) / table)
}

/// A JSON object repeating one key against one with as many distinct keys (the baseline): a
/// document from outside must not cost more for repeating itself.
func json() throws {
    let keyCount = 20_000
    let distinct = Data(("{" + (0..<keyCount).map { "\"k\($0)\": \($0)" }.joined(separator: ",") + "}").utf8)
    let repeated = Data(("{" + (0..<keyCount).map { "\"k\($0 % (keyCount / 2))\": \($0)" }.joined(separator: ",") + "}").utf8)
    print("json_distinct_keys_per_s", Double(keyCount) / (try seconds { _ = try JSONValue.parse(distinct) }))
    print("json_repeated_keys_per_s", Double(keyCount) / (try seconds { _ = try JSONValue.parse(repeated) }))
}

func benchDocument() -> ReportDocument {
    var content = ReportContent()
    content.summary = "bench"
    content.description = String(repeating: "a report as a program raises it; ", count: 12)
    content.attributes = ["k": "v", "build": "1.2.3", "user.plan": "free"]
    content.labels = ["bench"]
    return ReportDocument(id: UUID().uuidString.lowercased(), trigger: .logError, content: content, internalLog: [], createdAt: Date())
}

func fill(_ folder: String, count: Int) throws {
    let repository = try Repository.open(folder: URL(fileURLWithPath: folder))
    let elapsed = try seconds {
        for _ in 0..<count { try repository.saveFound(benchDocument(), runsChain: false) }
    }
    print("filled", count)
    print("fill_ms", elapsed * 1000)
}

func deliver(_ folder: String, url: String) throws {
    var configuration = Configuration()
    configuration.repository = folder
    if url.hasPrefix("dsn:") {
        configuration.submission.dsn = String(url.dropFirst(4))
    } else {
        configuration.submission.url = url
    }
    configuration.reportsPerMin = 0
    configuration.logging = []
    var options = RuntimeOptions(configuration: configuration, mainExecutor: DispatchQueue(label: "bench.main"))
    options.installCrashCapture = false
    let runtime = try Runtime.start(options)
    defer { runtime.stop() }
    try runtime.recover()
    var summary = Deliverer.Summary()
    let elapsed = try seconds { summary = try runtime.drain(retries: false) }
    print("delivered", summary.accepted)
    print("deliver_per_s", Double(summary.accepted) / elapsed)
}

func body(_ path: String) throws {
    let body = MultipartBody()
    try body.write(json: BacktraceReport.json(benchDocument(), crash: nil), attachments: [], to: URL(fileURLWithPath: path), system: .live)
    print("content_type", body.contentType)
}

func count(_ index: Int) -> Int {
    guard arguments.count > index, let value = Int(arguments[index]), value > 0 else {
        FileHandle.standardError.write(Data("reporthost-bench: a count is expected, see the comment in main.swift\n".utf8))
        exit(2)
    }
    return value
}

switch (arguments.first, arguments.count) {
case ("chain", 2): try chain(reports: count(1))
case ("trail", 2): try trail(reports: count(1))
case ("hostcall", 2): try hostCall(calls: count(1))
case ("json", 1): try json()
case ("fill", 3): try fill(arguments[1], count: count(2))
case ("deliver", 3): try deliver(arguments[1], url: arguments[2])
case ("body", 2): try body(arguments[1])
default:
    FileHandle.standardError.write(Data("reporthost-bench: unknown mode; see the comment at the top of main.swift\n".utf8))
    exit(2)
}
