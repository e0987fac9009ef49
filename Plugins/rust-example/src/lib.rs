//! rust-example: a report handler plugin in Rust, with no crates. It tags the report with
//! `rust.example = yes` and a `rust` label (assigned, so a second run is harmless), and
//! shows the one rule a Rust plugin must add: a panic must never unwind into the host, so
//! every function the host calls runs inside `catch_unwind`.

mod abi;

use abi::*;
use std::ffi::{c_char, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

struct Host(&'static rh_host_api);
// The host table is immutable and valid for the life of the process.
unsafe impl Send for Host {}
unsafe impl Sync for Host {}

static HOST: OnceLock<Host> = OnceLock::new();

struct Handler(rh_handler);
unsafe impl Send for Handler {}
unsafe impl Sync for Handler {}

static HANDLER: OnceLock<Handler> = OnceLock::new();

fn host() -> &'static rh_host_api {
    HOST.get().expect("rh_plugin_entry ran first").0
}

/// Runs `body`; a panic is logged to the host and swallowed.
fn guarded(report: *mut rh_report, body: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(body)).is_err() {
        if let Some(host) = HOST.get() {
            let message = b"rust-example: a callback panicked; the panic was contained\0";
            unsafe { (host.0.log)(report, RH_LOG_WARN, message.as_ptr() as *const c_char) };
        }
    }
}

unsafe extern "C" fn collect(context: *mut c_void, label: *const c_char) -> bool {
    let labels = &mut *(context as *mut Vec<CString>);
    labels.push(CStr::from_ptr(label).to_owned());
    true
}

unsafe extern "C" fn on_before(_context: *mut c_void, report: *mut rh_report, _terminating: bool, completion: rh_completion) {
    guarded(report, || unsafe {
        let host = host();
        (host.set_attribute)(report, c"rust.example".as_ptr(), c"yes".as_ptr());
        if !(host.has_label)(report, c"rust".as_ptr()) {
            let mut labels: Vec<CString> = Vec::new();
            (host.each_label)(report, Some(collect), &mut labels as *mut Vec<CString> as *mut c_void);
            labels.push(CString::from(c"rust"));
            let pointers: Vec<*const c_char> = labels.iter().map(|label| label.as_ptr()).collect();
            (host.set_labels)(report, pointers.as_ptr(), pointers.len());
        }
        if std::env::var_os("RUST_EXAMPLE_PANIC").is_some() {
            panic!("asked to panic");
        }
    });
    // Complete whatever happened above: exactly once.
    if let Some(done) = completion {
        done();
    }
}

#[no_mangle]
pub extern "C" fn rh_plugin_entry(host: *const rh_host_api) -> *const rh_handler {
    catch_unwind(|| {
        if host.is_null() {
            return std::ptr::null();
        }
        let table = unsafe { &*host };
        if table.abi_major != RH_ABI_VERSION_MAJOR {
            return std::ptr::null();
        }
        let _ = HOST.set(Host(table));
        let handler = HANDLER.get_or_init(|| {
            Handler(rh_handler {
                abi_major: RH_ABI_VERSION_MAJOR,
                abi_minor: RH_ABI_VERSION_MINOR,
                struct_size: std::mem::size_of::<rh_handler>() as u32,
                name: c"rust-example".as_ptr(),
                version: c"1.0.0".as_ptr(),
                context: std::ptr::null_mut(),
                on_before_report_created: Some(on_before),
                on_after_report_created: None,
                destroy: None,
                delegate: std::ptr::null(),
            })
        });
        &handler.0 as *const rh_handler
    })
    .unwrap_or(std::ptr::null())
}
