//! Write a ReportHost report handler plugin in safe Rust, with no other crate.
//!
//! ```ignore
//! use reporthost_plugin::{Completion, Handler, Report};
//!
//! struct TeamTagger;
//!
//! impl Handler for TeamTagger {
//!     fn name(&self) -> &'static std::ffi::CStr { c"team-tagger" }
//!     fn version(&self) -> &'static std::ffi::CStr { c"1.0.0" }
//!     fn before(&self, report: &Report, _is_terminating: bool, completion: Completion) {
//!         let _ = report.set_attribute("team", "payments");
//!         if !report.has_label("triaged") {
//!             let _ = report.add_label("triaged");
//!         }
//!         completion.complete();
//!     }
//! }
//!
//! reporthost_plugin::export_plugin!(TeamTagger);
//! ```
//!
//! What the crate takes care of:
//! - `export_plugin!` exports `rh_plugin_entry`, checks the host's ABI major, and builds the
//!   descriptor (`struct_size`, versions, your name and version).
//! - A [`Report`] is valid while your callback runs; it cannot leave the callback (it is
//!   neither `Send` nor `'static`), so it cannot be used after the report is bundled.
//! - A [`Completion`] must be consumed: call [`Completion::complete`] (from any thread: it is
//!   `Send`). Dropped without it, it completes itself, so the host hears back exactly once
//!   even when your code returns early or panics.
//! - A panic never unwinds into the host: it is caught, logged to the report, and the
//!   callback completes.

pub mod abi;

use abi::*;
use std::cell::Cell;
use std::ffi::{CStr, CString, c_char, c_void};
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// One breadcrumb of a report (ABI 1.1, SPEC B-1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Breadcrumb {
    /// ISO 8601 UTC with milliseconds.
    pub timestamp: String,
    /// An `RH_LOG_*` value: 0 debug, 1 info, 2 warn, 3 error.
    pub level: i32,
    pub category: String,
    pub message: String,
}

/// Why a report function refused (the ABI's `RH_ERR_…`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The handle is closed: the callback completed, or the report is gone.
    Closed,
    /// A value the host refused (a NUL inside a string, a count past the limits).
    Invalid,
    /// No such attribute, label or attachment.
    NotFound,
    /// Severity outside 1..=5.
    Range,
    /// An attachment dropped: empty, over 3 MB, or past this callback's third.
    Dropped,
    /// A status this crate does not know.
    Other(i32),
}

impl Error {
    fn check(status: i32) -> Result<(), Error> {
        match status {
            RH_OK => Ok(()),
            RH_ERR_CLOSED => Err(Error::Closed),
            RH_ERR_INVALID => Err(Error::Invalid),
            RH_ERR_NOT_FOUND => Err(Error::NotFound),
            RH_ERR_RANGE => Err(Error::Range),
            RH_ERR_DROPPED => Err(Error::Dropped),
            other => Err(Error::Other(other)),
        }
    }
}

/// A report's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportType {
    Bug,
    Crash,
    Error,
    Unknown(i32),
}

/// What raised a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    Dialog,
    Upload,
    LogError,
    LogException,
    Crash,
    AbnormalExit,
    Unknown(i32),
}

/// How much a log line matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

/// An attachment as [`Report::attachments`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentInfo {
    pub name: String,
    pub filename: String,
    pub size: usize,
}

/// The report a callback changes. Valid only during the callback that received it.
pub struct Report<'callback> {
    raw: *mut rh_report,
    host: &'static rh_host_api,
    _callback: PhantomData<&'callback ()>,
}

