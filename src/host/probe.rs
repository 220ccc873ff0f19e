//! The only code that asks the kernel what it supports.
//!
//! [`probe`] runs at every `vetto run`: a handful of syscalls and small
//! /proc reads, no fork (budget: 200 µs). [`probe_tested`] is for `vetto
//! doctor`: it also forks test children that do what the tiers do, which
//! catches what no sysctl shows (a container's seccomp profile, an LSM).
//!
//! Each fact is gathered by a small reader and interpreted by a pure
//! function below, so the reasons can be tested for hosts this is not.

use std::path::Path;

use crate::sys::os::Errno;

use super::{Availability, CgroupMemory, Confinement, HostCaps, KernelVersion};
use crate::sys::caps::{self, SeccompAction};

/// The first kernel with `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`.
pub const WAIT_KILLABLE_RECV_SINCE: KernelVersion = KernelVersion::new(5, 19, 0);

/// The fast probe for every `vetto run`.
pub fn probe() -> HostCaps {
    let (kernel, arch) = match caps::uname() {
        Ok(u) => (u.release, u.machine),
        Err(_) => (String::new(), std::env::consts::ARCH.to_owned()),
    };
    let confinement = confinement();
    let root = caps::effective_uid() == 0;

    let (landlock_abi, landlock_missing) =
        landlock_verdict(caps::landlock_abi(), confinement.seccomp_filter, read_lsm);
    let landlock_errata = if landlock_abi >= 1 {
        caps::landlock_errata().unwrap_or(0)
    } else {
        0
    };

    let seccomp = seccomp_verdict(
        caps::seccomp_mode(),
        caps::seccomp_action_available(SeccompAction::Errno),
    );
    let seccomp_notify = if seccomp.is_available() {
        notify_verdict(
            caps::seccomp_action_available(SeccompAction::UserNotif),
            caps::seccomp_notif_sizes().map(|_| ()),
            &kernel,
        )
    } else {
        Availability::Missing("needs seccomp, which is missing".into())
    };

    let userns = userns_verdict(&UsernsFacts {
        root,
        proc_sys_readable: Path::new("/proc/sys/kernel").is_dir(),
        max_user_namespaces: read_number("/proc/sys/user/max_user_namespaces"),
        unprivileged_userns_clone: read_number("/proc/sys/kernel/unprivileged_userns_clone"),
        apparmor_restrict: read_number("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
        apparmor_label: &|| read_apparmor_label(),
        // Only a filter around vetto can block the syscall itself, and the
        // check costs one syscall: ask only when there is one.
        filter: &|| {
            if confinement.seccomp_filter {
                caps::userns_syscall_unfiltered()
            } else {
                Ok(())
            }
        },
    });

    let fuse = fuse_verdict(caps::fuse_device());

    HostCaps {
        kernel,
        arch,
        landlock_abi,
        landlock_missing,
        userns,
        seccomp,
        seccomp_notify,
        fuse,
        landlock_errata,
        root,
        confinement,
        tested: false,
        cgroup_memory: cgroup_memory(),
        seatbelt: seatbelt_availability(),
    }
}

/// Where the unified cgroup hierarchy is mounted.
const CGROUP2_ROOT: &str = "/sys/fs/cgroup";

/// What decides whether vetto may give the job a memory-limited cgroup v2.
#[derive(Debug, Default)]
struct CgroupFacts {
    /// `/proc/self/cgroup`.
    self_cgroup: String,
    /// `cgroup.controllers` of vetto's cgroup (`None`: unreadable).
    controllers: Option<String>,
    /// `cgroup.subtree_control` of vetto's cgroup.
    subtree_control: Option<String>,
    /// vetto may create directories there and write its `cgroup.procs`
    /// and `cgroup.subtree_control`.
    writable: bool,
    /// Processes in vetto's cgroup other than vetto.
    others: usize,
}

/// vetto's cgroup v2 directory (the `0::` line; `None` on a v1-only host).
fn own_cgroup_dir(self_cgroup: &str) -> Option<std::path::PathBuf> {
    let path = self_cgroup.lines().find_map(|l| l.strip_prefix("0::"))?;
    let rel = path.trim().trim_start_matches('/');
    if rel.split('/').any(|c| c == "..") || path.contains(" (deleted)") {
        return None;
    }
    Some(Path::new(CGROUP2_ROOT).join(rel))
}

fn cgroup_verdict(f: &CgroupFacts) -> CgroupMemory {
    let no = |why: &str| CgroupMemory::Unavailable(why.into());
    let Some(dir) = own_cgroup_dir(&f.self_cgroup) else {
        return no(
            "vetto is in no cgroup v2 (this host's memory controller is cgroup v1, or none)",
        );
    };
    let has_memory = |list: &Option<String>| {
        list.as_deref()
            .is_some_and(|l| l.split_whitespace().any(|c| c == "memory"))
    };
    if !has_memory(&f.controllers) {
        return no(
            "vetto's cgroup v2 has no memory controller (it is not delegated to vetto, or the host uses cgroup v1 for memory)",
        );
    }
    if !f.writable {
        return no(
            "vetto's cgroup v2 is not writable by this user (not delegated: use a container with a cgroup namespace or a systemd unit with Delegate=yes)",
        );
    }
    if has_memory(&f.subtree_control) {
        // Children already get the controller: vetto is not inside this
        // cgroup's process list (or it is the root), nothing to move.
        return CgroupMemory::Delegated {
            dir,
            move_supervisor: false,
        };
    }
    if f.others > 0 {
        return no(
            "other processes share vetto's cgroup v2, so its children cannot get the memory controller (\"no internal processes\"); run vetto alone in its cgroup",
        );
    }
    CgroupMemory::Delegated {
        dir,
        move_supervisor: true,
    }
}

/// Reads a handful of small files; no cgroup is created here.
fn cgroup_memory() -> CgroupMemory {
    let self_cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let Some(dir) = own_cgroup_dir(&self_cgroup) else {
        return cgroup_verdict(&CgroupFacts::default());
    };
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
    let can_write = |p: &Path| crate::sys::os::can_write(p);
    let me = std::process::id().to_string();
    let facts = CgroupFacts {
        controllers: read("cgroup.controllers"),
        subtree_control: read("cgroup.subtree_control"),
        writable: can_write(&dir)
            && can_write(&dir.join("cgroup.procs"))
            && can_write(&dir.join("cgroup.subtree_control")),
        others: read("cgroup.procs")
            .unwrap_or_default()
            .lines()
            .filter(|p| p.trim() != me)
            .count(),
        self_cgroup,
    };
    cgroup_verdict(&facts)
}

/// `/dev/fuse` as the secret traps need it: there and open to this user.
fn fuse_verdict(open: Result<(), Errno>) -> Availability {
    match open {
        Ok(()) => Availability::Available,
        Err(Errno::ENOENT | Errno::ENODEV | Errno::ENXIO) => Availability::Missing(
            "no /dev/fuse (the kernel has no FUSE); fix: sudo modprobe fuse".into(),
        ),
        Err(Errno::EACCES | Errno::EPERM) => Availability::Missing(
            "/dev/fuse is not open to this user; fix: sudo chmod 0666 /dev/fuse".into(),
        ),
        Err(e) => Availability::Missing(format!("cannot open /dev/fuse: {e}")),
    }
}

/// The fast probe, then test children for user namespaces and seccomp user
/// notification, whose results replace the guesses (`vetto doctor`).
pub fn probe_tested() -> HostCaps {
    confirm(probe())
}

/// Confirm (or refute) the fast probe's `userns` and `seccomp_notify` with
/// test children that do what the tiers do.
pub fn confirm(mut host: HostCaps) -> HostCaps {
    host.userns = tested_verdict(
        &host.userns,
        caps::try_user_namespace_in_child(),
        &host.confinement,
    );
    if host.seccomp.is_available() {
        host.seccomp_notify = tested_verdict(
            &host.seccomp_notify,
            caps::try_seccomp_listener_in_child(),
            &host.confinement,
        );
    }
    host.tested = true;
    host
}

/// Combine a fast verdict with a test child's result: the test wins, but a
/// failed test keeps the fast reason when there was one (it names the fix).
fn tested_verdict(
    fast: &Availability,
    test: Result<(), caps::ChildTestError>,
    confinement: &Confinement,
) -> Availability {
    match (test, fast) {
        (Ok(()), _) => Availability::Available,
        (Err(_), Availability::Missing(why)) => Availability::Missing(why.clone()),
        (Err(e), Availability::Available) => {
            let mut why = format!("a test child failed: {e}");
            if let caps::ChildTestError::Step { errno, .. } = e {
                why.push_str(&failed_test_hint(errno, confinement));
            }
            Availability::Missing(why)
        }
    }
}

fn failed_test_hint(errno: Errno, confinement: &Confinement) -> String {
    match errno {
        Errno::EPERM | Errno::EACCES if confinement.seccomp_filter => {
            let outer = match &confinement.container {
                Some(c) => format!("the {c} container's seccomp profile"),
                None => "a seccomp filter around vetto".into(),
            };
            format!(
                "; {outer} or an LSM policy forbids it; fix: allow it in that policy \
                 (e.g. docker run --security-opt seccomp=…), or use --tier fs-only"
            )
        }
        Errno::EPERM | Errno::EACCES => {
            "; an LSM policy (AppArmor, SELinux) forbids it; fix: allow it for vetto, \
             or use --tier fs-only"
                .into()
        }
        Errno::EBUSY => {
            "; vetto already runs under a filter with a listener (nested sandbox?)".into()
        }
        Errno::EINVAL => "; the kernel rejects the request (too old?)".into(),
        Errno::ENOSPC | Errno::EUSERS => {
            "; the user namespace limit is reached (user.max_user_namespaces, nesting depth)".into()
        }
        _ => String::new(),
    }
}

/// `landlock_create_ruleset(NULL, 0, VERSION)` → (ABI, reason when 0).
fn landlock_verdict(
    abi: Result<u32, Errno>,
    seccomp_filtered: bool,
    read_lsm: impl Fn() -> Option<String>,
) -> (u8, Option<String>) {
    match abi {
        Ok(0) => (0, Some("the kernel reports Landlock ABI 0".into())),
        Ok(v) => (u8::try_from(v).unwrap_or(u8::MAX), None),
        Err(Errno::ENOSYS) => {
            let mut why = String::from(
                "ENOSYS: the kernel was built without Landlock (CONFIG_SECURITY_LANDLOCK)",
            );
            if seccomp_filtered {
                why.push_str(", or a seccomp filter around vetto hides it");
            }
            why.push_str("; fix: a kernel ≥ 5.13 built with CONFIG_SECURITY_LANDLOCK=y");
            (0, Some(why))
        }
        Err(Errno::EOPNOTSUPP) => {
            let lsm = match read_lsm() {
                Some(list) => format!("active LSMs: {list}"),
                None => "/sys/kernel/security/lsm is not readable".into(),
            };
            (
                0,
                Some(format!(
                    "EOPNOTSUPP: Landlock is built in but not enabled at boot ({lsm}); \
                     fix: add landlock to the lsm= kernel parameter \
                     (e.g. lsm=landlock,lockdown,yama,integrity,apparmor,bpf)"
                )),
            )
        }
        Err(e) => (
            0,
            Some(format!(
                "landlock_create_ruleset failed with {e}: a seccomp filter or LSM around \
                 vetto blocks it; fix: allow the landlock_* syscalls in that policy"
            )),
        ),
    }
}

/// `prctl(PR_GET_SECCOMP)` and `SECCOMP_GET_ACTION_AVAIL(RET_ERRNO)` → seccomp.
fn seccomp_verdict(mode: Result<u32, Errno>, errno_action: Result<(), Errno>) -> Availability {
    match (mode, errno_action) {
        (Err(Errno::EINVAL), _) => Availability::Missing(
            "the kernel was built without seccomp (CONFIG_SECCOMP); \
             fix: a kernel built with CONFIG_SECCOMP_FILTER=y"
                .into(),
        ),
        (Err(e), _) => Availability::Missing(format!("prctl(PR_GET_SECCOMP) failed with {e}")),
        (Ok(_), Ok(())) => Availability::Available,
        (Ok(_), Err(Errno::ENOSYS)) => Availability::Missing(
            "ENOSYS: no seccomp(2) syscall (Linux < 3.17, or a filter hides it)".into(),
        ),
        (Ok(_), Err(e)) => Availability::Missing(format!(
            "seccomp(SECCOMP_GET_ACTION_AVAIL, SECCOMP_RET_ERRNO) failed with {e}: \
             the kernel cannot filter syscalls (CONFIG_SECCOMP_FILTER)"
        )),
    }
}

/// `SECCOMP_RET_USER_NOTIF`, `SECCOMP_GET_NOTIF_SIZES` and the kernel version
/// (`WAIT_KILLABLE_RECV` cannot be asked for without installing a filter).
fn notify_verdict(
    action: Result<(), Errno>,
    sizes: Result<(), Errno>,
    kernel: &str,
) -> Availability {
    if let Err(e) = action {
        return Availability::Missing(format!(
            "SECCOMP_RET_USER_NOTIF is not available ({e}; needs Linux 5.0+)"
        ));
    }
    if let Err(e) = sizes {
        return Availability::Missing(format!("SECCOMP_GET_NOTIF_SIZES failed with {e}"));
    }
    match KernelVersion::parse(kernel) {
        Some(v) if v >= WAIT_KILLABLE_RECV_SINCE => Availability::Available,
        Some(v) => Availability::Missing(format!(
            "Linux {v} lacks SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (Linux 5.19+), without \
             which signals re-run supervised calls; fix: a kernel ≥ 5.19"
        )),
        None => Availability::Missing(format!(
            "cannot read a version from kernel release `{kernel}`; \
             WAIT_KILLABLE_RECV needs Linux 5.19+"
        )),
    }
}

/// What decides whether an unprivileged process may create a user namespace.
struct UsernsFacts<'a> {
    root: bool,
    /// Without /proc the sysctls below read as absent.
    proc_sys_readable: bool,
    /// `/proc/sys/user/max_user_namespaces`; absent without CONFIG_USER_NS.
    max_user_namespaces: Option<u64>,
    /// `/proc/sys/kernel/unprivileged_userns_clone` (Debian's patch).
    unprivileged_userns_clone: Option<u64>,
    /// `/proc/sys/kernel/apparmor_restrict_unprivileged_userns` (Ubuntu 23.10+).
    apparmor_restrict: Option<u64>,
    /// vetto's AppArmor label, read only when the restriction is on.
    apparmor_label: &'a dyn Fn() -> Option<String>,
    /// Whether a seccomp filter lets the syscall through.
    filter: &'a dyn Fn() -> Result<(), Errno>,
}

