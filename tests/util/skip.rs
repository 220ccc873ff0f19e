//! `SKIP <test>: <reason>` lines, visible without `--nocapture`.
//!
//! libtest captures what a passing test prints through `print!`/`eprint!`
//! (the std macros consult the thread's output capture), so a skip said with
//! `eprintln!` vanishes from `cargo test`'s output and a skipped test looks
//! like a pass. A write straight to the process's stderr handle goes around
//! the capture: the line reaches the terminal or the CI log whatever the
//! test's outcome. (The test `skip_lines_are_visible_without_nocapture` in
//! `util` shows both.)

use std::io::Write;

/// Say that `test` was skipped and why, on the real stderr.
pub fn say(test: &str, reason: &str) {
    let line = format!("SKIP {test}: {reason}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
