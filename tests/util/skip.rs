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

/// `Some(reason)` when `tool` is not on `PATH` (as `command -v` finds it).
///
/// The `VETTO_TEST_REQUIRE` names of host tools and facts the tests need
/// beyond the kernel features (`util::Feature`): a test that lacks one
/// SKIPs, unless the list (or `all`) names it, then it fails. CI (.ci/run)
/// pins those it installs (`registry`, `go`, `tmux`).
///
/// | name | what | tests |
/// |---|---|---|
/// | `registry` | the package registries the tools are configured for, reachable | controls::toolchains |
/// | `go` | the Go toolchain (`go` on `PATH`) | controls::go, attacks::cache_poison |
/// | `pip` | `python3 -m pip` runs (pip for the system's Python) | controls::toolchains::a_changed_pip_conf_index_is_discovered_again |
/// | `tmux` | a terminal multiplexer to drive an interactive agent | controls::agent |
/// | `docker` | the docker CLI (its client only; no engine is used) | attacks::npmrc_exfil |
/// | `java` | a JDK (`java`, `keytool`) | attacks::secret_injection |
/// | `tiocsti` | the host lets unsandboxed processes `TIOCSTI` (`dev.tty.legacy_tiocsti = 1`) | controls::agent |
/// | `ipv6` | an IPv6 loopback (`[::1]` binds) | attacks::egress |
/// | `vsock` | a vsock that reaches a hypervisor's host bare (a VM runner) | attacks::vsock |
/// | `host-address` | a non-loopback address of the host (a destination outside FULL's namespace) | attacks::egress |
/// | `resolv-conf` | `/etc/resolv.conf` is a file (or a link naming 127.0.0.53), which FULL replaces with its DNS stub's | guidance::a_refused_lookup_with_the_network_off_names_the_host |
#[allow(
    dead_code,
    reason = "other test binaries include this file for `say` alone"
)]
pub fn tool_missing(tool: &str) -> Option<String> {
    let found = std::process::Command::new("sh")
        .args(["-c", "command -v \"$1\" >/dev/null", "sh", tool])
        .status()
        .is_ok_and(|s| s.success());
    (!found).then(|| format!("{tool} is not installed"))
}
