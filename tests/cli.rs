//! vetto's integration tests: ONE test binary (ripgrep/codex style).
//!
//! Every test that runs a sandbox runs it for real, as an unprivileged user
//! (see `util`), and proves each protection with evidence: the attack
//! succeeds bare and fails inside `vetto run`, at `--tier fs-only` and
//! `--tier full`.

#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a failed unwrap is a failed test, with its location"
)]

mod util;

mod attacks;
mod controls;
mod full;
mod guidance;
mod policy_cli;
mod supervisor;