impl Report<'_> {
    pub fn report_type(&self) -> ReportType {
        match unsafe { (self.host.report_type)(self.raw) } {
            1 => ReportType::Bug,
            2 => ReportType::Crash,
            3 => ReportType::Error,
            other => ReportType::Unknown(other),
        }
    }

    pub fn trigger(&self) -> Trigger {
        match unsafe { (self.host.report_trigger)(self.raw) } {
            1 => Trigger::Dialog,
            2 => Trigger::Upload,
            3 => Trigger::LogError,
            4 => Trigger::LogException,
            5 => Trigger::Crash,
            6 => Trigger::AbnormalExit,
            other => Trigger::Unknown(other),
        }
    }

    pub fn id(&self) -> Option<String> { self.read(|buf, cap, len| unsafe { (self.host.report_id)(self.raw, buf, cap, len) }) }

    pub fn summary(&self) -> Option<String> { self.read(|buf, cap, len| unsafe { (self.host.summary)(self.raw, buf, cap, len) }) }

    /// Sets the summary; `None` removes it.
    pub fn set_summary(&self, value: Option<&str>) -> Result<(), Error> { self.set(self.host.set_summary, value) }

    pub fn description(&self) -> Option<String> {
        self.read(|buf, cap, len| unsafe { (self.host.description)(self.raw, buf, cap, len) })
    }

    pub fn set_description(&self, value: Option<&str>) -> Result<(), Error> { self.set(self.host.set_description, value) }

    /// The reporter's own address (leave it alone when scrubbing: they typed it to be contacted).
    pub fn email(&self) -> Option<String> { self.read(|buf, cap, len| unsafe { (self.host.email)(self.raw, buf, cap, len) }) }

    pub fn set_email(&self, value: Option<&str>) -> Result<(), Error> { self.set(self.host.set_email, value) }

    /// 1 (low) … 5 (blocker), 0 for none.
    pub fn severity(&self) -> i32 { unsafe { (self.host.severity)(self.raw) } }

    pub fn set_severity(&self, severity: i32) -> Result<(), Error> {
        Error::check(unsafe { (self.host.set_severity)(self.raw, severity) })
    }

    pub fn attribute(&self, key: &str) -> Option<String> {
        let key = CString::new(key).ok()?;
        self.read(|buf, cap, len| unsafe { (self.host.attribute)(self.raw, key.as_ptr(), buf, cap, len) })
    }

    pub fn set_attribute(&self, key: &str, value: &str) -> Result<(), Error> {
        let (key, value) = (c_string(key)?, c_string(value)?);
        Error::check(unsafe { (self.host.set_attribute)(self.raw, key.as_ptr(), value.as_ptr()) })
    }

    pub fn remove_attribute(&self, key: &str) -> Result<(), Error> {
        let key = c_string(key)?;
        Error::check(unsafe { (self.host.remove_attribute)(self.raw, key.as_ptr()) })
    }

    /// Every attribute, in the host's order.
    pub fn attributes(&self) -> Vec<(String, String)> {
        unsafe extern "C" fn visit(context: *mut c_void, key: *const c_char, value: *const c_char) -> bool {
            let list = unsafe { &mut *(context as *mut Vec<(String, String)>) };
            list.push((text(key), text(value)));
            true
        }
        let mut list: Vec<(String, String)> = Vec::new();
        unsafe { (self.host.each_attribute)(self.raw, Some(visit), &mut list as *mut _ as *mut c_void) };
        list
    }

    /// The labels, in order.
    pub fn labels(&self) -> Vec<String> {
        unsafe extern "C" fn visit(context: *mut c_void, label: *const c_char) -> bool {
            let list = unsafe { &mut *(context as *mut Vec<String>) };
            list.push(text(label));
            true
        }
        let mut list: Vec<String> = Vec::new();
        unsafe { (self.host.each_label)(self.raw, Some(visit), &mut list as *mut _ as *mut c_void) };
        list
    }

    pub fn has_label(&self, label: &str) -> bool {
        match CString::new(label) {
            Ok(label) => unsafe { (self.host.has_label)(self.raw, label.as_ptr()) },
            Err(_) => false,
        }
    }

    /// Appends a label (even one already there: check [`Report::has_label`] first to stay
    /// idempotent). Adding keeps the labels other handlers set; [`Report::set_labels`] replaces them.
    pub fn add_label(&self, label: &str) -> Result<(), Error> {
        let label = c_string(label)?;
        Error::check(unsafe { (self.host.add_label)(self.raw, label.as_ptr()) })
    }

    /// Replaces every label, the wrapper's and the user's included.
    pub fn set_labels(&self, labels: &[&str]) -> Result<(), Error> {
        let owned = labels.iter().map(|label| c_string(label)).collect::<Result<Vec<_>, _>>()?;
        let pointers: Vec<*const c_char> = owned.iter().map(|label| label.as_ptr()).collect();
        Error::check(unsafe { (self.host.set_labels)(self.raw, pointers.as_ptr(), pointers.len()) })
    }

    pub fn remove_label(&self, label: &str) -> Result<(), Error> {
        let label = c_string(label)?;
        Error::check(unsafe { (self.host.remove_label)(self.raw, label.as_ptr()) })
    }

    pub fn attachments(&self) -> Vec<AttachmentInfo> {
        unsafe extern "C" fn visit(context: *mut c_void, name: *const c_char, filename: *const c_char, size: usize) -> bool {
            let list = unsafe { &mut *(context as *mut Vec<AttachmentInfo>) };
            list.push(AttachmentInfo { name: text(name), filename: text(filename), size });
            true
        }
        let mut list: Vec<AttachmentInfo> = Vec::new();
        unsafe { (self.host.each_attachment)(self.raw, Some(visit), &mut list as *mut _ as *mut c_void) };
        list
    }

    /// The bytes of the first attachment named `name`.
    pub fn attachment_data(&self, name: &str) -> Option<Vec<u8>> {
        let name = CString::new(name).ok()?;
        let mut size = 0usize;
        let status = unsafe { (self.host.attachment_data)(self.raw, name.as_ptr(), std::ptr::null_mut(), 0, &mut size) };
        if status != RH_OK && status != RH_ERR_TRUNCATED {
            return None;
        }
        let mut data = vec![0u8; size];
        let status = unsafe { (self.host.attachment_data)(self.raw, name.as_ptr(), data.as_mut_ptr() as *mut c_void, size, &mut size) };
        (status == RH_OK).then(|| {
            data.truncate(size);
            data
        })
    }

    /// Adds an attachment (at most 3 per callback, each at most 3 MB, none empty).
    pub fn add_attachment(&self, name: &str, filename: &str, data: &[u8]) -> Result<(), Error> {
        let (name, filename) = (c_string(name)?, c_string(filename)?);
        Error::check(unsafe {
            (self.host.add_attachment)(self.raw, name.as_ptr(), filename.as_ptr(), data.as_ptr() as *const c_void, data.len())
        })
    }

    pub fn remove_attachment(&self, name: &str) -> Result<(), Error> {
        let name = c_string(name)?;
        Error::check(unsafe { (self.host.remove_attachment)(self.raw, name.as_ptr()) })
    }

    /// A line in the report's internal log (and the host's), under the plugin's name.
    pub fn log(&self, level: LogLevel, message: &str) { log_to(self.host, self.raw, level, message) }

    /// `plugins.options.<slot>` as JSON text (ABI 1.1); `{}` when none or on a 1.0 host.
    /// The report's breadcrumbs, oldest first (ABI 1.1); empty on a 1.0 host.
    pub fn breadcrumbs(&self) -> Vec<Breadcrumb> {
        unsafe extern "C" fn visit(
            context: *mut c_void, _index: usize, timestamp: *const c_char, level: i32, category: *const c_char,
            message: *const c_char,
        ) -> bool {
            let list = unsafe { &mut *(context as *mut Vec<Breadcrumb>) };
            list.push(Breadcrumb { timestamp: text(timestamp), level, category: text(category), message: text(message) });
            true
        }
        let mut list: Vec<Breadcrumb> = Vec::new();
        if holds(self.host, std::mem::offset_of!(rh_host_api, each_breadcrumb)) {
            if let Some(each) = self.host.each_breadcrumb {
                unsafe { each(self.raw, Some(visit), &mut list as *mut _ as *mut c_void) };
            }
        }
        list
    }

    /// Replaces the message of the breadcrumb at `index` (ABI 1.1); `NotFound` past the last
    /// one, and on a 1.0 host.
    pub fn set_breadcrumb_message(&self, index: usize, message: &str) -> Result<(), Error> {
        let message = c_string(message)?;
        match self.host.set_breadcrumb_message {
            Some(set) if holds(self.host, std::mem::offset_of!(rh_host_api, set_breadcrumb_message)) => {
                Error::check(unsafe { set(self.raw, index, message.as_ptr()) })
            }
            _ => Err(Error::NotFound),
        }
    }

    /// Removes the breadcrumb at `index`; later ones move down (ABI 1.1).
    pub fn remove_breadcrumb(&self, index: usize) -> Result<(), Error> {
        match self.host.remove_breadcrumb {
            Some(remove) if holds(self.host, std::mem::offset_of!(rh_host_api, remove_breadcrumb)) => {
                Error::check(unsafe { remove(self.raw, index) })
            }
            _ => Err(Error::NotFound),
        }
    }

    pub fn options_json(&self) -> String {
        let covered = holds(self.host, std::mem::offset_of!(rh_host_api, options_json));
        covered.then(|| read_host(self.host.options_json)).flatten().unwrap_or_else(|| "{}".to_string())
    }

    /// The plugin's own folder in the repository (ABI 1.1); None on a 1.0 host.
    pub fn data_folder(&self) -> Option<String> {
        let covered = holds(self.host, std::mem::offset_of!(rh_host_api, data_folder));
        covered.then(|| read_host(self.host.data_folder)).flatten()
    }

    /// A field read through the ABI's getter contract: ask for the length, then read.
    fn read(&self, get: impl Fn(*mut c_char, usize, *mut usize) -> i32) -> Option<String> { read_getter(get) }

    fn set(&self, setter: Setter, value: Option<&str>) -> Result<(), Error> {
        let value = value.map(c_string).transpose()?;
        Error::check(unsafe { setter(self.raw, value.as_ref().map_or(std::ptr::null(), |value| value.as_ptr())) })
    }
}

