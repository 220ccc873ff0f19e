//! A request target a path rule lets through is one every server reads
//! as the path the rule matched (`vetto::proxy::fuzzing::rule_target`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    vetto::proxy::fuzzing::rule_target(data);
});
