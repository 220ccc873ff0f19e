//! FULL tier: enter the namespaces and build the new root from the plan's
//! mount list. Runs in the stage; no decisions are made here.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, symlink};
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, unshare};

use super::sys;
use crate::plan::mounts::{Mount, NamespacePlan};

/// The namespaces of the FULL tier, in the order they are listed to
/// `unshare` (the kernel creates the user namespace first and makes it the
/// owner of the others, which is what lets an unprivileged user do this).
pub const ORDER: [(CloneFlags, &str); 6] = [
    (CloneFlags::CLONE_NEWUSER, "user"),
    (CloneFlags::CLONE_NEWNS, "mount"),
    (CloneFlags::CLONE_NEWPID, "pid"),
    (CloneFlags::CLONE_NEWIPC, "ipc"),
    (CloneFlags::CLONE_NEWUTS, "uts"),
    (CloneFlags::CLONE_NEWNET, "net"),
];

/// Enter the namespaces and map the caller's own uid and gid, so the job
/// sees its own identity rather than root. The PID namespace applies to
/// the next child: the caller forks the sandbox's PID 1 afterwards.
pub fn enter(net: bool) -> Result<(), String> {
    let uid = nix::unistd::getuid();
    let gid = nix::unistd::getgid();
    let mut flags = CloneFlags::empty();
    for (flag, _) in ORDER {
        if flag != CloneFlags::CLONE_NEWNET || net {
            flags |= flag;
        }
    }
    unshare(flags).map_err(|e| {
        format!("cannot create the user, mount, pid, ipc, uts and net namespaces: {e} (see `vetto doctor`)")
    })?;
    // A non-dumpable process's /proc files belong to root: the maps can
    // only be written while dumpable, so lift it for these three writes.
    nix::sys::prctl::set_dumpable(true).map_err(|e| format!("prctl(PR_SET_DUMPABLE): {e}"))?;
    // setgroups must be denied before an unprivileged gid_map is accepted.
    fs::write("/proc/self/setgroups", "deny").map_err(|e| format!("setgroups deny: {e}"))?;
    fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"))
        .map_err(|e| format!("uid_map: {e}"))?;
    fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"))
        .map_err(|e| format!("gid_map: {e}"))?;
    nix::sys::prctl::set_dumpable(false).map_err(|e| format!("prctl(PR_SET_DUMPABLE): {e}"))
}

/// Where the pieces live while the new root is assembled: the host's root
/// is reachable at `OLD`, the sandbox's root is built at `NEW`.
const BASE: &str = "/tmp";
const OLD: &str = "/oldroot";
const NEW: &str = "/newroot";
/// Where each masked file's own empty stand-in is made when it is not a
/// trap (one inode per mask).
const MASKS: &str = "/masks";
/// Where the relay mounts the secret traps, one per mask by its index.
const TRAPS: &str = "/traps";

/// In the relay, right after [`enter`]: keep every mount from here on out
/// of the host, and lay down the scratch tmpfs the new root is assembled
/// in. Split from [`build_root`] so that the relay can mount the secret
/// traps in it before the sandbox's PID 1 exists.
pub fn prepare_scratch() -> Result<(), String> {
    let none: Option<&str> = None;
    mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)
        .map_err(|e| format!("make / private: {e}"))?;
    mount(
        Some("tmpfs"),
        BASE,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0755"),
    )
    .map_err(|e| format!("mount scratch tmpfs: {e}"))
}

/// Where the trap for mask `index` is mounted, before the pivot.
pub fn trap_mount_point(index: usize) -> PathBuf {
    Path::new(BASE)
        .join(TRAPS.trim_start_matches('/'))
        .join(index.to_string())
}

