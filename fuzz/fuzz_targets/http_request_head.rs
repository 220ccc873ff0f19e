//! A request head the proxy lets through to a secret's host reaches the
//! server as the request the rules allowed, with the value in a credential
//! header only; no response head the job is passed holds the value
//! (`vetto::proxy::fuzzing::request_head`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    vetto::proxy::fuzzing::request_head(data);
});