/// Whether the host's table is large enough to hold the member at `offset` (a 1.0 host's
/// table ends before the 1.1 members: they are read only after this says so).
fn holds(host: &rh_host_api, offset: usize) -> bool { host.struct_size as usize >= offset + std::mem::size_of::<usize>() }

/// Reads a getter with no report (`options_json`, `data_folder`).
fn read_host(getter: Option<HostGetter>) -> Option<String> {
    let getter = getter?;
    read_getter(|buf, cap, len| unsafe { getter(buf, cap, len) })
}

/// A string read through the ABI's getter contract: ask for the length, then read.
fn read_getter(get: impl Fn(*mut c_char, usize, *mut usize) -> i32) -> Option<String> {
    let mut length = 0usize;
    match get(std::ptr::null_mut(), 0, &mut length) {
        RH_OK | RH_ERR_TRUNCATED => {}
        _ => return None,
    }
    let mut buffer = vec![0u8; length + 1];
    if get(buffer.as_mut_ptr() as *mut c_char, buffer.len(), &mut length) != RH_OK {
        return None;
    }
    buffer.truncate(length);
    Some(String::from_utf8_lossy(&buffer).into_owned())
}

fn c_string(text: &str) -> Result<CString, Error> { CString::new(text).map_err(|_| Error::Invalid) }

