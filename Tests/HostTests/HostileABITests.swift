import Foundation
import Host
import HostTestSupport
import PluginAPI
import Testing

/// A plugin's arguments are outside input: sizes are checked before any byte is copied, and
/// a plugin lying about its buffers cannot crash the host (SPEC ).
@Suite struct HostileABITests {
    @Test("R-7: add_attachment checks the claimed size and the budget before copying; a huge or negative size is dropped, never read")
    func claimedSizes() throws {
        let source = fixtureHandler(
            name: "liar", before: "on_before",
            extra: """
                #include <stdint.h>
                static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                    (void)c; (void)t;
                    static char small[16] = "sixteen bytes!!";
                    char text[64];
                    /* 1 TB and SIZE_MAX from a 16-byte buffer: reading them would crash the host. */
                    snprintf(text, sizeof text, "%d %d",
                             host->add_attachment(r, "huge", NULL, small, (size_t)1 << 40),
                             host->add_attachment(r, "negative", NULL, small, SIZE_MAX));
                    host->set_attribute(r, "statuses", text);
                    /* Three real ones spend the budget; the fourth claims 3 MB from 16 bytes. */
                    for (int i = 0; i < 3; i++) host->add_attachment(r, "ok", NULL, small, sizeof small);
                    snprintf(text, sizeof text, "%d", host->add_attachment(r, "past-budget", NULL, small, 3u << 20));
                    host->set_attribute(r, "budget", text);
                    /* A copy-out with a capacity of SIZE_MAX is a large buffer, not a negative one. */
                    char out[32];
                    size_t length = 0;
                    int copied = host->attachment_data(r, "ok", out, SIZE_MAX, &length);
                    snprintf(text, sizeof text, "%d %zu", copied, length);
                    host->set_attribute(r, "copy", text);
                    done();
                }
                """)
        let library = try Fixtures.freshCopy(of: Fixtures.plugin("liar", source: source))
        let host = try TestHost.make()
        try host.loadPlugin(at: library.path, into: .handler)
        let document = try host.raiseDocument(ReportRequest(trigger: .logError))
        #expect(document.content.attributes["statuses"] == "\(RH_ERR_DROPPED) \(RH_ERR_DROPPED)")
        #expect(document.content.attributes["budget"] == "\(RH_ERR_DROPPED)")
        #expect(document.content.attributes["copy"] == "0 16")
        #expect(document.content.attachments.map(\.name) == ["ok", "ok", "ok"])
        let notes = document.internalLog.map(\.message)
        #expect(notes.contains("attachment 'huge' dropped: it is 1099511627776 bytes, over the 3145728-byte limit"))
        #expect(notes.contains("attachment 'negative' dropped: it is 18446744073709551615 bytes, over the 3145728-byte limit"))
        #expect(notes.contains { $0.contains("'past-budget' dropped: it is past the 3 attachments") })
    }
}

extension HostileABITests {
    @Test("H-14: a plugin logging in a loop cannot grow the report without bound: 1,000 entries are kept, one says how many went")
    func internalLogIsBounded() throws {
        let source = fixtureHandler(
            name: "chatty", before: "on_before",
            extra: """
                static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                    (void)c; (void)t;
                    for (int i = 0; i < 50000; i++) host->log(r, RH_LOG_INFO, "again");
                    done();
                }
                """)
        let library = try Fixtures.freshCopy(of: Fixtures.plugin("chatty", source: source))
        let host = try TestHost.make()
        try host.loadPlugin(at: library.path, into: .handler)
        let document = try host.raiseDocument(ReportRequest(trigger: .logError))
        #expect(document.internalLog.count == 1_001)
        #expect(document.internalLog.last?.message == "49000 further internal-log entries dropped (at most 1000 are kept)")
    }
}
