//! One file per threat. Each test proves both halves with evidence: the
//! attack works bare (same user, same environment, no sandbox) and fails
//! inside `vetto run`, at every tier (`NAME::at_fs_only`, `NAME::at_full`;
//! see `at_every_tier!`). Where FULL stops an attack differently (the
//! target is absent from its view rather than refused), the test says so.

mod abstract_socket;
mod arch_bypass;
mod cache_poison;
mod daemon;
mod dangerous_syscalls;
mod discovery;
pub(crate) mod egress;
mod env_scrub;
mod fs_escape;
mod git_hooks;
mod github_env_inject;
mod home_project;
mod io_uring;
mod listeners;
mod memory_hog;
mod metadata;
mod nested_repo;
mod network;
mod npmrc_exfil;
mod output_injection;
mod policy_tamper;
mod proc_environ;
mod ptrace;
mod put_back;
mod python_setup;
mod report_links;
mod runs_later;
mod seccomp_tier;
mod secret_injection;
mod secrets;
mod signals;
mod ssh_agent;
mod symlink_escape;
mod terminals;
mod unix_allow;
mod unix_datagram;
mod userns;
mod vsock;
mod walk_cache;