fn text(pointer: *const c_char) -> String {
    if pointer.is_null() {
        return String::new();
    }
    unsafe { CStr::from_ptr(pointer) }.to_string_lossy().into_owned()
}

fn log_to(host: &rh_host_api, report: *mut rh_report, level: LogLevel, message: &str) {
    let level = match level {
        LogLevel::Debug => RH_LOG_DEBUG,
        LogLevel::Info => RH_LOG_INFO,
        LogLevel::Warn => RH_LOG_WARN,
        LogLevel::Error => RH_LOG_ERROR,
    };
    let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
    unsafe { (host.log)(report, level, message.as_ptr()) };
}

/// Tells the host a callback is done. Consume it with [`Completion::complete`], from any
/// thread; dropped without that, it completes itself (exactly once either way).
#[must_use = "a callback must complete: call completion.complete()"]
pub struct Completion {
    done: Arc<Mutex<rh_completion>>,
    /// Set when it was dropped while unwinding inside `dispatch`, which then completes it
    /// whether the panic reaches it or the plugin caught it on the way.
    left_to_dispatch: Arc<AtomicBool>,
}

impl Completion {
    pub fn complete(self) { fire(&self.done) }
}

impl Drop for Completion {
    fn drop(&mut self) {
        // Unwinding out of a callback: `dispatch` logs the panic to the report first, then
        // completes (the report's handle closes at completion).
        if std::thread::panicking() && DISPATCHING.with(Cell::get) {
            self.left_to_dispatch.store(true, Ordering::SeqCst);
            return;
        }
        fire(&self.done)
    }
}

/// Calls the host's completion unless it was called already.
fn fire(done: &Mutex<rh_completion>) {
    let taken = done.lock().map(|mut done| done.take()).unwrap_or(None);
    if let Some(done) = taken {
        unsafe { done() };
    }
}

thread_local! {
    /// Whether this thread is inside `dispatch` (a callback the host is running).
    static DISPATCHING: Cell<bool> = const { Cell::new(false) };
}

