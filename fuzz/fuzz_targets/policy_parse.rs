//! Any text given as a policy file must produce a policy or diagnostics,
//! never a panic (including while rendering `file:line:col`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Err(e) = vetto::policy::check_text(text) {
            let _ = e.to_string();
        }
    }
});