fn userns_verdict(facts: &UsernsFacts<'_>) -> Availability {
    let missing = |s: String| Availability::Missing(s);
    if !facts.proc_sys_readable {
        return missing(
            "/proc/sys is not readable (is /proc mounted?): the user namespace sysctls \
             cannot be checked; fix: mount /proc"
                .into(),
        );
    }
    if facts.max_user_namespaces.is_none() && facts.unprivileged_userns_clone.is_none() {
        return missing(
            "the kernel was built without user namespaces (CONFIG_USER_NS); \
             fix: a kernel built with CONFIG_USER_NS=y"
                .into(),
        );
    }
    if facts.max_user_namespaces == Some(0) {
        return missing(
            "user.max_user_namespaces = 0; fix: sudo sysctl user.max_user_namespaces=15000".into(),
        );
    }
    if !facts.root {
        if facts.unprivileged_userns_clone == Some(0) {
            return missing(
                "kernel.unprivileged_userns_clone = 0 (Debian); \
                 fix: sudo sysctl kernel.unprivileged_userns_clone=1"
                    .into(),
            );
        }
        if facts.apparmor_restrict == Some(1) {
            // A profile of its own may grant vetto `userns`: the profile is
            // then the fix already applied.
            let label = (facts.apparmor_label)();
            let confined_by_own_profile = label
                .as_deref()
                .is_some_and(|l| !l.is_empty() && l != "unconfined");
            if !confined_by_own_profile {
                return missing(
                    "kernel.apparmor_restrict_unprivileged_userns = 1 (Ubuntu 23.10+ AppArmor \
                     restriction); fix: sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0, \
                     or an AppArmor profile for vetto that allows `userns,`"
                        .into(),
                );
            }
        }
    }
    match (facts.filter)() {
        Ok(()) => Availability::Available,
        Err(e) => missing(format!(
            "a seccomp filter around vetto blocks unshare(CLONE_NEWUSER) with {e:?} \
             (a container runtime's profile?); fix: allow it in that profile, or use --tier fs-only"
        )),
    }
}