/// A report handler: both callbacks are optional (the defaults complete at once).
pub trait Handler: Send + Sync + 'static {
    /// At most 64 printable characters.
    fn name(&self) -> &'static CStr;
    fn version(&self) -> &'static CStr;

    /// Runs before the report is created (the wrapper's first, then the handler's).
    fn before(&self, report: &Report, is_terminating: bool, completion: Completion) {
        let _ = (report, is_terminating);
        completion.complete();
    }

    /// Runs after the report is created.
    fn after(&self, report: &Report, is_terminating: bool, completion: Completion) {
        let _ = (report, is_terminating);
        completion.complete();
    }
}

/// The plugin this library exports: one per library (each `cdylib` links its own copy of
/// this crate, so its own statics).
struct Registered {
    host: &'static rh_host_api,
    handler: Box<dyn Handler>,
    descriptor: rh_handler,
}

// The host table and the descriptor are immutable once made, and valid for the process's life.
unsafe impl Send for Registered {}
unsafe impl Sync for Registered {}

static REGISTERED: OnceLock<Registered> = OnceLock::new();

/// What `export_plugin!` calls: checks the host, registers `make()`'s handler once, and
/// returns its descriptor (NULL for a host of another ABI major, or on a panic).
pub fn entry<H: Handler>(host: *const rh_host_api, make: impl FnOnce() -> H) -> *const rh_handler {
    catch_unwind(AssertUnwindSafe(|| {
        if host.is_null() {
            return std::ptr::null();
        }
        let table: &'static rh_host_api = unsafe { &*host };
        if table.abi_major != RH_ABI_VERSION_MAJOR {
            return std::ptr::null();
        }
        let registered = REGISTERED.get_or_init(|| {
            let handler = make();
            let descriptor = rh_handler {
                abi_major: RH_ABI_VERSION_MAJOR,
                abi_minor: RH_ABI_VERSION_MINOR,
                struct_size: std::mem::size_of::<rh_handler>() as u32,
                name: handler.name().as_ptr(),
                version: handler.version().as_ptr(),
                context: std::ptr::null_mut(),
                on_before_report_created: Some(on_before),
                on_after_report_created: Some(on_after),
                destroy: None,
                delegate: std::ptr::null(),
            };
            Registered { host: table, handler: Box::new(handler), descriptor }
        });
        &registered.descriptor as *const rh_handler
    }))
    .unwrap_or(std::ptr::null())
}

unsafe extern "C" fn on_before(_context: *mut c_void, report: *mut rh_report, is_terminating: bool, done: rh_completion) {
    dispatch(report, done, |handler, report, completion| handler.before(report, is_terminating, completion));
}

unsafe extern "C" fn on_after(_context: *mut c_void, report: *mut rh_report, is_terminating: bool, done: rh_completion) {
    dispatch(report, done, |handler, report, completion| handler.after(report, is_terminating, completion));
}

/// Runs a callback with a safe report and completion; a panic is caught and logged, and the
/// completion (dropped while unwinding) completes.
fn dispatch(raw: *mut rh_report, done: rh_completion, call: impl FnOnce(&dyn Handler, &Report, Completion)) {
    let done = Arc::new(Mutex::new(done));
    let Some(registered) = REGISTERED.get() else {
        fire(&done);
        return;
    };
    let report = Report { raw, host: registered.host, _callback: PhantomData };
    let left_to_dispatch = Arc::new(AtomicBool::new(false));
    let completion = Completion { done: done.clone(), left_to_dispatch: left_to_dispatch.clone() };
    let outer = DISPATCHING.with(|flag| flag.replace(true));
    let result = catch_unwind(AssertUnwindSafe(|| call(registered.handler.as_ref(), &report, completion)));
    DISPATCHING.with(|flag| flag.set(outer));
    if result.is_err() {
        log_to(registered.host, raw, LogLevel::Warn, "a callback panicked; the panic was contained");
        fire(&done);
    } else if left_to_dispatch.load(Ordering::SeqCst) {
        // Dropped by a panic the plugin caught itself: the callback returned, so complete now.
        fire(&done);
    }
}

/// Exports `rh_plugin_entry` for a handler: `export_plugin!(MyHandler)` or
/// `export_plugin!(MyHandler::new())`.
#[macro_export]
macro_rules! export_plugin {
    ($handler:expr) => {
        #[unsafe(no_mangle)]
        pub extern "C" fn rh_plugin_entry(
            host: *const $crate::abi::rh_host_api,
        ) -> *const $crate::abi::rh_handler {
            $crate::entry(host, || $handler)
        }
    };
}
