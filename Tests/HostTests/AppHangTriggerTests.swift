import Foundation
import Host
import HostPlugins
import HostTestSupport
import PluginAPI
import Testing

/// SPEC B-4, ABI 1.1: an app hang is trigger `app_hang` (`RH_TRIGGER_APP_HANG` 7, type error)
/// for a plugin built for 1.1, and `RH_TRIGGER_LOG_ERROR` for one built for 1.0.
@Suite struct AppHangTriggerTests {
    static func reader(_ name: String) -> String {
        fixtureHandler(name: name, before: "on_before", extra: """
            static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                (void)c; (void)t;
                char text[32];
                snprintf(text, sizeof text, "%d %d", host->report_trigger(r), host->report_type(r));
                host->set_attribute(r, "\(name).trigger", text);
                done();
            }
            """)
    }

    @Test("B-4: a 1.1 plugin sees RH_TRIGGER_APP_HANG, a 1.0 plugin RH_TRIGGER_LOG_ERROR; both see type error")
    func triggerByMinor() throws {
        let host = try TestHost.make { $0.repository = makeTemporaryDirectory("hang-trigger").path }
        let old = Self.reader("old").replacingOccurrences(of: "handler.abi_minor = RH_ABI_VERSION_MINOR;", with: "handler.abi_minor = 0;")
        try host.loadPlugin(at: try Fixtures.freshCopy(of: Fixtures.plugin("hang-old", source: old)).path, into: .wrapper)
        try host.loadPlugin(at: try Fixtures.freshCopy(of: Fixtures.plugin("hang-new", source: Self.reader("new"))).path, into: .handler)
        let document = try host.raiseDocument(ReportRequest(trigger: .appHang))
        #expect(RH_TRIGGER_APP_HANG == 7)
        #expect(document.content.attributes["new.trigger"] == "\(RH_TRIGGER_APP_HANG) \(RH_REPORT_ERROR)")
        #expect(document.content.attributes["old.trigger"] == "\(RH_TRIGGER_LOG_ERROR) \(RH_REPORT_ERROR)")
        #expect(document.trigger == .appHang && document.json["trigger"]?.stringValue == "app_hang" && document.type == .error)
    }
}
