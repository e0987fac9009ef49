import Foundation
import PluginAPI
import PluginKit

/// Adds who the report is about: `account.id` and `account.plan`, from the environment
/// (`REPORTHOST_ACCOUNT_ID`, `REPORTHOST_ACCOUNT_PLAN`) with defaults, and an `account:<plan>`
/// label. Completion form, so its changes also reach recovered crashes (SPEC H-12).
final class AccountContext: BeforeReportHandler {
    let name = "account-context"
    let version: String? = "1.0.0"
    let accountID: String
    let plan: String

    init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        accountID = environment["REPORTHOST_ACCOUNT_ID"] ?? "demo-account"
        plan = environment["REPORTHOST_ACCOUNT_PLAN"] ?? "free"
    }

    func onBeforeReportCreated(_ report: Report, isTerminating: Bool, completion: Completion) {
        defer { completion() }
        try? report.setAttribute("account.id", accountID)
        try? report.setAttribute("account.plan", plan)
        // Assign, never append: a second run over the same report changes nothing.
        let label = "account:\(plan)"
        if let labels = try? report.labels(), !labels.contains(label) {
            try? report.setLabels(labels + [label])
        }
    }
}

@_cdecl("rh_plugin_entry")
public func rh_plugin_entry(_ host: UnsafePointer<rh_host_api>?) -> UnsafePointer<rh_handler>? {
    PluginExport.entry(host: host, plugin: AccountContext())
}
