//! vetto's integration tests: ONE test binary (ripgrep/codex style).
//!
//! Every test that runs a sandbox runs it for real, as an unprivileged user
//! (see `util`), and proves each protection with evidence: the attack
//! succeeds bare and fails inside `vetto run`, at `--tier fs-only` and
//! `--tier full`.

// tests/util drops to an unprivileged Unix user and reads Unix exit
// statuses: these tests run on Unix (Windows: the unit tests).
#![cfg(unix)]
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a failed unwrap is a failed test, with its location"
)]

mod util;

// The attacks, controls, FULL-tier and supervisor tests run real
// sandboxes on the Linux backend's kernel interfaces; the policy tests
// run everywhere.
#[cfg(target_os = "linux")]
mod attacks;
#[cfg(target_os = "linux")]
mod controls;
#[cfg(target_os = "linux")]
mod full;
mod guidance;
mod policy_cli;
#[cfg(target_os = "linux")]
mod supervisor;