/// What already restricts vetto: cheap reads only.
fn confinement() -> Confinement {
    Confinement {
        seccomp_filter: caps::seccomp_mode().is_ok_and(|m| m == 2),
        no_new_privs: caps::no_new_privs().unwrap_or(false),
        user_namespace: std::fs::read_to_string("/proc/self/uid_map")
            .ok()
            .is_some_and(|m| !is_initial_uid_map(&m)),
        container: container_marker(),
    }
}

/// The initial user namespace maps every uid to itself: `0 0 4294967295`.
fn is_initial_uid_map(map: &str) -> bool {
    let lines: Vec<Vec<&str>> = map
        .lines()
        .map(|l| l.split_whitespace().collect())
        .filter(|f: &Vec<&str>| !f.is_empty())
        .collect();
    lines.len() == 1 && lines[0] == ["0", "0", "4294967295"]
}

fn container_marker() -> Option<String> {
    if Path::new("/.dockerenv").exists() {
        return Some("docker".into());
    }
    if Path::new("/run/.containerenv").exists() {
        return Some("podman".into());
    }
    if let Some(c) = std::env::var_os("container").filter(|c| !c.is_empty()) {
        return Some(c.to_string_lossy().into_owned());
    }
    if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        return Some("kubernetes".into());
    }
    None
}

