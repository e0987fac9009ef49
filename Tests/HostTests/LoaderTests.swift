import Foundation
import Host
import HostSupport
import HostTestSupport
import PluginAPI
import Testing

/// ABI "Loading rules": every load error is its own case, names the path and the values,
/// and is proven with a real bad library built at test time.
@Suite struct LoaderTests {
    func loadError(_ path: String, slot: PluginSlot = .handler) throws -> PluginLoadError? {
        let host = try TestHost.make()
        do {
            try host.loadPlugin(at: path, into: slot)
            return nil
        } catch {
            guard case .plugin(let loadError) = error else { return nil }
            return loadError
        }
    }

    func entry(_ body: String) -> String {
        """
        \(fixturePrelude)
        static void on_before(void *c, rh_report *r, bool t, rh_completion done) { (void)c; (void)r; (void)t; done(); }
        static rh_handler handler;
        const rh_handler *rh_plugin_entry(const rh_host_api *h) {
            host = h;
            handler.abi_major = RH_ABI_VERSION_MAJOR;
            handler.abi_minor = RH_ABI_VERSION_MINOR;
            handler.struct_size = sizeof handler;
            handler.name = "bad";
            handler.on_before_report_created = on_before;
            \(body)
            return &handler;
        }
        """
    }

    @Test("Loader: a good plugin loads, its path is made absolute, and name and version are copied")
    func goodPlugin() throws {
        let library = try Fixtures.plugin("good", source: entry(""))
        let host = try TestHost.make()
        let directory = library.deletingLastPathComponent().path
        let relative = "../" + URL(fileURLWithPath: directory).lastPathComponent + "/" + library.lastPathComponent
        #expect(Paths.absolute(relative, relativeTo: directory) == library.path)
        let plugin = try host.loadPlugin(at: Paths.absolute(relative, relativeTo: directory), into: .handler)
        #expect(plugin.path == library.path)
        #expect(plugin.name == "bad")
        #expect(host.handler(in: .handler)?.name == "bad")
    }

    @Test("Loader: a missing file is its own error naming the path")
    func missingFile() throws {
        let error = try loadError("/nonexistent/dir/plugin.so")
        #expect(error?.reason == .missingFile)
        #expect(error?.description == "plugin /nonexistent/dir/plugin.so: no such file")
    }

    @Test("Loader: a file that is not a shared object reports dlerror's text")
    func notSharedObject() throws {
        let path = try Fixtures.file("text.so", "this is not ELF\n").path
        let error = try loadError(path)
        guard case .notLoadable(let text)? = error?.reason else { Issue.record("got \(String(describing: error))"); return }
        #expect(text.contains(path) || text.contains("invalid ELF header") || text.contains("too short"))
        #expect(error?.description.hasPrefix("plugin \(path): not a loadable shared object") == true)
    }

    @Test("Loader: RTLD_NOW refuses a plugin with an unresolved symbol at load time")
    func unresolvedSymbol() throws {
        let library = try Fixtures.plugin(
            "unresolved",
            source: entry("") + "\nextern void rh_fixture_missing_symbol(void);\nvoid use_it(void) { rh_fixture_missing_symbol(); }\n")
        let error = try loadError(library.path)
        guard case .notLoadable(let text)? = error?.reason else { Issue.record("got \(String(describing: error))"); return }
        #expect(text.contains("rh_fixture_missing_symbol"))
    }

    @Test("Loader: a library without rh_plugin_entry (libm) is refused")
    func noEntry() throws {
        let libm = ["/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6", "/lib64/libm.so.6"]
            .first { FileManager.default.fileExists(atPath: $0) }
        let path = try #require(libm)
        let error = try loadError(path)
        #expect(error?.reason == .noEntry)
        #expect(error?.description.contains(path) == true)
    }

