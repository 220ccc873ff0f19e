//! Applying a Seatbelt profile to the calling process: the one unsafe
//! module of the macOS backend. The profile and its parameters come from
//! the pure [`crate::plan::seatbelt::profile`]; nothing here decides.
//!
//! `sandbox_init_with_parameters` is libsandbox's (private but stable,
//! used by Chromium and `sandbox-exec`) entry point: it compiles the SBPL
//! text with the `(param "…")` values given beside it and applies it to
//! the calling process, irrevocably, before the stage execs the job.

use std::ffi::{CStr, CString, c_char, c_int};
use std::ptr;

use crate::plan::seatbelt::SeatbeltProfile;

unsafe extern "C" {
    fn sandbox_init_with_parameters(
        profile: *const c_char,
        flags: u64,
        parameters: *const *const c_char,
        errorbuf: *mut *mut c_char,
    ) -> c_int;
    fn sandbox_free_error(errorbuf: *mut c_char);
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    #[error("the profile or a parameter contains a NUL byte")]
    Nul,
    #[error("Seatbelt refused the profile: {0}")]
    Refused(String),
}

/// Compile and apply `profile` to this process.
pub fn apply(profile: &SeatbeltProfile) -> Result<(), ApplyError> {
    let text = CString::new(profile.text.as_bytes()).map_err(|_| ApplyError::Nul)?;
    let mut owned: Vec<CString> = Vec::with_capacity(profile.params.len() * 2);
    for (name, value) in &profile.params {
        owned.push(CString::new(name.as_bytes()).map_err(|_| ApplyError::Nul)?);
        owned.push(CString::new(value.as_slice()).map_err(|_| ApplyError::Nul)?);
    }
    // key, value, key, value, …, NULL.
    let mut argv: Vec<*const c_char> = owned.iter().map(|c| c.as_ptr()).collect();
    argv.push(ptr::null());
    let mut error: *mut c_char = ptr::null_mut();
    // SAFETY: `text` and every pointer in `argv` point to NUL-terminated
    // strings owned by `text`/`owned`, which outlive the call; `argv` ends
    // with NULL as libsandbox requires; `error` is a valid out-pointer.
    let rc = unsafe { sandbox_init_with_parameters(text.as_ptr(), 0, argv.as_ptr(), &mut error) };
    if rc == 0 {
        return Ok(());
    }
    let message = if error.is_null() {
        "no reason given".to_string()
    } else {
        // SAFETY: on failure libsandbox sets `error` to a NUL-terminated
        // string it allocated; it is read once and then freed with
        // `sandbox_free_error`, the matching deallocator, and not used after.
        unsafe {
            let m = CStr::from_ptr(error).to_string_lossy().into_owned();
            sandbox_free_error(error);
            m
        }
    };
    Err(ApplyError::Refused(message))
}
