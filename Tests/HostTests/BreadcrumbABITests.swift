import Foundation
import Host
import HostPlugins
import HostTestSupport
import PluginAPI
import Testing

/// SPEC B-1, ABI 1.1: a real C plugin sees a report's breadcrumbs through `each_breadcrumb`,
/// changes one message and removes another; the trail names them `breadcrumb:<index>`.
@Suite struct BreadcrumbABITests {
    /// A handler that copies what it sees into attributes, masks the message holding "token",
    /// removes the one holding "drop", then checks the calls past the end.
    static let editor = fixtureHandler(
        name: "crumb-editor", before: "on_before",
        extra: """
            struct seen { rh_report *r; char list[2048]; size_t token, drop; };
            static bool visit(void *c, size_t index, const char *timestamp, int32_t level, const char *category, const char *message) {
                struct seen *s = c;
                char line[400];
                snprintf(line, sizeof line, "%zu|%s|%d|%s|%s;", index, timestamp, level, category, message);
                strncat(s->list, line, sizeof s->list - strlen(s->list) - 1);
                if (strstr(message, "token")) s->token = index;
                if (strstr(message, "drop")) s->drop = index;
                return true;
            }
            static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                (void)c; (void)t;
                struct seen s = {r, "", 99, 99};
                host->each_breadcrumb(r, visit, &s);
                host->set_attribute(r, "seen", s.list);
                host->set_breadcrumb_message(r, s.token, "token=[secret]");
                host->remove_breadcrumb(r, s.drop);
                char status[64];
                snprintf(status, sizeof status, "%d %d %d", host->set_breadcrumb_message(r, 50, "x"), host->remove_breadcrumb(r, 50),
                         host->set_breadcrumb_message(r, 0, NULL));
                host->set_attribute(r, "past-end", status);
                done();
            }
            """)

    @Test("B-1: each_breadcrumb shows them oldest first; set_breadcrumb_message and remove_breadcrumb change them, in the trail")
    func pluginEditsBreadcrumbs() throws {
        let host = try TestHost.make { $0.repository = makeTemporaryDirectory("crumb-abi").path }
        try host.loadPlugin(at: try Fixtures.freshCopy(of: Fixtures.plugin("crumb-editor", source: Self.editor)).path, into: .handler)
        var request = ReportRequest(trigger: .logError)
        let time = Date(timeIntervalSince1970: 1_796_184_660.5)
        request.breadcrumbs = [
            Breadcrumb(sequence: 4, timestamp: time, level: .info, category: "app", message: "opened settings"),
            Breadcrumb(sequence: 5, timestamp: time, level: .warn, category: "net", message: "token=abc123 sent"),
            Breadcrumb(sequence: 6, timestamp: time, level: .error, category: "app", message: "drop me"),
            Breadcrumb(sequence: 7, timestamp: time, level: .debug, category: "app", message: "saved"),
        ]
        let document = try host.raiseDocument(request)
        #expect(document.content.attributes["seen"]
            == "0|2026-12-02T04:11:00.500Z|1|app|opened settings;1|2026-12-02T04:11:00.500Z|2|net|token=abc123 sent;"
            + "2|2026-12-02T04:11:00.500Z|3|app|drop me;3|2026-12-02T04:11:00.500Z|0|app|saved;")
        #expect(document.content.breadcrumbs.map(\.message) == ["opened settings", "token=[secret]", "saved"])
        #expect(document.content.breadcrumbs.map(\.sequence) == [4, 5, 7], "a changed message keeps its place and id")
        #expect(document.content.attributes["past-end"] == "\(RH_ERR_NOT_FOUND) \(RH_ERR_NOT_FOUND) \(RH_ERR_INVALID)")
        let trail = document.changes.filter { $0.field.hasPrefix("breadcrumb:") }
        #expect(trail.map(\.field) == ["breadcrumb:1", "breadcrumb:2"])
        #expect(trail.map(\.operation) == [.set, .removed])
        #expect(trail.first?.plugin == "crumb-editor" && trail.first?.wasLength == "token=abc123 sent".utf8.count)
    }

    @Test("B-1: the three members follow data_folder in the table, in the ABI's order (docs/reference/abi.md)")
    func tableOrder() throws {
        let offset = { (key: PartialKeyPath<rh_host_api>) in MemoryLayout<rh_host_api>.offset(of: key)! }
        let pointer = MemoryLayout<UnsafeRawPointer>.size
        #expect(offset(\.each_breadcrumb) == offset(\.data_folder) + pointer)
        #expect(offset(\.set_breadcrumb_message) == offset(\.each_breadcrumb) + pointer)
        #expect(offset(\.remove_breadcrumb) == offset(\.set_breadcrumb_message) + pointer)
        #expect(MemoryLayout<rh_host_api>.size == offset(\.remove_breadcrumb) + pointer)
    }
}
