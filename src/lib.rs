//! vetto: a kernel sandbox for CI jobs and AI coding agents.
//!
//! Data flows one way; each stage is a module with a small typed interface:
//!
//! ```text
//! argv ─► cli ─► policy::load ─► Policy ─────────────┐
//!                host::probe ──► HostCaps ───────────┤
//!                                                    ▼
//!        plan::build(&Policy, &HostCaps, TierRequest) ─► Result<Plan, Refusal>   (pure)
//!                                                    ▼
//!        sandbox::spawn(&Plan, cmd) ── re-exec `vetto __stage` ──► setup::apply → execve
//!                                                    ▼
//!        supervisor::run (wait, signals, limits, seccomp notifications) ─► Outcome
//!                                                    ▼
//!        exit::Outcome ─► the contract's exit status
//! ```
//!
//! All operating-system specific and `unsafe` code lives under [`sandbox`]
//! (the backend that applies a plan) and [`sys`] (the OS floor beneath
//! every layer): the crate denies `unsafe` everywhere else, and clippy's
//! `undocumented_unsafe_blocks` (Cargo.toml) wants a SAFETY comment on
//! every block there.

#![deny(unsafe_code)]

pub mod cli;
pub mod events;
pub mod exit;
pub mod github;
pub mod hash;
pub mod hidden;
pub mod host;
pub mod plan;
pub mod policy;
pub mod probe;
pub mod proxy;
pub mod report;
#[allow(
    unsafe_code,
    reason = "the OS boundary: every block has its SAFETY comment"
)]
pub mod sandbox;
pub mod session;
pub mod supervisor;
#[allow(
    unsafe_code,
    reason = "the OS floor: every block has its SAFETY comment"
)]
pub mod sys;
pub mod text;
pub mod tier;
pub mod verify;
pub mod workflow_commands;
