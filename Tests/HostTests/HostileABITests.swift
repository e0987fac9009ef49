import Foundation
import Host
import HostPlugins
import HostSupport
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

extension HostileABITests {
    @Test("R-5, R-9: a label count past 1,000 is refused before the array is read; a text over 64 KiB is cut at a character and noted; a log line over 4 KiB is cut")
    func reportContentIsBounded() throws {
        let source = fixtureHandler(
            name: "grower", before: "on_before",
            extra: """
                #include <stdint.h>
                #include <stdlib.h>
                #include <string.h>
                static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                    (void)c; (void)t;
                    const char *one[] = {"only"};
                    char text[64];
                    /* A count of 2^40 with a one-element array: reading it would end the host. */
                    snprintf(text, sizeof text, "%d %d", host->set_labels(r, one, (size_t)1 << 40),
                             host->add_labels(r, one, SIZE_MAX));
                    host->set_attribute(r, "huge-counts", text);
                    /* 200 KB of "é" (two bytes each), so the cut falls between characters. */
                    size_t size = 200 * 1024;
                    char *big = malloc(size + 1);
                    for (size_t i = 0; i < size; i += 2) { big[i] = (char)0xC3; big[i + 1] = (char)0xA9; }
                    big[size] = 0;
                    host->set_description(r, big);
                    host->log(r, RH_LOG_INFO, big);
                    free(big);
                    for (int i = 0; i < 1000; i++) host->add_label(r, "l");
                    snprintf(text, sizeof text, "%d", host->add_label(r, "one-too-many"));
                    host->set_attribute(r, "label-1001", text);
                    done();
                }
                """)
        let library = try Fixtures.freshCopy(of: Fixtures.plugin("grower", source: source))
        let host = try TestHost.make()
        try host.loadPlugin(at: library.path, into: .handler)
        let document = try host.raiseDocument(ReportRequest(trigger: .logError))
        #expect(document.content.attributes["huge-counts"] == "\(RH_ERR_INVALID) \(RH_ERR_INVALID)")
        #expect(document.content.attributes["label-1001"] == "\(RH_ERR_INVALID)")
        #expect(document.content.labels.count == 1_000 && !document.content.labels.contains("one-too-many"))
        let description = try #require(document.content.description)
        #expect(description.utf8.count == ReportContent.textMaxBytes && description == String(repeating: "é", count: 32 * 1024))
        let notes = document.internalLog.map(\.message)
        #expect(notes.contains("set_description: a text over the 65536-byte limit was cut to it"), "\(notes.prefix(5))")
        #expect(notes.contains("add_label refused: it would make more than 1000 labels"))
        #expect(notes.filter { $0.contains("set_labels refused") || $0.contains("add_labels refused") }.count == 2)
        let logged = try #require(notes.first { $0.hasPrefix("éé") })
        #expect(logged.hasSuffix(" … (cut: over 4096 bytes)") && logged.utf8.count < 4_200)
    }

    @Test("R-4: a new attribute past 1,000 is refused, an existing one still changes; host-wide attributes keep the same limits")
    func attributesAreBounded() throws {
        let report = LiveReport(trigger: .upload, createdAt: Date())
        let handle = report.openHandle(for: .extended)
        for index in 0..<ReportContent.attributesMax { try handle.setAttribute("k\(index)", "v") }
        #expect(throws: ReportError.invalid) { try handle.setAttribute("one-more", "v") }
        try handle.setAttribute("k0", "changed")
        try handle.setAttribute("k1", nil)
        try handle.setAttribute("one-more", "v")
        #expect(try handle.attribute("k0") == "changed" && (try handle.attribute("one-more")) == "v")

        let hostWide = HostAttributes()
        for index in 0..<ReportContent.attributesMax { #expect(hostWide.set("k\(index)", "v")) }
        #expect(!hostWide.set("one-more", "v") && hostWide.set("k0", "w"))
        #expect(!hostWide.set("k0", String(repeating: "x", count: ReportContent.textMaxBytes + 1)))
        #expect(hostWide.snapshot.count == ReportContent.attributesMax && hostWide.snapshot["k0"] == "w")
    }

    @Test("H-9, R-7: a held handle's attachments spend its budget (no 3 MB copies piling up), and at most 1,000 held changes are kept")
    func heldChangesAreBounded() throws {
        let report = LiveReport(trigger: .upload, createdAt: Date())
        let handle = report.openHandle(for: .extended)
        report.holdChanges(of: handle)
        let megabytes = Data(repeating: 7, count: ReportContent.attachmentMaxBytes)
        var results: [String] = []
        for index in 0..<5 {
            do {
                try handle.addAttachment(name: "a\(index)", filename: "a\(index).bin", data: megabytes)
                results.append("ok")
            } catch {
                results.append("\(error)")
            }
        }
        #expect(results == ["ok", "ok", "ok", "dropped", "dropped"], "the budget of 3 holds for held changes too")
        // The plugin path checks the held budget before copying a byte out of plugin memory.
        let copies = Locked(0)
        #expect(throws: ReportError.dropped) {
            try handle.addAttachment(name: "c", filename: "c.bin", size: 16) {
                copies.withLock { $0 += 1 }
                return Data(count: 16)
            }
        }
        #expect(copies.withLock { $0 } == 0)
        for index in 0..<1_200 { try? handle.setSummary("s\(index)") }
        #expect(throws: ReportError.dropped) { try handle.setSummary("past the limit") }
        report.complete(handle)
        let document = report.bundle()
        #expect(document.content.attachments.map(\.name) == ["a0", "a1", "a2"])
        // 3 attachments and 997 summaries were kept (refused changes are not): the last is s996.
        #expect(document.content.summary == "s996")
        let notes = document.internalLog.map(\.message)
        #expect(notes.filter { $0.hasPrefix("changes made after the method returned are dropped past the first 1000") }.count == 1)
        #expect(notes.contains { $0.hasPrefix("attachment 'a3' dropped: it is past the 3 attachments") }, "a refused held change is noted: \(notes.prefix(4))")
    }

    @Test("H-9: a held handle keeps at most 16 MB of texts: replacing 1,000 labels of 64 KiB again and again stops there")
    func heldBytesAreBounded() throws {
        let report = LiveReport(trigger: .upload, createdAt: Date())
        let handle = report.openHandle(for: .extended)
        report.holdChanges(of: handle)
        let labels = (0..<100).map { _ in String(repeating: "l", count: ReportContent.textMaxBytes) }
        var kept = 0
        for _ in 0..<10 {
            do {
                try handle.setLabels(labels)
                kept += 1
            } catch {
                #expect(error == .dropped)
            }
        }
        // Each call holds 6.25 MB: two fit in 16 MB, the third does not.
        #expect(kept == 2)
        report.complete(handle)
        #expect(report.bundle().content.labels.count == 100)
    }
}
