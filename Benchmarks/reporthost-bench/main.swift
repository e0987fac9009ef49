import Dispatch
import Foundation
import Host
import Receiver

// Figures for the README and closing notes: each measurement runs against a baseline in
// the same process, and the ratio is what to compare across machines.
//
// Usage: swift build -c release && .build/release/reporthost-bench [reports]

let reports = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 20_000
let directory = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0])
    .deletingLastPathComponent()
let plugin = directory.appendingPathComponent("librh-bench-plugin.so").path

func makeHost() throws -> ReportHost {
    var configuration = Configuration()
    configuration.limits.completionWindowMs = 100
    return try ReportHost(
        configuration: configuration, logger: .silent, mainExecutor: DispatchQueue(label: "bench.main"))
}

func measure(_ label: String, _ count: Int, _ body: () throws -> Void) rethrows -> Double {
    let clock = SystemClock()
    let start = clock.now()
    try body()
    let seconds = Double(clock.now().nanoseconds - start.nanoseconds) / 1e9
    let rate = Double(count) / seconds
    print(label.padding(toLength: 58, withPad: " ", startingAt: 0) + String(format: "%12.0f /s", rate))
    return rate
}

func chain(_ host: ReportHost) throws {
    for _ in 0..<reports { _ = try host.raise(ReportRequest(trigger: .logError)) }
}

let pluginHost = try makeHost()
try pluginHost.loadPlugin(at: plugin, into: .wrapper)
try pluginHost.loadPlugin(at: plugin, into: .handler)

let swiftHost = try makeHost()
let swiftHandler = SwiftHandler(
    name: "bench-swift",
    before: .completion { report, _, completion in
        try? report.setAttribute("bench", "1")
        completion()
    },
    after: .completion { report, _, completion in
        try? report.setAttribute("bench", "1")
        completion()
    })
swiftHost.setHandler(.swift(swiftHandler), for: .wrapper)
swiftHost.setHandler(.swift(swiftHandler), for: .handler)

let emptyHost = try makeHost()

print("reporthost-bench: \(reports) reports, 4 callbacks each, on \(ProcessInfo.processInfo.activeProcessorCount) cores")
try chain(emptyHost)
let emptyRate = try measure("chain with no handlers (prepare + bundle), reports", reports) { try chain(emptyHost) }
try chain(pluginHost)  // warm-up
try chain(swiftHost)
let swiftRate = try measure("chain, 2 Swift handlers (baseline), callbacks", reports * 4) { try chain(swiftHost) }
let cRate = try measure("chain, 2 C plugins through the ABI + libffi, callbacks", reports * 4) { try chain(pluginHost) }
print(String(format: "ratio C-ABI / Swift: %.2f", cRate / swiftRate))
print(String(format: "per report: %.1f us with no handlers, %.1f us with 2 C plugins (4 main-thread hops)",
             1e6 / emptyRate, 4e6 / cRate))

// The ABI table's setter against the Swift call it wraps, on one open handle.
let report = LiveReport(trigger: .upload, hostID: pluginHost.hostID)
let handle = report.openHandle(for: .extended)
let api = pluginHost.hostAPI.pointee
let pointer = OpaquePointer(bitPattern: UInt(handle.rawValue))!
let calls = reports * 20
let swiftCalls = measure("ReportHandle.setAttribute (baseline), calls", calls) {
    for _ in 0..<calls { try? handle.setAttribute("k", "v") }
}
let abiCalls = measure("rh_host_api.set_attribute, calls", calls) {
    for _ in 0..<calls { _ = api.set_attribute(pointer, "k", "v") }
}
print(String(format: "ratio ABI / Swift: %.2f", abiCalls / swiftCalls))

// A JSON object repeating one key against one with as many distinct keys (the baseline):
// a document from outside must not cost more for repeating itself.
let keyCount = 20_000
let distinct = Data(("{" + (0..<keyCount).map { "\"k\($0)\": \($0)" }.joined(separator: ",") + "}").utf8)
let repeated = Data(("{" + (0..<keyCount).map { "\"k\($0 % (keyCount / 2))\": \($0)" }.joined(separator: ",") + "}").utf8)
let distinctRate = try measure("parse \(keyCount) distinct keys (baseline), keys", keyCount) { _ = try JSONValue.parse(distinct) }
let repeatedRate = try measure("parse \(keyCount / 2) keys, each twice, keys", keyCount) { _ = try JSONValue.parse(repeated) }
print(String(format: "ratio repeated / distinct: %.2f", repeatedRate / distinctRate))

// Delivery to the local receiver against saving the same records (the baseline).
let deliveryFolder = FileManager.default.temporaryDirectory.appendingPathComponent("reporthost-bench-\(UUID().uuidString)")
let repository = try Repository.open(folder: deliveryFolder.appendingPathComponent("repo"))
let receiver = try LocalReceiver(folder: deliveryFolder.appendingPathComponent("received"))
let deliveries = max(reports / 40, 100)
let saveRate = try measure("save a report to the repository (baseline), reports", deliveries) {
    for _ in 0..<deliveries {
        var content = ReportContent()
        content.summary = "bench"
        content.attributes = ["k": "v"]
        try repository.saveFound(
            ReportDocument(id: UUID().uuidString.lowercased(), trigger: .logError, content: content, internalLog: [], createdAt: Date()),
            runsChain: false)
    }
}
var delivery = Configuration()
delivery.submission.url = receiver.url
delivery.reportsPerMin = 0
let deliverer = Deliverer(repository: repository, configuration: delivery, transport: CurlTransport(), logger: .silent)
let deliverRate = try measure("deliver to the local receiver (2xx, terminal), reports", deliveries) {
    let summary = try deliverer.deliver(retries: false)
    precondition(summary.accepted == deliveries, "delivered \(summary.accepted) of \(deliveries)")
}
print(String(format: "ratio deliver / save: %.2f", deliverRate / saveRate))
receiver.stop()
try? FileManager.default.removeItem(at: deliveryFolder)
