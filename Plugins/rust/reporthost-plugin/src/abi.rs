//! ABI version 1.0, transcribed from `Sources/PluginAPI/include/reporthost/*.h` (docs/reference/abi.md).
//! Member order and sizes are fixed by the ABI; a test (`PluginAPITests`, "the Rust crate's
//! ABI") compiles a C and a Rust program that print every struct's size, every member's
//! offset and every constant from the header and from this file, and diffs them. Plugins
//! use the safe types of the crate root; these are for what the safe layer does not cover
//! yet (a delegate).
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_void};

pub const RH_ABI_VERSION_MAJOR: u32 = 1;
pub const RH_ABI_VERSION_MINOR: u32 = 1;
pub const RH_OK: i32 = 0;
pub const RH_ERR_CLOSED: i32 = -1;
pub const RH_ERR_INVALID: i32 = -2;
pub const RH_ERR_NOT_FOUND: i32 = -3;
pub const RH_ERR_TRUNCATED: i32 = -4;
pub const RH_ERR_RANGE: i32 = -5;
pub const RH_ERR_DROPPED: i32 = -6;
pub const RH_LOG_DEBUG: i32 = 0;
pub const RH_LOG_INFO: i32 = 1;
pub const RH_LOG_WARN: i32 = 2;
pub const RH_LOG_ERROR: i32 = 3;
pub const RH_ATTACHMENT_MAX_BYTES: usize = 3 * 1024 * 1024;
pub const RH_ATTACHMENTS_PER_SOURCE: usize = 3;

#[repr(C)]
pub struct rh_report {
    _opaque: [u8; 0],
}

pub type rh_completion = Option<unsafe extern "C" fn()>;
pub type Getter = unsafe extern "C" fn(*mut rh_report, *mut c_char, usize, *mut usize) -> i32;
pub type Setter = unsafe extern "C" fn(*mut rh_report, *const c_char) -> i32;
pub type Visit = Option<unsafe extern "C" fn(*mut c_void, *const c_char) -> bool>;
pub type VisitPair = Option<unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char) -> bool>;
pub type VisitAttachment = Option<unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char, usize) -> bool>;
/// 1.1: one breadcrumb (index, timestamp, level, category, message).
pub type VisitBreadcrumb =
    Option<unsafe extern "C" fn(*mut c_void, usize, *const c_char, i32, *const c_char, *const c_char) -> bool>;

#[repr(C)]
pub struct rh_host_api {
    pub abi_major: u32,
    pub abi_minor: u32,
    pub struct_size: u32,
    pub host_name: *const c_char,
    pub host_version: *const c_char,
    pub report_type: unsafe extern "C" fn(*mut rh_report) -> i32,
    pub report_trigger: unsafe extern "C" fn(*mut rh_report) -> i32,
    pub report_id: Getter,
    pub summary: Getter,
    pub set_summary: Setter,
    pub description: Getter,
    pub set_description: Setter,
    pub email: Getter,
    pub set_email: Setter,
    pub severity: unsafe extern "C" fn(*mut rh_report) -> i32,
    pub set_severity: unsafe extern "C" fn(*mut rh_report, i32) -> i32,
    pub attribute: unsafe extern "C" fn(*mut rh_report, *const c_char, *mut c_char, usize, *mut usize) -> i32,
    pub set_attribute: unsafe extern "C" fn(*mut rh_report, *const c_char, *const c_char) -> i32,
    pub remove_attribute: unsafe extern "C" fn(*mut rh_report, *const c_char) -> i32,
    pub clear_attributes: unsafe extern "C" fn(*mut rh_report) -> i32,
    pub each_attribute: unsafe extern "C" fn(*mut rh_report, VisitPair, *mut c_void) -> i32,
    pub set_labels: unsafe extern "C" fn(*mut rh_report, *const *const c_char, usize) -> i32,
    pub add_label: unsafe extern "C" fn(*mut rh_report, *const c_char) -> i32,
    pub add_labels: unsafe extern "C" fn(*mut rh_report, *const *const c_char, usize) -> i32,
    pub remove_label: unsafe extern "C" fn(*mut rh_report, *const c_char) -> i32,
    pub clear_labels: unsafe extern "C" fn(*mut rh_report) -> i32,
    pub has_label: unsafe extern "C" fn(*mut rh_report, *const c_char) -> bool,
    pub each_label: unsafe extern "C" fn(*mut rh_report, Visit, *mut c_void) -> i32,
    pub add_attachment: unsafe extern "C" fn(*mut rh_report, *const c_char, *const c_char, *const c_void, usize) -> i32,
    pub attachment_data: unsafe extern "C" fn(*mut rh_report, *const c_char, *mut c_void, usize, *mut usize) -> i32,
    pub remove_attachment: unsafe extern "C" fn(*mut rh_report, *const c_char) -> i32,
    pub clear_attachments: unsafe extern "C" fn(*mut rh_report) -> i32,
    pub each_attachment: unsafe extern "C" fn(*mut rh_report, VisitAttachment, *mut c_void) -> i32,
    pub log: unsafe extern "C" fn(*mut rh_report, i32, *const c_char),
    pub set_host_attribute: unsafe extern "C" fn(*const c_char, *const c_char) -> i32,
    // 1.1 (SPEC T-3, B-1): read only when `struct_size` covers them (a 1.0 host's table ends above).
    pub options_json: Option<HostGetter>,
    pub data_folder: Option<HostGetter>,
    pub each_breadcrumb: Option<unsafe extern "C" fn(*mut rh_report, VisitBreadcrumb, *mut c_void) -> i32>,
    pub set_breadcrumb_message: Option<unsafe extern "C" fn(*mut rh_report, usize, *const c_char) -> i32>,
    pub remove_breadcrumb: Option<unsafe extern "C" fn(*mut rh_report, usize) -> i32>,
}

/// A getter with no report (`options_json`, `data_folder`).
pub type HostGetter = unsafe extern "C" fn(*mut c_char, usize, *mut usize) -> i32;

pub type Callback = Option<unsafe extern "C" fn(*mut c_void, *mut rh_report, bool, rh_completion)>;

/// An attachment a delegate offers (`handler.h`).
#[repr(C)]
pub struct rh_attachment {
    pub name: *const c_char,
    pub filename: *const c_char,
    pub data: *const c_void,
    pub size: usize,
}

/// The decision of `attachments_for_report_async`: a libffi closure owned by the host.
pub type rh_attachments_decision = Option<unsafe extern "C" fn(*const rh_attachment, usize)>;

/// The optional delegate interface (`handler.h`), used only in the delegate slot.
#[repr(C)]
pub struct rh_delegate {
    pub abi_major: u32,
    pub abi_minor: u32,
    pub struct_size: u32,
    pub add_fields_before_report_created: Option<unsafe extern "C" fn(*mut c_void, *mut rh_report)>,
    pub check_fields_after_report_created: Option<unsafe extern "C" fn(*mut c_void, *mut rh_report)>,
    pub attachments_for_report: Option<unsafe extern "C" fn(*mut c_void, *mut rh_report)>,
    pub attachments_for_report_async: Option<unsafe extern "C" fn(*mut c_void, *mut rh_report, rh_attachments_decision)>,
}

#[repr(C)]
pub struct rh_handler {
    pub abi_major: u32,
    pub abi_minor: u32,
    pub struct_size: u32,
    pub name: *const c_char,
    pub version: *const c_char,
    pub context: *mut c_void,
    pub on_before_report_created: Callback,
    pub on_after_report_created: Callback,
    pub destroy: Option<unsafe extern "C" fn(*mut c_void)>,
    pub delegate: *const rh_delegate,
}
