//! `SKIP <test>: <reason>` lines, visible without `--nocapture`.
//!
//! libtest captures what a passing test prints through `print!`/`eprint!`
//! (the std macros consult the thread's output capture), so a skip said with
//! `eprintln!` vanishes from `cargo test`'s output and a skipped test looks
//! like a pass. A write straight to the process's stderr handle goes around
//! the capture: the line reaches the terminal or the CI log whatever the
//! test's outcome. (The test `skip_lines_are_visible_without_nocapture` in
//! `util` shows both.)

#![allow(
    dead_code,
    reason = "every test binary and the library's probe tests include this file; each uses part of it"
)]

use std::io::Write;

/// Whether `VETTO_TEST_REQUIRE` lists `name`: a test that lacks it must
/// fail rather than SKIP.
pub fn listed(name: &str) -> bool {
    std::env::var("VETTO_TEST_REQUIRE").is_ok_and(|list| listed_in(&list, name))
}

/// The one reading of `VETTO_TEST_REQUIRE`, for every test binary:
/// names separated by commas, blanks around them and empty entries
/// ignored. `all` lists every name; `landlock-abi>=N` lists `landlock`
/// and each `landlock-abi>=M` with M ≤ N; `seccomp-notify` lists
/// `seccomp` (notification is a filter's). Names are compared exactly.
pub fn listed_in(list: &str, name: &str) -> bool {
    items(list).any(|item| {
        item == "all"
            || item == name
            || (name == "seccomp" && item == "seccomp-notify")
            || landlock_abi(item).is_some_and(|promised| match name {
                "landlock" => promised >= 1,
                _ => landlock_abi(name).is_some_and(|wanted| promised >= wanted),
            })
    })
}

/// The highest Landlock ABI `VETTO_TEST_REQUIRE` promises (`all`: 1, that
/// Landlock is there at all); `None`: none.
pub fn listed_landlock_abi() -> Option<u8> {
    let list = std::env::var("VETTO_TEST_REQUIRE").unwrap_or_default();
    let named = items(&list).filter_map(landlock_abi).max();
    named.or_else(|| items(&list).any(|i| i == "all").then_some(1))
}

fn items(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').map(str::trim).filter(|i| !i.is_empty())
}

fn landlock_abi(item: &str) -> Option<u8> {
    item.strip_prefix("landlock-abi>=")?.parse().ok()
}

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
pub fn tool_missing(tool: &str) -> Option<String> {
    let found = std::process::Command::new("sh")
        .args(["-c", "command -v \"$1\" >/dev/null", "sh", tool])
        .status()
        .is_ok_and(|s| s.success());
    (!found).then(|| format!("{tool} is not installed"))
}
