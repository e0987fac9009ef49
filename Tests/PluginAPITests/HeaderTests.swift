import Foundation
import HostTestSupport
import Testing

/// The ABI headers compile cleanly as C11 and C++17 with every warning an error, and a
/// plugin built with a version script exports only `rh_plugin_entry`.
@Suite struct HeaderTests {
    static let includer = """
        #include <reporthost/plugin.h>
        #include <reporthost/plugin.h> /* #pragma once */

        /* The fixed constants and layout, checked where the plugin author sees them. */
        _Static_assert(RH_ABI_VERSION_MAJOR == 1 && RH_ABI_VERSION_MINOR == 1, "version 1.1");
        _Static_assert(RH_ATTACHMENT_MAX_BYTES == 3u * 1024u * 1024u, "3 MB");
        _Static_assert(RH_ATTACHMENTS_PER_SOURCE == 3, "three per source");
        _Static_assert(RH_ERR_DROPPED == -6 && RH_TRIGGER_ABNORMAL_EXIT == 6 && RH_LOG_ERROR == 3, "constants");
        _Static_assert(sizeof(rh_attachment) == 4 * sizeof(void *), "rh_attachment is frozen");

        static void on_before(void *context, rh_report *r, bool is_terminating, rh_completion completion) {
            (void)context; (void)r; (void)is_terminating; completion();
        }
        static rh_handler handler = {RH_ABI_VERSION_MAJOR, RH_ABI_VERSION_MINOR, sizeof(rh_handler), "header-test",
                                     NULL, NULL, on_before, NULL, NULL, NULL};
        const rh_handler *rh_plugin_entry(const rh_host_api *host) { (void)host; return &handler; }

        """

    func compile(_ compiler: String, standard: String, fileExtension: String) throws {
        let folder = makeTemporaryDirectory("header-test")
        var source = Self.includer
        if fileExtension == "cpp" { source = source.replacingOccurrences(of: "_Static_assert", with: "static_assert") }
        let file = folder.appendingPathComponent("includer.\(fileExtension)")
        try source.write(to: file, atomically: true, encoding: .utf8)
        try Fixtures.compile(
            ["-std=\(standard)", "-Wall", "-Wextra", "-pedantic", "-Werror", "-I", Products.pluginAPIInclude.path, "-c", file.path,
             "-o", folder.appendingPathComponent("out.o").path],
            compiler: compiler)
    }

    @Test("ABI: the headers compile as C11 with -Wall -Wextra -pedantic -Werror")
    func c11() throws { try compile("cc", standard: "c11", fileExtension: "c") }

    @Test("ABI: the headers compile as C++17 with -Wall -Wextra -pedantic -Werror")
    func cxx17() throws { try compile("c++", standard: "c++17", fileExtension: "cpp") }

    @Test("ABI: the compile test fails on a warning (a header that warns would be caught)")
    func compileTestCanFail() throws {
        let folder = makeTemporaryDirectory("header-test")
        let file = folder.appendingPathComponent("warns.c")
        try "#include <reporthost/plugin.h>\nint f(int unused) { return 0; }\n".write(to: file, atomically: true, encoding: .utf8)
        #expect(throws: Fixtures.CompileError.self) {
            try Fixtures.compile(["-std=c11", "-Wall", "-Wextra", "-pedantic", "-Werror", "-I", Products.pluginAPIInclude.path,
                                  "-c", file.path, "-o", folder.appendingPathComponent("w.o").path])
        }
    }

    @Test("ABI: every function pointer in the headers carries a thread tag")
    func threadTags() throws {
        let folder = Products.pluginAPIInclude.appendingPathComponent("reporthost")
        for name in ["host.h", "handler.h"] {
            let text = try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)
            // Each member declared as "(*name)(" must have a tag in the comment block before it
            // or on its line.
            let lines = text.components(separatedBy: "\n")
            for (index, line) in lines.enumerated() where line.contains("(*") && !line.contains("typedef") {
                let window = lines[max(0, index - 6)...index].joined(separator: "\n")
                let tagged = ["[any-thread]", "[handle-open]", "[main-thread]", "[background]"].contains { window.contains($0) }
                #expect(tagged, "no thread tag near \(name):\(index + 1): \(line)")
            }
        }
    }
}
