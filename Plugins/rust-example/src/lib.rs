//! rust-example: a report handler plugin in Rust, on the `reporthost-plugin` crate of this
//! repository (no crates from outside). It tags the report with `rust.example = yes` and adds
//! a `rust` label (added, so the labels set before it stay; checked first, so a second run is
//! harmless), and passes its slot's options on as `rust.options` when it has any (ABI 1.1).
//! `RUST_EXAMPLE_PANIC=1` makes it panic, to show that the crate contains the
//! panic, logs it to the report and completes the callback.

use reporthost_plugin::{Completion, Handler, Report};
use std::ffi::CStr;

struct RustExample;

impl Handler for RustExample {
    fn name(&self) -> &'static CStr { c"rust-example" }
    fn version(&self) -> &'static CStr { c"1.0.0" }

    fn before(&self, report: &Report, _is_terminating: bool, completion: Completion) {
        let _ = report.set_attribute("rust.example", "yes");
        // plugins.options.<slot> (ABI 1.1), passed on as it came: what a plugin was told.
        let options = report.options_json();
        if options != "{}" {
            let _ = report.set_attribute("rust.options", &options);
        }
        if !report.has_label("rust") {
            let _ = report.add_label("rust");
        }
        if std::env::var_os("RUST_EXAMPLE_PANIC").is_some() {
            panic!("asked to panic");
        }
        completion.complete();
    }
}

reporthost_plugin::export_plugin!(RustExample);
