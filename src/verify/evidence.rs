//! Deciding each probe's result from what is observed outside the sandbox.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::Verdict;
use super::catalogue::{Canary, Evidence, Spec, Target};
use super::exec::Captured;
use super::world::{self, World};

/// Printed by the daemon probe while its daemon runs.
const DAEMON_RUNNING: &str = "DAEMON-RUNNING";

/// The state captured before the job ran, for "unchanged" evidence.
#[derive(Debug, Default)]
pub struct Before {
    files: Vec<(Target, Option<Vec<u8>>)>,
    git: Option<GitPrint>,
}

impl Before {
    pub fn capture(world: &World, spec: &Spec, p: &Path) -> Before {
        match spec.evidence {
            Evidence::Unchanged(targets) => Before {
                files: targets
                    .iter()
                    .map(|&t| (t, fs::read(world.target_path(t, p)).ok()))
                    .collect(),
                git: None,
            },
            Evidence::GitIntact => Before {
                files: Vec::new(),
                git: Some(GitPrint::of(p)),
            },
            _ => Before::default(),
        }
    }
}

/// What identifies `P/.git` and the things in it that run code later.
#[derive(Debug, PartialEq, Eq)]
struct GitPrint {
    git_inode: Option<(u64, u64, bool)>,
    hooks_inode: Option<(u64, u64, bool)>,
    hooks: Vec<String>,
    config: Option<Vec<u8>>,
    top_level: Vec<String>,
}