/// In the sandbox's PID 1 (it shares the relay's mount namespace), after
/// [`prepare_scratch`]: build the new root from `plan.mounts`, switch to
/// it, bring loopback up. `traps` are the masks the relay covered with a
/// trap. The order follows bubblewrap's: private propagation, a tmpfs to
/// work in, pivot so the host root becomes `/oldroot`, assemble
/// `/newroot`, pivot again and detach the host root.
pub fn build_root(plan: &NamespacePlan, traps: &[usize]) -> Result<(), String> {
    let none: Option<&str> = None;
    // 1. The scratch tmpfs becomes the root; the host root moves to /oldroot.
    let old_in_base = Path::new(BASE).join(OLD.trim_start_matches('/'));
    mkdir(&old_in_base)?;
    nix::unistd::pivot_root(BASE, &old_in_base).map_err(|e| format!("pivot_root: {e}"))?;
    std::env::set_current_dir("/").map_err(|e| format!("chdir /: {e}"))?;
    mkdir(Path::new(NEW))?;
    mount(
        Some("tmpfs"),
        NEW,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0755"),
    )
    .map_err(|e| format!("mount root tmpfs: {e}"))?;
    mkdir(Path::new(MASKS))?;

    // 2. The policy's view, parents before children.
    for (i, m) in plan.mounts.iter().enumerate() {
        apply(i, m, traps.contains(&i)).map_err(|e| format!("{}: {e}", m.path().display()))?;
    }

    // 2b. Filtered egress: the job's resolver asks vetto's DNS stub. A
    //     regular /etc/resolv.conf in the view is covered by one naming
    //     the stub; a symlink (systemd's) is left alone — a bind would
    //     follow it outside the new root — and names then do not resolve
    //     in the sandbox (closed, not open).
    if plan.dns_stub.is_some() {
        let dest = inside(Path::new("/etc/resolv.conf"));
        if fs::symlink_metadata(&dest).is_ok_and(|m| m.is_file()) {
            let stand_in = Path::new(MASKS).join("resolv.conf");
            let stub = crate::plan::net::DNS_STUB_ADDR;
            fs::write(
                &stand_in,
                format!("nameserver {}\noptions edns0\n", stub.ip()),
            )
            .map_err(|e| format!("create {}: {e}", stand_in.display()))?;
            bind_onto(&stand_in, &dest, false).map_err(|e| format!("/etc/resolv.conf: {e}"))?;
        }
    }

    // 2c. The sandbox has a host name of its own (set below): a program that
    //     looks itself up (git's ident, a JVM's InetAddress) finds it in
    //     /etc/hosts as on a host, rather than asking DNS, which carries
    //     the name out with host networking and is recorded as a refused
    //     lookup otherwise.
    hosts_with_own_name(&plan.hostname)?;

    // 3. Switch to the new root and let go of the host's.
    std::env::set_current_dir(NEW).map_err(|e| format!("chdir {NEW}: {e}"))?;
    nix::unistd::pivot_root(".", ".").map_err(|e| format!("pivot_root: {e}"))?;
    umount2(".", MntFlags::MNT_DETACH).map_err(|e| format!("detach the host root: {e}"))?;
    std::env::set_current_dir("/").map_err(|e| format!("chdir /: {e}"))?;
    // 4. The skeleton between mounts is immutable.
    mount(
        none,
        "/",
        none,
        MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY,
        none,
    )
    .map_err(|e| format!("remount / read-only: {e}"))?;

    nix::unistd::sethostname(&plan.hostname).map_err(|e| format!("sethostname: {e}"))?;
    if plan.net {
        sys::loopback_up().map_err(|e| format!("bring up loopback: {e}"))?;
    }
    Ok(())
}

/// At most this much of the view's /etc/hosts is copied into the stand-in
/// that adds the sandbox's host name; a larger one is left as it is.
const MAX_HOSTS: u64 = 1 << 20;

/// Cover a regular /etc/hosts in the view with a copy that also names
/// `hostname` (at 127.0.1.1, as Debian names a host's own, and at ::1). A symlink is
/// left alone (a bind would follow it outside the new root), and so is a
/// file that already names it, cannot be read or is too large to copy.
fn hosts_with_own_name(hostname: &str) -> Result<(), String> {
    use std::io::Read;
    let dest = inside(Path::new("/etc/hosts"));
    if !fs::symlink_metadata(&dest).is_ok_and(|m| m.is_file()) {
        return Ok(());
    }
    let mut hosts = Vec::new();
    // One the job could not read either is left as it is.
    if fs::File::open(&dest)
        .and_then(|f| f.take(MAX_HOSTS + 1).read_to_end(&mut hosts))
        .is_err()
    {
        return Ok(());
    }
    let named = String::from_utf8_lossy(&hosts).lines().any(|line| {
        let entry = line.split('#').next().unwrap_or_default();
        entry.split_whitespace().skip(1).any(|n| n == hostname)
    });
    if named || u64::try_from(hosts.len()).map_or(true, |n| n > MAX_HOSTS) {
        return Ok(());
    }
    if !hosts.is_empty() && !hosts.ends_with(b"\n") {
        hosts.push(b'\n');
    }
    // Both families: a lookup asks for IPv6 first (`gethostbyname2`,
    // `getent hosts`), and one the file cannot answer goes on to DNS.
    hosts.extend_from_slice(format!("127.0.1.1\t{hostname}\n::1\t{hostname}\n").as_bytes());
    let stand_in = Path::new(MASKS).join("hosts");
    fs::write(&stand_in, hosts).map_err(|e| format!("create {}: {e}", stand_in.display()))?;
    bind_onto(&stand_in, &dest, false).map_err(|e| format!("/etc/hosts: {e}"))
}

