import Foundation
import Host
import HostPlugins
import HostRecovery
import HostSupport
import HostTestSupport
import PluginAPI
import Receiver
import Testing

/// The fuzzer (continued): a plugin calling every host function with hostile arguments.
extension FuzzTests {
    /// A plugin that calls every host function with random, NULL, huge, invalid UTF-8 and
    /// stale arguments, and completes twice.
    static let chaosPlugin = fixtureHandler(
        name: "chaos", before: "on_before", after: "on_after",
        extra: """
            #include <stdint.h>
            static uint64_t state;
            static rh_report *stale;
            static uint64_t next(void) {
                uint64_t z = (state += 0x9E3779B97F4A7C15ull);
                z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
                z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
                return z ^ (z >> 31);
            }
            static const char *text(void) {
                static const char *const texts[] = {"ok", "", "\\xff\\xfe bad utf-8", "\\xc3", "multi\\nline", "k=v", NULL,
                    "a very long value a very long value a very long value a very long value a very long value"};
                return texts[next() % 8];
            }
            static size_t size(void) {
                /* Within the buffer, or over the limit (never read): the host cannot check
                   a plugin's memory, only what it claims. */
                static const size_t sizes[] = {0, 1, 15, 16, (3u << 20) + 1, (size_t)1 << 40, SIZE_MAX, SIZE_MAX / 2};
                return sizes[next() % 8];
            }
            static rh_report *handle(rh_report *r) {
                switch (next() % 6) {
                case 0: return NULL;
                case 1: return stale ? stale : r;
                case 2: return (rh_report *)(uintptr_t)next();
                default: return r;
                }
            }
            static bool visit_attribute(void *c, const char *k, const char *v) { (void)c; (void)k; (void)v; return next() % 2; }
            static bool visit_label(void *c, const char *l) { (void)c; (void)l; return next() % 2; }
            static bool visit_attachment(void *c, const char *n, const char *f, size_t s) { (void)c; (void)n; (void)f; (void)s; return true; }
            static void chaos(rh_report *r) {
                static char buffer[32] = "sixteen bytes!!";
                char out[64];
                size_t length;
                const char *labels[4];
                for (int i = 0; i < 4000; i++) {
                    rh_report *h = handle(r);
                    for (int j = 0; j < 4; j++) labels[j] = text();
                    size_t capacity = next() % 2 ? sizeof out : (next() % 2 ? 0 : 1);
                    char *target = capacity ? out : (next() % 2 ? NULL : out);
                    switch (next() % 24) {
                    case 0: host->report_type(h); break;
                    case 1: host->report_trigger(h); break;
                    case 2: host->report_id(h, target, capacity, next() % 2 ? &length : NULL); break;
                    case 3: host->summary(h, target, capacity, &length); break;
                    case 4: host->set_summary(h, text()); break;
                    case 5: host->description(h, target, capacity, &length); break;
                    case 6: host->set_description(h, text()); break;
                    case 7: host->set_email(h, text()); break;
                    case 8: host->set_severity(h, (int32_t)next()); break;
                    case 9: host->attribute(h, text(), target, capacity, &length); break;
                    case 10: host->set_attribute(h, text(), text()); break;
                    case 11: host->remove_attribute(h, text()); break;
                    case 12: host->each_attribute(h, next() % 4 ? visit_attribute : NULL, NULL); break;
                    case 13: host->set_labels(h, next() % 4 ? labels : NULL, next() % 5); break;
                    case 14: host->add_label(h, text()); break;
                    case 15: host->add_labels(h, labels, next() % 5); break;
                    case 16: host->remove_label(h, text()); break;
                    case 17: host->has_label(h, text()); break;
                    case 18: host->each_label(h, next() % 4 ? visit_label : NULL, NULL); break;
                    case 19: host->add_attachment(h, text(), text(), next() % 4 ? buffer : NULL, size()); break;
                    case 20: host->attachment_data(h, text(), target, next() % 2 ? capacity : SIZE_MAX, &length); break;
                    case 21: host->remove_attachment(h, text()); break;
                    case 22: host->each_attachment(h, next() % 4 ? visit_attachment : NULL, NULL); break;
                    default: host->log(h, (rh_log_level)(next() % 6), text()); host->set_host_attribute(text(), text()); break;
                    }
                }
            }
            static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                (void)c; (void)t;
                state = (uint64_t)(uintptr_t)r;
                chaos(r);
                stale = r;  /* used after its handle closed, in the next callbacks */
                done();
                done();  /* a second completion */
            }
            static void on_after(void *c, rh_report *r, bool t, rh_completion done) {
                (void)c; (void)t;
                chaos(r);
                done();
            }
            """)

    @Test("R-9: a plugin calling every host function with random, NULL, huge, invalid UTF-8 and stale arguments never crashes the host")
    func hostTable() async throws {
        // Off the cooperative pool: child processes and long loops must not starve the
        // async handler tests of its two threads.
        try await offPool {
            let library = try Fixtures.freshCopy(of: Fixtures.plugin("chaos", source: Self.chaosPlugin))
            let host = try TestHost.make()
            try host.loadPlugin(at: library.path, into: .handler)
            for trigger in [Trigger.logError, .upload, .crash] where true {
                for _ in 0..<Self.scale {
                    let document = try host.raiseDocument(ReportRequest(trigger: trigger))
                    #expect(document.content.attachments.count <= 6)
                    #expect(document.internalLog.contains { $0.message.contains("completion called again") })
                }
            }
        }
    }
}