impl GitPrint {
    fn of(p: &Path) -> GitPrint {
        let ino = |path: &Path| {
            fs::symlink_metadata(path)
                .ok()
                .and_then(|m| crate::sys::os::file_id(&m).map(|(dev, ino)| (dev, ino, m.is_dir())))
        };
        let names = |path: &Path| {
            let mut v: Vec<String> = fs::read_dir(path)
                .map(|rd| {
                    rd.flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            v.sort();
            v
        };
        GitPrint {
            git_inode: ino(&p.join(".git")),
            hooks_inode: ino(&p.join(".git/hooks")),
            hooks: names(&p.join(".git/hooks")),
            config: fs::read(p.join(".git/config")).ok(),
            top_level: names(p),
        }
    }

    fn differences(&self, after: &GitPrint) -> Vec<String> {
        let mut d = Vec::new();
        if self.git_inode != after.git_inode {
            d.push("P/.git was replaced".to_owned());
        }
        if self.hooks_inode != after.hooks_inode {
            d.push("P/.git/hooks was replaced".to_owned());
        }
        for h in after.hooks.iter().filter(|h| !self.hooks.contains(h)) {
            d.push(format!("P/.git/hooks/{h} appeared"));
        }
        if self.config != after.config {
            d.push("P/.git/config changed".to_owned());
        }
        for n in after
            .top_level
            .iter()
            .filter(|n| !self.top_level.contains(n))
        {
            d.push(format!("P/{n} appeared"));
        }
        d
    }
}

/// Decide the result of one probe.
pub fn judge(
    world: &World,
    spec: &Spec,
    p: &Path,
    before: &Before,
    job: &Captured,
    bare: Option<&Captured>,
    ran: bool,
) -> (Verdict, String) {
    // Evidence a job leaves even when it never ran (or was killed midway)
    // is still evidence of an escape; absence of evidence is not proof.
    let escaped = escape_evidence(world, spec, p, before, job);
    if let Some(what) = escaped {
        return (Verdict::NotContained, what);
    }
    if let Evidence::Works { stdout, files } = spec.evidence {
        return control(world, p, job, stdout, files);
    }
    if job.status.is_none() {
        return (
            Verdict::Inconclusive,
            "the job did not finish in time and was killed".to_owned(),
        );
    }
    if !ran {
        return (
            Verdict::Inconclusive,
            format!("the job did not run: {}", said(job)),
        );
    }
    match spec.evidence {
        Evidence::KernelAnswer => kernel_answer(job, bare),
        Evidence::SetuidNoGain => setuid(job, bare, &world.setuid_name()),
        Evidence::CanaryAbsent(_) => (
            Verdict::Contained,
            format!("no canary in the job's output; it saw: {}", said(job)),
        ),
        Evidence::Unchanged(_) => (
            Verdict::Contained,
            format!("unchanged afterwards; the job saw: {}", said(job)),
        ),
        Evidence::GitIntact => (
            Verdict::Contained,
            format!(
                ".git, its hooks and config are the same afterwards; the job saw: {}",
                said(job)
            ),
        ),
        Evidence::Silent(_) => (
            Verdict::Contained,
            format!(
                "the host listener received nothing; the job saw: {}",
                said(job)
            ),
        ),
        Evidence::VictimAlive => (
            Verdict::Contained,
            format!(
                "the host process is still running; the job saw: {}",
                said(job)
            ),
        ),
        Evidence::NoDaemonLeft if !job.stdout.contains(DAEMON_RUNNING) => (
            Verdict::Inconclusive,
            format!("the daemon never started: {}", said(job)),
        ),
        Evidence::NoDaemonLeft => (
            Verdict::Contained,
            "the daemon ran during the session and was gone when it ended".to_owned(),
        ),
        Evidence::HostProcessHidden => {
            // The marker line aside, the job lists at least itself.
            let seen = job
                .stdout
                .lines()
                .filter(|l| !l.trim().is_empty())
                .count()
                .saturating_sub(1);
            if seen == 0 {
                return (
                    Verdict::Inconclusive,
                    format!("the job listed no process at all: {}", said(job)),
                );
            }
            (
                Verdict::Contained,
                format!(
                    "the host process (pid {}) is not among the {seen} processes the job sees",
                    world.host_pid()
                ),
            )
        }
        Evidence::Works { .. } => control(world, p, job, "", &[]),
    }
}

/// The observable side effect of a successful attack, if any.
fn escape_evidence(
    world: &World,
    spec: &Spec,
    p: &Path,
    before: &Before,
    job: &Captured,
) -> Option<String> {
    match spec.evidence {
        Evidence::CanaryAbsent(canaries) => {
            let out = job.all();
            canaries
                .iter()
                .find(|&&c| out.contains(&world.canary(c)))
                .map(|&c| format!("the {} appeared in the job's output", canary_name(c)))
        }
        Evidence::Unchanged(_) => {
            let changed: Vec<String> = before
                .files
                .iter()
                .filter(|(t, was)| fs::read(world.target_path(*t, p)).ok() != *was)
                .map(|(t, was)| {
                    let what = if was.is_none() { "created" } else { "modified" };
                    format!("{} was {what}", target_name(*t))
                })
                .collect();
            (!changed.is_empty()).then(|| changed.join("; "))
        }
        Evidence::GitIntact => {
            let d = before.git.as_ref()?.differences(&GitPrint::of(p));
            (!d.is_empty()).then(|| d.join("; "))
        }
        Evidence::Silent(l) => {
            let n = world.received(l);
            (n > 0).then(|| format!("the host listener received {n} connection(s)/datagram(s)"))
        }
        Evidence::VictimAlive => {
            // A fatal signal is acted on when the victim next runs; give a
            // loaded machine a moment before calling it alive.
            let deadline = Instant::now() + Duration::from_millis(300);
            loop {
                match world.victim_state() {
                    Err(what) => return Some(what),
                    Ok(()) if Instant::now() >= deadline => return None,
                    Ok(()) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        }
        Evidence::NoDaemonLeft => {
            let marker = world.daemon_marker.clone();
            let argv = ["sleep", marker.as_str()];
            let deadline = Instant::now() + Duration::from_millis(500);
            let mut pids = world::pids_with_cmdline(&argv);
            while !pids.is_empty() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
                pids = world::pids_with_cmdline(&argv);
            }
            if pids.is_empty() {
                return None;
            }
            for &pid in &pids {
                let _ = crate::sandbox::verify_host::kill_process(pid);
            }
            Some(format!(
                "the daemon (pid {pids:?}) was still running after the session ended (killed by verify)"
            ))
        }
        Evidence::HostProcessHidden => {
            let needle = format!("sleep {}", world.host_marker());
            job.stdout
                .contains(&needle)
                .then(|| format!("the host process `{needle}` is listed in the job's /proc"))
        }
        Evidence::SetuidNoGain | Evidence::KernelAnswer | Evidence::Works { .. } => None,
    }
}

fn control(
    world: &World,
    p: &Path,
    job: &Captured,
    stdout: &str,
    files: &[(&str, &str)],
) -> (Verdict, String) {
    let want = world.expand(stdout, p);
    let mut problems = Vec::new();
    match job.code() {
        Some(0) => {}
        Some(c) => problems.push(format!("exit status {c}")),
        None => problems.push("killed (time limit or signal)".to_owned()),
    }
    if !job.stdout.contains(&want) {
        problems.push(format!("the output lacks `{want}`"));
    }
    for (path, content) in files {
        let path = world.expand(path, p);
        let content = world.expand(content, p);
        match fs::read_to_string(&path) {
            Ok(c) if c == content => {}
            Ok(_) => problems.push(format!("{path} has other content")),
            Err(e) => problems.push(format!("{path}: {e}")),
        }
    }
    if problems.is_empty() {
        let files_note = if files.is_empty() {
            String::new()
        } else {
            format!(", {} file(s) checked from outside", files.len())
        };
        (
            Verdict::Works,
            format!("exit 0, output as expected{files_note}"),
        )
    } else {
        (
            Verdict::Failed,
            format!("{}; the job saw: {}", problems.join("; "), said(job)),
        )
    }
}

/// The probe's own JSON line.
fn probe_json(out: &Captured) -> Option<Value> {
    out.stdout
        .lines()
        .find(|l| l.starts_with('{'))
        .and_then(|l| serde_json::from_str(l).ok())
}

fn probe_ok(v: &Value) -> bool {
    v.get("ok").and_then(Value::as_bool).unwrap_or(false)
}

fn probe_error(v: &Value) -> String {
    v.get("error")
        .and_then(Value::as_str)
        .unwrap_or("no error")
        .to_owned()
}

/// Did the attempt get past every filter to the kernel's real work? Yes
/// when it succeeded, or failed for a reason other than a refusal
/// (`EBADF`, `EFAULT`, `ENOENT` from the side-effect-free arguments the
/// probe chooses); no when refused (`EPERM`, `EACCES`, `ENOSYS`).
fn reached_kernel(v: &Value) -> bool {
    probe_ok(v) || !matches!(probe_error(v).as_str(), "EPERM" | "EACCES" | "ENOSYS")
}

fn kernel_answer(job: &Captured, bare: Option<&Captured>) -> (Verdict, String) {
    let mut unsandboxed = String::from("it works unsandboxed");
    if let Some(bare) = bare {
        match probe_json(bare) {
            Some(v) if reached_kernel(&v) => {
                if !probe_ok(&v) {
                    unsandboxed = format!("unsandboxed it reaches the kernel: {}", probe_error(&v));
                }
            }
            Some(v) => {
                return (
                    Verdict::NotApplicable,
                    format!(
                        "the host refuses it to unsandboxed processes too ({})",
                        probe_error(&v)
                    ),
                );
            }
            None => {
                return (
                    Verdict::Inconclusive,
                    format!(
                        "the unsandboxed reference run printed no result: {}",
                        said(bare)
                    ),
                );
            }
        }
    }
    match probe_json(job) {
        Some(v) if reached_kernel(&v) => (
            Verdict::NotContained,
            format!(
                "the call reached the kernel inside the sandbox ({}; kernel's answer: no side effect to observe)",
                if probe_ok(&v) {
                    "succeeded".to_owned()
                } else {
                    probe_error(&v)
                }
            ),
        ),
        Some(v) => (
            Verdict::Contained,
            format!(
                "refused with {} (kernel's answer: no side effect to observe; {unsandboxed})",
                probe_error(&v)
            ),
        ),
        None => (
            Verdict::Inconclusive,
            format!("the probe printed no result: {}", said(job)),
        ),
    }
}

/// The real and effective uid of the setuid program as the job printed
/// them (`Name:` and `Uid:` lines of its `/proc/PID/status`), or why not.
fn setuid_uids(job: &Captured, name: &str) -> Result<(u32, u32), String> {
    let observed = job
        .stdout
        .lines()
        .any(|l| l.strip_prefix("Name:").is_some_and(|n| n.trim() == name));
    if !observed {
        return Err(format!(
            "the setuid program `{name}` could not be observed running: {}",
            said(job)
        ));
    }
    let fields: Vec<u32> = job
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .map(|l| {
            l.split_whitespace()
                .filter_map(|f| f.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    match fields.as_slice() {
        [real, effective, ..] => Ok((*real, *effective)),
        _ => Err(format!("no Uid line for `{name}`: {}", said(job))),
    }
}

fn setuid(job: &Captured, bare: Option<&Captured>, name: &str) -> (Verdict, String) {
    if let Some(bare) = bare {
        match setuid_uids(bare, name) {
            Ok((real, 0)) if real != 0 => {}
            Ok((_, effective)) => {
                return (
                    Verdict::NotApplicable,
                    format!(
                        "`{name}` does not gain root unsandboxed either (effective uid {effective}; a nosuid mount?)"
                    ),
                );
            }
            Err(why) => return (Verdict::NotApplicable, format!("unsandboxed, {why}")),
        }
    }
    match setuid_uids(job, name) {
        Ok((real, 0)) if real != 0 => (
            Verdict::NotContained,
            format!("`{name}` ran with effective uid 0"),
        ),
        Ok((_, effective)) => (
            Verdict::Contained,
            format!(
                "`{name}` ran with effective uid {effective}, the caller's (it gets 0 unsandboxed)"
            ),
        ),
        Err(why) => (Verdict::NotApplicable, why),
    }
}

/// The first thing the job (not vetto) said on stderr, or its probe error.
fn said(job: &Captured) -> String {
    if let Some(v) = probe_json(job) {
        if !probe_ok(&v) {
            return probe_error(&v);
        }
    }
    let line = job
        .stderr
        .lines()
        .map(str::trim)
        // The job's own words: vetto's lines (the policy line, what it
        // withheld, its guidance) are no evidence of what the job met.
        .find(|l| !l.is_empty() && !l.starts_with("vetto:"))
        .unwrap_or("nothing");
    let mut s: String = line.chars().take(140).collect();
    if s.len() < line.len() {
        s.push('…');
    }
    s
}

fn canary_name(c: Canary) -> &'static str {
    match c {
        Canary::SshKey => "SSH key canary",
        Canary::AwsFile => "AWS credentials canary",
        Canary::NpmToken => "npm token canary",
        Canary::DotEnv => ".env canary",
        Canary::GithubToken => "GITHUB_TOKEN canary",
        Canary::AwsEnv => "AWS_SECRET_ACCESS_KEY canary",
        Canary::HostEnv => "host process's secret",
    }
}

fn target_name(t: Target) -> &'static str {
    match t {
        Target::HomeBashrc => "~/.bashrc",
        Target::OutsidePlanted => "a file outside P",
        Target::PreCommitHook => "P/.git/hooks/pre-commit",
        Target::GitConfig => "P/.git/config",
        Target::GithubEnv => "the GITHUB_ENV file",
        Target::GithubPath => "the GITHUB_PATH file",
        Target::DevShmDrop => "a file in /dev/shm (after the session)",
    }
}

// Unix exit statuses and `/tmp`.
#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    use super::*;

    fn captured(code: i32, stdout: &str, stderr: &str) -> Captured {
        Captured {
            status: Some(ExitStatus::from_raw(code << 8)),
            stdout: stdout.to_owned(),
            stderr: stderr.to_owned(),
        }
    }

    const REFUSED: &str = r#"{"action":"io-uring","ok":false,"errno":1,"error":"EPERM"}"#;
    const WORKED: &str = r#"{"action":"io-uring","ok":true,"errno":null,"error":null}"#;

    #[test]
    fn kernel_answer_is_not_applicable_when_the_host_refuses_it_to_everyone() {
        let bare = captured(1, REFUSED, "");
        let (v, why) = kernel_answer(&captured(1, REFUSED, ""), Some(&bare));
        assert_eq!(v, Verdict::NotApplicable);
        assert!(why.contains("EPERM"), "{why}");
    }

    #[test]
    fn kernel_answer_ok_inside_the_sandbox_is_an_escape() {
        let bare = captured(0, WORKED, "");
        let (v, _) = kernel_answer(&captured(0, WORKED, ""), Some(&bare));
        assert_eq!(v, Verdict::NotContained);
        let (v, why) = kernel_answer(&captured(1, REFUSED, ""), Some(&bare));
        assert_eq!(v, Verdict::Contained);
        assert!(why.contains("EPERM"), "{why}");
    }

    #[test]
    fn an_allowed_call_failing_on_its_harmless_arguments_reached_the_kernel() {
        let ebadf = r#"{"action":"bpf","ok":false,"errno":9,"error":"EBADF"}"#;
        let (v, _) = kernel_answer(&captured(1, ebadf, ""), Some(&captured(1, ebadf, "")));
        assert_eq!(v, Verdict::NotContained);
        let (v, why) = kernel_answer(&captured(1, REFUSED, ""), Some(&captured(1, ebadf, "")));
        assert_eq!(v, Verdict::Contained);
        assert!(why.contains("EBADF"), "{why}");
    }

    #[test]
    fn kernel_answer_without_a_result_line_proves_nothing() {
        let bare = captured(0, WORKED, "");
        let (v, _) = kernel_answer(&captured(127, "", "sh: vetto: not found"), Some(&bare));
        assert_eq!(v, Verdict::Inconclusive);
    }

    #[test]
    fn setuid_binary_running_as_root_is_an_escape() {
        let ran = |uid: &str| captured(0, &format!("Name:\tpasswd\nUid:\t{uid}\n"), "");
        let root = ran("1001\t0\t0\t0");
        let user = ran("1001\t1001\t1001\t1001");
        assert_eq!(
            setuid(&root, Some(&root), "passwd").0,
            Verdict::NotContained
        );
        assert_eq!(setuid(&user, Some(&root), "passwd").0, Verdict::Contained);
        let gone = captured(0, "", "grep: /proc/9/status: No such file");
        assert_eq!(
            setuid(&gone, Some(&root), "passwd").0,
            Verdict::NotApplicable
        );
        // The shell's fork before the exec is not the setuid program.
        let fork = captured(0, "Name:\tsh\nUid:\t1001\t1001\t1001\t1001\n", "");
        assert_eq!(
            setuid(&fork, Some(&root), "passwd").0,
            Verdict::NotApplicable
        );
        // No gain unsandboxed either (nosuid): nothing to prove.
        assert_eq!(
            setuid(&user, Some(&user), "passwd").0,
            Verdict::NotApplicable
        );
    }

    #[test]
    fn said_skips_vetto_s_own_lines_and_prefers_the_probe_error() {
        let job = captured(
            1,
            "",
            "vetto: withheld 2 credential-like variable(s) from the job: A, B\ncat: x: Permission denied\n",
        );
        assert_eq!(said(&job), "cat: x: Permission denied");
        let job = captured(
            1,
            "",
            "vetto: policy: the built-in default sha256:233e91824556c255\nvetto: npm reads ~/.npmrc without its credentials\nsh: 1: cannot create /x: Read-only file system\n",
        );
        assert_eq!(said(&job), "sh: 1: cannot create /x: Read-only file system");
        assert_eq!(
            said(&captured(0, "", "vetto: policy: the built-in default\n")),
            "nothing"
        );
        assert_eq!(said(&captured(1, REFUSED, "noise")), "EPERM");
    }

    #[test]
    #[expect(clippy::unwrap_used, reason = "test setup")]
    fn replacing_git_or_its_hooks_is_noticed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        fs::create_dir_all(p.join(".git/hooks")).unwrap();
        fs::write(p.join(".git/config"), "[core]\n").unwrap();
        let before = GitPrint::of(p);
        assert!(before.differences(&GitPrint::of(p)).is_empty());

        fs::rename(p.join(".git/hooks"), p.join(".git/hooks.old")).unwrap();
        fs::create_dir(p.join(".git/hooks")).unwrap();
        fs::write(p.join(".git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        let d = before.differences(&GitPrint::of(p));
        assert!(d.iter().any(|s| s.contains("hooks was replaced")), "{d:?}");
        assert!(d.iter().any(|s| s.contains("pre-commit appeared")), "{d:?}");

        fs::rename(p.join(".git"), p.join(".git.old")).unwrap();
        std::os::unix::fs::symlink("/tmp", p.join(".git")).unwrap();
        let d = before.differences(&GitPrint::of(p));
        assert!(d.iter().any(|s| s.contains("P/.git was replaced")), "{d:?}");
        assert!(d.iter().any(|s| s.contains(".git.old appeared")), "{d:?}");
    }
}