fn inside(path: &Path) -> PathBuf {
    Path::new(NEW).join(path.strip_prefix("/").unwrap_or(path))
}

fn host(path: &Path) -> PathBuf {
    Path::new(OLD).join(path.strip_prefix("/").unwrap_or(path))
}

fn mkdir(path: &Path) -> Result<(), String> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(path)
        .map_err(|e| format!("mkdir {}: {e}", path.display()))
}

/// Create `dest` as the same kind of entry as `src` (mount points must match).
fn make_mount_point(src: &Path, dest: &Path) -> Result<(), String> {
    let is_dir = fs::metadata(src)
        .map_err(|e| format!("{}: {e}", src.display()))?
        .is_dir();
    make_mount_point_as(is_dir, dest)
}

fn make_mount_point_as(is_dir: bool, dest: &Path) -> Result<(), String> {
    if is_dir {
        return mkdir(dest);
    }
    if let Some(parent) = dest.parent() {
        mkdir(parent)?;
    }
    match fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o444)
        .open(dest)
    {
        Ok(_) => Ok(()),
        // Already there beneath a bound parent.
        Err(_) if dest.exists() => Ok(()),
        Err(e) => Err(format!("create {}: {e}", dest.display())),
    }
}

fn bind(src: &Path, dest: &Path, writable: bool) -> Result<(), String> {
    make_mount_point(src, dest)?;
    bind_onto(src, dest, writable)
}

/// Bind a secret trap over the masked path. Its kind comes from the plan,
/// not from a stat: every stat of a trap is a request vetto has to answer,
/// and the sandbox's setup has no business with it.
fn bind_trap(index: usize, dest: &Path, is_dir: bool) -> Result<(), String> {
    make_mount_point_as(is_dir, dest)?;
    bind_onto(&Path::new(TRAPS).join(index.to_string()), dest, false)
}

fn bind_onto(src: &Path, dest: &Path, writable: bool) -> Result<(), String> {
    let none: Option<&str> = None;
    mount(
        Some(src),
        dest,
        none,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        none,
    )
    .map_err(|e| format!("bind {}: {e}", src.display()))?;
    let mut attrs = sys::MOUNT_ATTR_NOSUID;
    if !writable {
        attrs |= sys::MOUNT_ATTR_RDONLY;
    }
    sys::mount_setattr_recursive(dest, attrs).map_err(|e| format!("read-only/nosuid: {e}"))
}

fn apply(index: usize, m: &Mount, trapped: bool) -> Result<(), String> {
    let none: Option<&str> = None;
    let nosuid_nodev = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    match m {
        Mount::Tmpfs { path } => {
            let dest = inside(path);
            mkdir(&dest)?;
            let mode = if path == Path::new("/tmp") {
                "mode=1777"
            } else {
                "mode=0755"
            };
            mount(
                Some("tmpfs"),
                &dest,
                Some("tmpfs"),
                nosuid_nodev,
                Some(mode),
            )
            .map_err(|e| format!("tmpfs: {e}"))
        }
        Mount::Bind { path, writable } => bind(&host(path), &inside(path), *writable),
        Mount::Symlink { path, target } => {
            let dest = inside(path);
            if let Some(parent) = dest.parent() {
                mkdir(parent)?;
            }
            symlink(target, &dest).map_err(|e| format!("symlink: {e}"))
        }
        Mount::MaskFile { path } if trapped => bind_trap(index, &inside(path), false),
        Mount::MaskDir { path } if trapped => bind_trap(index, &inside(path), true),
        // Not a trap (none could be mounted): still masked, reads unseen.
        Mount::MaskFile { path } => {
            let stand_in = Path::new(MASKS).join(index.to_string());
            fs::OpenOptions::new()
                .create(true)
                .truncate(true)
                .write(true)
                .mode(0o444)
                .open(&stand_in)
                .map_err(|e| format!("create {}: {e}", stand_in.display()))?;
            bind(&stand_in, &inside(path), false)
        }
        Mount::MaskDir { path } => {
            let dest = inside(path);
            mkdir(&dest)?;
            mount(
                Some("tmpfs"),
                &dest,
                Some("tmpfs"),
                nosuid_nodev | MsFlags::MS_NOEXEC | MsFlags::MS_RDONLY,
                Some("mode=0555,size=4k"),
            )
            .map_err(|e| format!("mask: {e}"))
        }
        Mount::Proc { path } => {
            let dest = inside(path);
            mkdir(&dest)?;
            mount(
                Some("proc"),
                &dest,
                Some("proc"),
                nosuid_nodev | MsFlags::MS_NOEXEC,
                none,
            )
            .map_err(|e| format!("proc: {e}"))
        }
        Mount::Dev { path, console } => build_dev(path, console.as_deref()),
    }
}