fn read_number(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn read_lsm() -> Option<String> {
    std::fs::read_to_string("/sys/kernel/security/lsm")
        .ok()
        .map(|s| s.trim().to_owned())
}

/// `unconfined`, or a profile name like `vetto` (from `vetto (enforce)`).
fn read_apparmor_label() -> Option<String> {
    let raw = std::fs::read_to_string("/proc/self/attr/apparmor/current")
        .or_else(|_| std::fs::read_to_string("/proc/self/attr/current"))
        .ok()?;
    let label = raw.trim_end_matches(['\n', '\0']).trim();
    Some(
        label
            .split_once(" (")
            .map_or(label, |(name, _)| name)
            .to_owned(),
    )
}

#[cfg(test)]
mod cgroup_tests {
    use super::*;

    fn delegated() -> CgroupFacts {
        CgroupFacts {
            self_cgroup: "0::/system.slice/ci-runner.service\n".into(),
            controllers: Some("cpuset cpu io memory pids\n".into()),
            subtree_control: Some(String::new()),
            writable: true,
            others: 0,
        }
    }

    #[test]
    fn a_delegated_unit_alone_in_its_cgroup_moves_itself_aside() {
        assert_eq!(
            cgroup_verdict(&delegated()),
            CgroupMemory::Delegated {
                dir: "/sys/fs/cgroup/system.slice/ci-runner.service".into(),
                move_supervisor: true
            }
        );
    }

    #[test]
    fn a_cgroup_v1_memory_controller_is_no_delegation() {
        // This host's kind: v1 controllers, and a 0:: line whose v2
        // cgroup has no memory controller.
        let v1 = CgroupFacts {
            self_cgroup: "4:memory:/user.slice\n0::/user.slice/session-1.scope\n".into(),
            controllers: Some("cpu pids\n".into()),
            ..delegated()
        };
        assert!(matches!(cgroup_verdict(&v1), CgroupMemory::Unavailable(_)));
        let no_v2 = CgroupFacts {
            self_cgroup: "4:memory:/user.slice\n".into(),
            ..delegated()
        };
        assert!(matches!(
            cgroup_verdict(&no_v2),
            CgroupMemory::Unavailable(_)
        ));
    }

    #[test]
    fn an_unwritable_or_shared_cgroup_is_not_used() {
        let ro = CgroupFacts {
            writable: false,
            ..delegated()
        };
        assert!(matches!(cgroup_verdict(&ro), CgroupMemory::Unavailable(_)));
        let shared = CgroupFacts {
            others: 3,
            ..delegated()
        };
        assert!(
            matches!(cgroup_verdict(&shared), CgroupMemory::Unavailable(w) if w.contains("no internal processes"))
        );
        let enabled = CgroupFacts {
            subtree_control: Some("memory pids".into()),
            others: 3,
            ..delegated()
        };
        assert!(matches!(
            cgroup_verdict(&enabled),
            CgroupMemory::Delegated {
                move_supervisor: false,
                ..
            }
        ));
    }

    #[test]
    fn a_cgroup_path_cannot_climb_out_of_the_hierarchy() {
        assert_eq!(own_cgroup_dir("0::/../../etc\n"), None);
        assert_eq!(
            own_cgroup_dir("0::/\n"),
            Some(std::path::PathBuf::from("/sys/fs/cgroup/"))
        );
    }
}

/// Whether this host has macOS's Seatbelt sandbox (the SEATBELT tier):
/// libsandbox is part of every macOS since 10.5, so being a Mac (one whose
/// `sandbox_init` vetto links against) is the whole check.
fn seatbelt_availability() -> Availability {
    if cfg!(target_os = "macos") {
        Availability::Available
    } else {
        Availability::Missing("Seatbelt is macOS's sandbox; this host is not macOS".into())
    }
}

/// The test suite's one reader of `VETTO_TEST_REQUIRE`.
#[cfg(test)]
#[path = "../../tests/util/skip.rs"]
mod test_require;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tier::Tier;

    fn facts<'a>(
        apparmor_label: &'a dyn Fn() -> Option<String>,
        filter: &'a dyn Fn() -> Result<(), Errno>,
    ) -> UsernsFacts<'a> {
        UsernsFacts {
            root: false,
            proc_sys_readable: true,
            max_user_namespaces: Some(15000),
            unprivileged_userns_clone: None,
            apparmor_restrict: None,
            apparmor_label,
            filter,
        }
    }

    fn unconfined() -> Option<String> {
        Some("unconfined".into())
    }

    fn unfiltered() -> Result<(), Errno> {
        Ok(())
    }

    fn reason(a: Availability) -> String {
        a.reason().map(str::to_owned).unwrap_or_default()
    }

    #[test]
    fn a_missing_or_closed_dev_fuse_is_named_with_its_fix() {
        assert_eq!(fuse_verdict(Ok(())), Availability::Available);
        let absent = fuse_verdict(Err(Errno::ENOENT));
        assert!(
            absent
                .reason()
                .is_some_and(|r| r.contains("fix: sudo modprobe fuse"))
        );
        let closed = fuse_verdict(Err(Errno::EACCES));
        assert!(
            closed
                .reason()
                .is_some_and(|r| r.contains("chmod 0666 /dev/fuse"))
        );
    }

    #[test]
    fn userns_allowed_by_default_sysctls() {
        assert_eq!(
            userns_verdict(&facts(&unconfined, &unfiltered)),
            Availability::Available
        );
    }

    #[test]
    fn ubuntu_apparmor_restriction_is_named_with_its_fix() {
        let f = UsernsFacts {
            apparmor_restrict: Some(1),
            ..facts(&unconfined, &unfiltered)
        };
        let why = reason(userns_verdict(&f));
        assert!(
            why.contains("apparmor_restrict_unprivileged_userns = 1"),
            "{why}"
        );
        assert!(
            why.contains("sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0"),
            "{why}"
        );
    }

    #[test]
    fn own_apparmor_profile_lifts_the_restriction() {
        let profile = || Some("vetto".to_owned());
        let f = UsernsFacts {
            apparmor_restrict: Some(1),
            ..facts(&profile, &unfiltered)
        };
        assert!(userns_verdict(&f).is_available());
    }

    #[test]
    fn max_user_namespaces_zero_blocks_even_root() {
        let f = UsernsFacts {
            root: true,
            max_user_namespaces: Some(0),
            ..facts(&unconfined, &unfiltered)
        };
        assert!(reason(userns_verdict(&f)).contains("user.max_user_namespaces = 0"));
    }

    #[test]
    fn debian_sysctl_blocks_unprivileged_but_not_root() {
        let f = UsernsFacts {
            unprivileged_userns_clone: Some(0),
            ..facts(&unconfined, &unfiltered)
        };
        assert!(reason(userns_verdict(&f)).contains("unprivileged_userns_clone = 0 (Debian)"));
        let root = UsernsFacts { root: true, ..f };
        assert!(userns_verdict(&root).is_available());
    }

    #[test]
    fn container_seccomp_profile_blocking_unshare_is_seen_without_forking() {
        let docker = || Err(Errno::EPERM);
        let why = reason(userns_verdict(&facts(&unconfined, &docker)));
        assert!(
            why.contains("seccomp filter around vetto blocks unshare(CLONE_NEWUSER) with EPERM"),
            "{why}"
        );
    }

    #[test]
    fn missing_proc_is_not_mistaken_for_a_kernel_without_userns() {
        let f = UsernsFacts {
            proc_sys_readable: false,
            max_user_namespaces: None,
            ..facts(&unconfined, &unfiltered)
        };
        assert!(reason(userns_verdict(&f)).contains("is /proc mounted?"));
    }

    #[test]
    fn kernel_without_user_namespaces() {
        let f = UsernsFacts {
            max_user_namespaces: None,
            ..facts(&unconfined, &unfiltered)
        };
        assert!(reason(userns_verdict(&f)).contains("CONFIG_USER_NS"));
    }

    #[test]
    fn landlock_reasons_tell_enosys_from_eopnotsupp() {
        let no_lsm = || None;
        let (abi, why) = landlock_verdict(Err(Errno::ENOSYS), false, no_lsm);
        assert_eq!(abi, 0);
        assert!(why.unwrap_or_default().contains("built without Landlock"));

        let lsm = || Some("lockdown,capability,yama,apparmor".to_owned());
        let (_, why) = landlock_verdict(Err(Errno::EOPNOTSUPP), false, lsm);
        let why = why.unwrap_or_default();
        assert!(why.contains("not enabled at boot"), "{why}");
        assert!(
            why.contains("active LSMs: lockdown,capability,yama,apparmor"),
            "{why}"
        );
        assert!(why.contains("lsm="), "{why}");

        assert_eq!(landlock_verdict(Ok(7), false, no_lsm), (7, None));
    }

    #[test]
    fn notify_needs_linux_5_19_for_wait_killable_recv() {
        let why = reason(notify_verdict(Ok(()), Ok(()), "5.15.0-105-generic"));
        assert!(why.contains("Linux 5.15.0 lacks SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV"));
        assert!(notify_verdict(Ok(()), Ok(()), "5.19.0").is_available());
        assert!(!notify_verdict(Err(Errno::EOPNOTSUPP), Ok(()), "6.1.0").is_available());
    }

    #[test]
    fn seccomp_missing_from_the_kernel() {
        assert!(reason(seccomp_verdict(Err(Errno::EINVAL), Ok(()))).contains("CONFIG_SECCOMP"));
        assert!(seccomp_verdict(Ok(0), Ok(())).is_available());
    }

    #[test]
    fn failed_test_child_in_a_container_names_its_profile() {
        let in_docker = Confinement {
            seccomp_filter: true,
            container: Some("docker".into()),
            ..Confinement::default()
        };
        let failed = caps::ChildTestError::Step {
            step: "unshare(CLONE_NEWUSER)",
            errno: Errno::EPERM,
        };
        let why = reason(tested_verdict(
            &Availability::Available,
            Err(failed.clone()),
            &in_docker,
        ));
        assert!(
            why.contains("unshare(CLONE_NEWUSER) failed: EPERM"),
            "{why}"
        );
        assert!(why.contains("docker container's seccomp profile"), "{why}");
        // A sysctl reason is kept: it names the fix.
        let sysctl = Availability::Missing("user.max_user_namespaces = 0".into());
        assert_eq!(tested_verdict(&sysctl, Err(failed), &in_docker), sysctl);
    }

    #[test]
    fn uid_maps() {
        assert!(is_initial_uid_map("         0          0 4294967295\n"));
        assert!(!is_initial_uid_map("0 1000 1\n"));
        assert!(!is_initial_uid_map(""));
    }

    // ---- the real host ------------------------------------------------------

    #[test]
    fn probe_is_consistent_on_this_host() {
        let host = probe();
        assert!(!host.kernel.is_empty());
        assert!(!host.arch.is_empty());
        assert!(!host.tested);
        assert_eq!(host.landlock_abi == 0, host.landlock_missing.is_some());
        if !host.seccomp.is_available() {
            assert!(!host.seccomp_notify.is_available());
        }
        // `VETTO_TEST_REQUIRE=landlock-abi>=6,userns,seccomp-notify` turns
        // a missing feature into a failure on hosts known to have it.
        if let Some(min) = test_require::listed_landlock_abi() {
            assert!(
                host.landlock_abi >= min,
                "VETTO_TEST_REQUIRE wants Landlock ABI ≥ {min}, host has {} ({:?})",
                host.landlock_abi,
                host.landlock_missing
            );
        } else if host.landlock_abi == 0 {
            eprintln!("SKIP Landlock checks: {:?}", host.landlock_missing);
        }
        for (name, avail) in [
            ("userns", &host.userns),
            ("seccomp", &host.seccomp),
            ("seccomp-notify", &host.seccomp_notify),
        ] {
            if test_require::listed(name) {
                assert!(
                    avail.is_available(),
                    "VETTO_TEST_REQUIRE wants {name}: {avail:?}"
                );
            }
        }
        if host.landlock_abi >= 1 && host.seccomp.is_available() {
            assert!(host.best_tier() >= Some(Tier::FsOnly));
        }
    }

    #[test]
    fn tested_probe_agrees_with_the_fast_probe_here() {
        let fast = probe();
        let tested = probe_tested();
        assert!(tested.tested);
        assert_eq!(tested.landlock_abi, fast.landlock_abi);
        // On an ordinary host (no outer filter, no own AppArmor profile) the
        // sysctls tell the truth: a child must confirm each positive answer.
        if !fast.confinement.seccomp_filter {
            if fast.userns.is_available() {
                assert_eq!(tested.userns, Availability::Available);
            }
            if fast.seccomp_notify.is_available() {
                assert_eq!(tested.seccomp_notify, Availability::Available);
            }
        }
        if test_require::listed("userns") {
            assert!(tested.userns.is_available(), "{:?}", tested.userns);
        }
        if test_require::listed("seccomp-notify") {
            assert!(
                tested.seccomp_notify.is_available(),
                "{:?}",
                tested.seccomp_notify
            );
        }
    }
}