    @Test("Loader: an entry that returns NULL refuses to load")
    func entryReturnsNull() throws {
        let library = try Fixtures.plugin(
            "null-entry",
            source: """
                #include <reporthost/plugin.h>
                const rh_handler *rh_plugin_entry(const rh_host_api *h) {
                    h->log(NULL, RH_LOG_ERROR, "refusing: no licence");
                    return NULL;
                }
                """)
        #expect(try loadError(library.path)?.reason == .entryReturnedNull)
    }

    @Test("Loader: a different ABI major is refused with both numbers")
    func majorMismatch() throws {
        let library = try Fixtures.plugin("major", source: entry("handler.abi_major = 2;"))
        let error = try loadError(library.path)
        #expect(error?.reason == .abiMajorMismatch(plugin: 2, host: 1))
        #expect(error?.description == "plugin \(library.path): ABI major 2, host supports 1")
    }

    @Test("Loader: a newer ABI minor than the host's is refused")
    func newerMinor() throws {
        let library = try Fixtures.plugin("minor", source: entry("handler.abi_minor = RH_ABI_VERSION_MINOR + 1;"))
        #expect(try loadError(library.path)?.reason == .abiMinorNewer(plugin: UInt32(RH_ABI_VERSION_MINOR) + 1, host: UInt32(RH_ABI_VERSION_MINOR)))
    }

    @Test("Loader: a struct_size that does not cover the 1.0 struct is refused")
    func shortStruct() throws {
        let library = try Fixtures.plugin("short", source: entry("handler.struct_size = 16;"))
        let error = try loadError(library.path)
        guard case .structTooSmall(let name, let size, let needed)? = error?.reason else {
            Issue.record("got \(String(describing: error))")
            return
        }
        #expect(name == "rh_handler" && size == 16 && needed > 16)
    }

    @Test("Loader: an empty or missing name is refused")
    func emptyName() throws {
        let empty = try Fixtures.plugin("empty-name", source: entry("handler.name = \"\";"))
        #expect(try loadError(empty.path)?.reason == .missingName)
        let missing = try Fixtures.plugin("null-name", source: entry("handler.name = NULL;"))
        #expect(try loadError(missing.path)?.reason == .missingName)
    }

    @Test("Loader: the delegate slot needs a delegate; a bad delegate version is refused")
    func delegateSlot() throws {
        let plain = try Fixtures.plugin("no-delegate", source: entry(""))
        #expect(try loadError(plain.path, slot: .delegate)?.reason == .missingDelegate)
        let badDelegate = try Fixtures.plugin(
            "bad-delegate",
            source: entry("static rh_delegate d; d.abi_major = 7; d.struct_size = sizeof d; handler.delegate = &d;"))
        #expect(try loadError(badDelegate.path, slot: .delegate)?.reason == .abiMajorMismatch(plugin: 7, host: 1))
        // In other slots the delegate is ignored.
        #expect(try loadError(badDelegate.path, slot: .handler) == nil)
    }

    @Test("H-1: replacing or removing a plugin calls its destroy exactly once; the library stays loaded")
    func destroyOnce() throws {
        let source = fixtureHandler(
            name: "counted", destroy: "on_destroy",
            extra: """
                int rh_fixture_destroyed = 0;
                static void on_destroy(void *c) { (void)c; rh_fixture_destroyed++; }
                """)
        let library = try Fixtures.freshCopy(of: try Fixtures.plugin("destroy", source: source))
        let host = try TestHost.make()
        try host.loadPlugin(at: library.path, into: .handler)
        let image = try #require(dlopen(library.path, RTLD_NOW | RTLD_NOLOAD))
        let counter = try #require(dlsym(image, "rh_fixture_destroyed")).assumingMemoryBound(to: Int32.self)
        #expect(counter.pointee == 0)
        try host.loadPlugin(at: library.path, into: .handler)  // replaces the first instance
        #expect(counter.pointee == 1)
        host.setHandler(nil, for: .handler)
        #expect(counter.pointee == 2)
        host.stop()
        #expect(counter.pointee == 2)
        // RTLD_NODELETE: still mapped after "unloading".
        #expect(dlopen(library.path, RTLD_NOW | RTLD_NOLOAD) != nil)
    }
}
