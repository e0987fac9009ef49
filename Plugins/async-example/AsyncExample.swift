import PluginAPI
import PluginKit

/// The `async` form: done when the method returns. Its changes reach running-app reports;
/// a recovered or terminating report may be bundled before it finishes (SPEC H-12), which is
/// why account-context uses the completion form.
final class AsyncExample: AsyncBeforeReportHandler {
    let name = "async-example"

    func onBeforeReportCreated(_ report: Report, isTerminating: Bool) async {
        // A terminating report does not wait for an `async` method: a change made after the
        // first suspension would come after the report was bundled (and be refused as a use
        // of a closed handle). So this form leaves terminating reports alone.
        guard !isTerminating else { return }
        await Task.yield()
        try? report.setAttribute("async.example", "done")
    }
}

@_cdecl("rh_plugin_entry")
public func rh_plugin_entry(_ host: UnsafePointer<rh_host_api>?) -> UnsafePointer<rh_handler>? {
    PluginExport.entry(host: host, plugin: AsyncExample())
}
