import Foundation
import Host
import HostSupport
import HostTestSupport
import Testing

/// The Rust SDK (`Plugins/rust/reporthost-plugin`) as a plugin author uses it: a real crate
/// built with cargo (offline) on the SDK, loaded by the real `reporthost`.
@Suite struct RustSDKTests {
    static let sdk = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Plugins/rust/reporthost-plugin")

    /// A handler that moves its completion into a closure which panics, and catches that panic
    /// itself: the completion is dropped while unwinding, and the callback then returns.
    static let catcher = """
        use reporthost_plugin::{Completion, Handler, Report};
        use std::ffi::CStr;
        use std::panic::{catch_unwind, AssertUnwindSafe};

        struct Catcher;

        impl Handler for Catcher {
            fn name(&self) -> &'static CStr { c"catcher" }
            fn version(&self) -> &'static CStr { c"1.0.0" }
            fn before(&self, report: &Report, _is_terminating: bool, completion: Completion) {
                let _ = catch_unwind(AssertUnwindSafe(move || {
                    let _held = completion;
                    panic!("caught by the plugin itself");
                }));
                let _ = report.set_attribute("caught", "yes");
            }
        }

        reporthost_plugin::export_plugin!(Catcher);
        """

    @Test("ABI: a Rust Completion dropped in a panic the plugin catches itself completes when the callback returns, not at the time limit")
    func completionDroppedInACaughtPanic() async throws {
        try await offPool {
            let crate = makeTemporaryDirectory("rust-catcher")
            try FileManager.default.createDirectory(at: crate.appendingPathComponent("src"), withIntermediateDirectories: true)
            try """
                [package]
                name = "catcher"
                version = "1.0.0"
                edition = "2024"

                [lib]
                crate-type = ["cdylib"]

                [dependencies]
                reporthost-plugin = { path = "\(Self.sdk.path)" }
                """.write(to: crate.appendingPathComponent("Cargo.toml"), atomically: true, encoding: .utf8)
            try Self.catcher.write(to: crate.appendingPathComponent("src/lib.rs"), atomically: true, encoding: .utf8)
            let build = try ChildProcess.run(
                "/usr/bin/env", ["cargo", "build", "--offline", "--quiet"], environment: ["CARGO_TARGET_DIR": crate.appendingPathComponent("target").path],
                directory: crate)
            try #require(build.status == 0, "cargo: \(build.stderr)")
            let plugin = crate.appendingPathComponent("target/debug/libcatcher.so")
            let config = crate.appendingPathComponent("c.json")
            // A limit long enough that waiting for it would show, short enough to bound the test.
            try #"{"limits": {"callbackTimeoutMs": 20000}}"#.write(to: config, atomically: true, encoding: .utf8)
            let result = try ChildProcess.reporthost(["report", "error", "--handler", plugin.path, "--config", config.path, "--print"])
            #expect(result.status == 0, "\(result.stderr)")
            let document = try JSONValue.parse(result.stdout)
            #expect(document["attributes"]?["caught"] == .string("yes"))
            let notes = document["internal_log"]?.arrayValue?.compactMap { $0["message"]?.stringValue } ?? []
            #expect(!notes.contains { $0.contains("did not complete") }, "it waited for the limit: \(notes)")
            #expect(!result.stderr.contains("is still running after"), "\(result.stderr)")
        }
    }
}
