import Foundation
import Host
import HostPlugins
import HostSupport
import HostTestSupport
import PluginAPI
import Testing

/// SPEC T-3, ABI 1.1: each slot's `plugins.options` through `options_json`, and a plugin's own
/// folder through `data_folder`, read by real C plugins.
@Suite struct PluginOptionsTests {
    /// A handler named `name` that writes what the two 1.1 getters say into attributes: the
    /// options, the folder, `data_folder`'s status while its entry ran, and a file it wrote in
    /// its folder.
    static func reader(_ name: String) -> String {
        fixtureHandler(
            name: name, before: "on_before",
            extra: """
                static int entry_folder_status = 99;
                static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                    (void)c; (void)t;
                    char options[256], folder[1024], status[16];
                    size_t length = 0;
                    if (host->options_json(options, sizeof options, &length) == RH_OK) host->set_attribute(r, "\(name).options", options);
                    if (host->data_folder(folder, sizeof folder, &length) == RH_OK) {
                        host->set_attribute(r, "\(name).folder", folder);
                        char path[1100];
                        snprintf(path, sizeof path, "%s/key", folder);
                        FILE *file = fopen(path, "w");
                        if (file) { fputs("secret", file); fclose(file); host->set_attribute(r, "\(name).wrote", "yes"); }
                    }
                    snprintf(status, sizeof status, "%d", entry_folder_status);
                    host->set_attribute(r, "\(name).entry_folder_status", status);
                    done();
                }
                """
        ).replacingOccurrences(of: "    host = h;\n", with: "    host = h;\n    { char b[8]; size_t n; entry_folder_status = h->data_folder(b, sizeof b, &n); }\n")
    }

    func host(options: [PluginSlot: JSONValue]) throws -> (ReportHost, URL) {
        let repository = makeTemporaryDirectory("reporthost-options")
        let host = try TestHost.make { configuration in
            configuration.repository = repository.path
            configuration.pluginOptions = options
        }
        // Fresh copies: each test's plugins keep their own table (a shared image has one `host`).
        let wrapper = try Fixtures.freshCopy(of: Fixtures.plugin("opt-wrapper", source: Self.reader("opt-wrapper")))
        let handler = try Fixtures.freshCopy(of: Fixtures.plugin("opt-handler", source: Self.reader("opt-handler")))
        try host.loadPlugin(at: wrapper.path, into: .wrapper)
        try host.loadPlugin(at: handler.path, into: .handler)
        return (host, repository)
    }

    @Test("T-3: each plugin reads its own slot's options as JSON text, {} when its slot has none")
    func optionsBySlot() throws {
        let (host, _) = try host(options: [.handler: try JSONValue.parse(Data(#"{"method": "hash", "disable": ["phone"]}"#.utf8))])
        let attributes = try host.raiseDocument(ReportRequest(trigger: .logError)).content.attributes
        #expect(try JSONValue.parse(Data((attributes["opt-handler.options"] ?? "").utf8))["method"]?.stringValue == "hash")
        #expect(attributes["opt-wrapper.options"] == "{}")
    }

    @Test("T-3: data_folder is <repository>/plugins/<name>, 0700, made on first use; not known while the entry runs")
    func dataFolder() throws {
        let (host, repository) = try host(options: [:])
        let attributes = try host.raiseDocument(ReportRequest(trigger: .logError)).content.attributes
        let folder = repository.appendingPathComponent("plugins/opt-handler").path
        #expect(attributes["opt-handler.folder"] == folder)
        #expect(attributes["opt-wrapper.folder"] == repository.appendingPathComponent("plugins/opt-wrapper").path)
        #expect(attributes["opt-handler.wrote"] == "yes")
        #expect(try String(contentsOfFile: folder + "/key", encoding: .utf8) == "secret")
        var info = stat()
        #expect(stat(folder, &info) == 0 && info.st_mode & 0o777 == 0o700)
        #expect(attributes["opt-handler.entry_folder_status"] == String(RH_ERR_NOT_FOUND))
    }

    @Test("T-3: a plugin name that is not a plain file name gets a folder of its own inside plugins/, never outside it")
    func unusualNames() {
        let repository = makeTemporaryDirectory("reporthost-names").path
        let dotted = PluginDataFolder.make(repository: repository, plugin: "..")
        let slashed = PluginDataFolder.make(repository: repository, plugin: "a/../../b")
        let similar = PluginDataFolder.make(repository: repository, plugin: "a_.._.._b")
        for folder in [dotted, slashed] {
            #expect(folder?.hasPrefix(repository + "/plugins/") == true && folder?.dropFirst(repository.count + 9).contains("/") == false, "\(folder ?? "nil")")
        }
        #expect(slashed != similar)
    }

    @Test("T-3 getter rules: a short buffer is RH_ERR_TRUNCATED with the length; the table's struct_size covers 1.1")
    func getterRules() throws {
        let (host, _) = try host(options: [.handler: .object([("k", .string("value"))])])
        let table = host.hostAPI(for: .handler).pointee
        #expect(Int(table.abi_minor) == 1)
        #expect(Int(table.struct_size) >= MemoryLayout<rh_host_api>.offset(of: \.data_folder)! + MemoryLayout<UnsafeRawPointer>.size)
        var length = 0
        var small = [CChar](repeating: 0, count: 4)
        #expect(table.options_json(&small, small.count, &length) == RH_ERR_TRUNCATED)
        #expect(length == #"{"k":"value"}"#.utf8.count)
        #expect(String(decoding: small.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) == #"{"k"#)
        #expect(table.options_json(nil, 0, &length) == RH_ERR_TRUNCATED)
    }

    @Test("T-3: a plugin built for ABI 1.0 still loads and runs")
    func minorZeroLoads() throws {
        let old = fixtureHandler(
            name: "abi-1-0", before: "on_before",
            extra: """
                static void on_before(void *c, rh_report *r, bool t, rh_completion done) {
                    (void)c; (void)t; host->set_attribute(r, "old", "ran"); done();
                }
                """
        ).replacingOccurrences(of: "handler.abi_minor = RH_ABI_VERSION_MINOR;", with: "handler.abi_minor = 0;")
        #expect(old.contains("handler.abi_minor = 0;"))
        let host = try TestHost.make()
        try host.loadPlugin(at: try Fixtures.plugin("abi-1-0", source: old).path, into: .handler)
        #expect(try host.raiseDocument(ReportRequest(trigger: .logError)).content.attributes["old"] == "ran")
    }

    @Test("T-3: plugins.options must be an object of slot objects; anything else names the key")
    func configurationErrors() throws {
        for (text, key) in [
            (#"{"plugins": {"options": []}}"#, "'plugins.options'"), (#"{"plugins": {"options": {"handler": "x"}}}"#, "'plugins.options.handler'"),
            (#"{"plugins": {"options": {"helper": {}}}}"#, "'plugins.options.helper'"),
        ] {
            #expect {
                _ = try Configuration.parse(JSONValue.parse(Data(text.utf8)), origin: "c.json", baseDirectory: "/")
            } throws: { error in
                "\(error)".contains(key)
            }
        }
        let parsed = try Configuration.parse(
            JSONValue.parse(Data(#"{"plugins": {"options": {"handler": {"a": [1, 2]}}}}"#.utf8)), origin: "c.json", baseDirectory: "/")
        #expect(parsed.pluginOptions[.handler]?["a"]?.arrayValue?.count == 2)
    }
}
