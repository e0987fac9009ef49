import Conformance
import Foundation
import HostSupport
import HostTestSupport
import Testing

/// `check`'s entry-time on a busy machine: what it counts is the plugin's own doing.
@Suite struct EntryTimeTests {
    @Test("I-8: entry-time does not count the time loading waits for a processor: an entry that works 60 ms passes on a processor three spinning programs share")
    func entryTimeOnABusyProcessor() async throws {
        // 60 ms of the entry thread's own processor time, however long that takes on the clock.
        let library = try Fixtures.plugin(
            "check-busy-entry",
            source: """
                #include <reporthost/plugin.h>
                #include <time.h>
                static rh_handler handler = {RH_ABI_VERSION_MAJOR, RH_ABI_VERSION_MINOR, sizeof(rh_handler), "busy-entry", NULL, NULL, NULL, NULL, NULL, NULL};
                static double used_ms(void) {
                    struct timespec t;
                    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
                    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
                }
                const rh_handler *rh_plugin_entry(const rh_host_api *h) {
                    (void)h;
                    double start = used_ms();
                    while (used_ms() - start < 60) {}
                    return &handler;
                }
                """).path
        // The first processor a child of this process may run on (a cpuset may not hold 0).
        let status = try ChildProcess.run("/bin/cat", ["/proc/self/status"]).stdout
        let allowed = status.split(separator: "\n").first { $0.hasPrefix("Cpus_allowed_list:") }?.split(separator: "\t").last
        let processor = String(allowed?.prefix { $0.isNumber } ?? "0")
        let spinners = (0..<3).compactMap { _ in
            try? Subprocess.spawn(["/usr/bin/taskset", "-c", processor, "sh", "-c", "while :; do :; done"]).get()
        }
        defer {
            for spinner in spinners {
                kill(spinner.pid, SIGKILL)
                _ = spinner.wait()
            }
        }
        try #require(spinners.count == 3, "taskset (util-linux) starts the spinners")
        let result = try await offPool {
            try ChildProcess.run("/usr/bin/taskset", ["-c", processor, Products.reporthost.path, "check", library, "--include", "entry-time", "--json"])
        }
        let json = try JSONValue.parse(result.stdout)
        let entry = try #require((json["results"]?.arrayValue ?? []).compactMap(CheckResult.init(json:)).first { $0.check == "entry-time" })
        #expect(entry.status == .passed, "\(entry.details)")
        #expect(entry.details.contains("waiting for a processor"), "the wait is measured and said: \(entry.details)")
    }
}