/// The highest terminal number [`name_terminal`] names: it holds that many
/// pseudo-terminals of the private instance for a moment (of the 3,072 the
/// kernel lets every instance but the host's have, `kernel.pty.max` less
/// `kernel.pty.reserve`).
const MAX_NAMED_PTY: u32 = 255;

/// The host terminal `tty` (`/dev/pts/N`) by its own name in the private
/// devpts `pts` as well, so `tty` and `ttyname()` say `/dev/pts/N`, as
/// outside: glibc takes the name `/proc/self/fd/0` gives when that name
/// is the same inode, and only then scans `/dev` (finding
/// `/dev/console`). The private instance cannot hold the host's terminal,
/// but it numbers its own from 0: open its `ptmx` until terminal `N`
/// exists, bind the host terminal over that entry, and close the others
/// again (free for the job). Terminal `N`'s master stays open, close-on-
/// exec, in vetto's processes of the sandbox (the init and the relay) for
/// the sandbox's life: the entry — and the bind on it — exists while its
/// master is open, and the job never holds that master. Best effort: the
/// terminal stays at `/dev/console` whatever fails here.
fn name_terminal(pts: &Path, tty: &Path, src: &Path) {
    let Some(n) = tty
        .strip_prefix(crate::plan::terminal::PTS)
        .ok()
        .and_then(|rest| rest.to_str())
        .and_then(|n| n.parse::<u32>().ok())
        .filter(|n| *n <= MAX_NAMED_PTY)
    else {
        return;
    };
    let ptmx = pts.join("ptmx");
    let mut held = Vec::new();
    let named = loop {
        let Ok(master) = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY)
            .open(&ptmx)
        else {
            break None;
        };
        match sys::pty_number(std::os::fd::AsFd::as_fd(&master)) {
            Ok(got) if got == n => break Some(master),
            Ok(got) if got < n => held.push(master),
            _ => break None,
        }
    };
    drop(held);
    if let Some(master) = named
        && bind(src, &pts.join(n.to_string()), true).is_ok()
    {
        // Kept open on purpose for the sandbox's life (see above).
        let _ = std::os::fd::IntoRawFd::into_raw_fd(std::os::fd::OwnedFd::from(master));
    }
}

/// A minimal /dev: a few host device nodes bound in, a private devpts
/// (so the job cannot reach other terminals), /dev/shm and the fd links.
/// `console` is the terminal vetto runs on (a host `/dev/pts/N`), bound at
/// `/dev/console` as bubblewrap does: the job's standard streams are that
/// terminal, whose host path the private devpts cannot show, and glibc's
/// `ttyname()` falls back to scanning `/dev` for the same inode.
fn build_dev(path: &Path, console: Option<&Path>) -> Result<(), String> {
    let dev = inside(path);
    mkdir(&dev)?;
    mount(
        Some("tmpfs"),
        &dev,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("mode=0755"),
    )
    .map_err(|e| format!("tmpfs: {e}"))?;
    for node in ["null", "zero", "full", "random", "urandom", "tty"] {
        let src = host(&path.join(node));
        if src.exists() {
            bind(&src, &dev.join(node), true)?;
        }
    }
    let pts = dev.join("pts");
    mkdir(&pts)?;
    mount(
        Some("devpts"),
        &pts,
        Some("devpts"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=620"),
    )
    .map_err(|e| format!("devpts: {e}"))?;
    symlink("pts/ptmx", dev.join("ptmx")).map_err(|e| format!("ptmx: {e}"))?;
    if let Some(tty) = console {
        let src = host(tty);
        // A terminal closed since planning is simply not there.
        if src.exists() {
            bind(&src, &dev.join("console"), true)?;
            name_terminal(&pts, tty, &src);
        }
    }
    let shm = dev.join("shm");
    mkdir(&shm)?;
    mount(
        Some("tmpfs"),
        &shm,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=1777"),
    )
    .map_err(|e| format!("shm: {e}"))?;
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        symlink(target, dev.join(name)).map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(())
}
