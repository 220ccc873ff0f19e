//! `SeccompPlan` → BPF via seccompiler, then loaded by us. No decisions are
//! made here: the plan says which call gets which action.
//!
//! One filter for every action. seccompiler gives a program one action on
//! a match, so each action's rules are compiled as a group of their own
//! (`EPERM`, then `ENOSYS`, then user notification: the plan's order of
//! strength) and the groups run in turn: where a group would allow, it
//! jumps to the next, and past the last the call is allowed. A call that
//! is both denied and notified is denied, as it would be with a filter
//! per action, but the kernel prepares, JITs and runs one program (issue
//! 12: as few filters as the semantics allow). seccompiler has no
//! `SECCOMP_RET_USER_NOTIF`, so the notify group is compiled with a marked
//! `SECCOMP_RET_TRACE` and that return value is rewritten.

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::sys;
use crate::plan::syscalls::{Action, ArgCheck, SeccompPlan, SyscallRule};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SeccompError {
    #[error("cannot compile the syscall filter: {0}")]
    Compile(#[from] seccompiler::BackendError),
    #[error("cannot compile the syscall filter: {0}")]
    Build(#[from] seccompiler::Error),
    #[error("cannot compile the syscall filter: no number for `{0}` on this architecture")]
    UnknownSyscall(String),
    #[error(
        "cannot compile the syscall filter: {0} instructions, more than the kernel's {BPF_MAXINSNS}"
    )]
    TooLong(usize),
    #[error("cannot load the syscall filter ({action}): {source}")]
    Load {
        action: String,
        source: std::io::Error,
    },
}

const MARK: u32 = 0x7e7e;
const SECCOMP_RET_TRACE: u32 = 0x7ff0_0000;
const SECCOMP_RET_USER_NOTIF: u32 = 0x7fc0_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
/// The longest program the kernel loads (`BPF_MAXINSNS`).
const BPF_MAXINSNS: usize = 4096;
/// `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV` (5.19): without it a signal
/// arriving after the supervisor received a notification re-runs the
/// emulated call (see docs/notify.md).
const WAIT_KILLABLE_RECV: libc::c_ulong = 1 << 5;
/// The x32 ABI shares x86_64's audit arch; its numbers carry this bit.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

#[cfg(target_arch = "x86_64")]
const ARCH: (TargetArch, u32, &str) = (TargetArch::x86_64, 0xc000_003e, "x86_64");
#[cfg(target_arch = "aarch64")]
const ARCH: (TargetArch, u32, &str) = (TargetArch::aarch64, 0xc000_00b7, "aarch64");

/// Compile and load the plan's filter into this thread (inherited by its
/// future children). Returns the notification listener when the plan has
/// notify rules.
pub fn install(plan: &SeccompPlan) -> Result<Option<OwnedFd>, SeccompError> {
    let Some(filter) = program(plan)? else {
        return Ok(None);
    };
    let flags = if filter.notifies {
        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | WAIT_KILLABLE_RECV
    } else {
        0
    };
    sys::seccomp_set_filter(&filter.program, flags).map_err(|source| SeccompError::Load {
        action: filter.actions,
        source,
    })
}

/// The plan as one BPF program.
struct Program {
    program: Vec<libc::sock_filter>,
    /// Whether some call is notified (the filter needs a listener).
    notifies: bool,
    /// The actions it has, for messages (`deny, notify`).
    actions: String,
}

/// The groups, strongest first: a call the first matches never reaches
/// the second. Denied calls go to the supervisor too when it records them:
/// it answers EPERM itself (and, failing that, the kernel answers ENOSYS).
const GROUPS: [(Action, SeccompAction); 3] = [
    (Action::Deny, SeccompAction::Errno(libc::EPERM as u32)),
    (
        Action::Unsupported,
        SeccompAction::Errno(libc::ENOSYS as u32),
    ),
    (Action::Notify, SeccompAction::Trace(MARK)),
];

/// The plan's rules that `action`'s group holds: a denial is notified
/// instead when the supervisor records denials.
fn group(plan: &SeccompPlan, action: Action) -> Vec<&SyscallRule> {
    let group_of = |rule: &SyscallRule| match rule.action {
        Action::Deny if plan.record_denials => Action::Notify,
        other => other,
    };
    plan.rules
        .iter()
        .filter(|r| group_of(r) == action)
        .collect()
}

/// The one filter for `plan`, or `None` when it has no rules.
fn program(plan: &SeccompPlan) -> Result<Option<Program>, SeccompError> {
    let mut program = prologue();
    let mut notifies = false;
    let mut actions = Vec::new();
    for (action, ret) in GROUPS {
        let rules = group(plan, action);
        if rules.is_empty() {
            continue;
        }
        let mut group = compile(&rules, ret, action == Action::Notify)?;
        // Not this group's call: on to the next. A jump of `k` lands `k`
        // instructions after the next one, so each lands just past the
        // group's end; seccompiler's own jumps are relative and stay right,
        // since no instruction is added or removed.
        let len = group.len();
        for (at, insn) in group.iter_mut().enumerate() {
            if insn.code == (libc::BPF_RET | libc::BPF_K) as u16 && insn.k == SECCOMP_RET_ALLOW {
                *insn = libc::sock_filter {
                    code: (libc::BPF_JMP | libc::BPF_JA) as u16,
                    jt: 0,
                    jf: 0,
                    k: u32::try_from(len - 1 - at).map_err(|_| SeccompError::TooLong(len))?,
                };
            }
        }
        program.extend(group);
        notifies |= action == Action::Notify;
        actions.push(action_name(action));
    }
    if actions.is_empty() {
        return Ok(None);
    }
    program.push(libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: SECCOMP_RET_ALLOW,
    });
    if program.len() > BPF_MAXINSNS {
        return Err(SeccompError::TooLong(program.len()));
    }
    Ok(Some(Program {
        program,
        notifies,
        actions: actions.join(", "),
    }))
}

fn action_name(a: Action) -> &'static str {
    match a {
        Action::Deny => "deny",
        Action::Unsupported => "unsupported",
        Action::Notify => "notify",
    }
}

/// One group: `rules` get `ret`, everything else is allowed (seccompiler's
/// program, architecture check included; [`program`] puts the prologue
/// before the groups).
fn compile(
    rules: &[&SyscallRule],
    ret: SeccompAction,
    notify: bool,
) -> Result<Vec<libc::sock_filter>, SeccompError> {
    let mut map: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for rule in rules {
        let Some(nr) = syscall_number(&rule.name) else {
            // Calls that newer architectures never had (`open` on aarch64):
            // nothing to filter. Any other name without a number would be
            // a rule silently dropped: refuse to build the filter.
            if ONLY_ON_OLDER_ARCHITECTURES.contains(&rule.name.as_str()) {
                continue;
            }
            return Err(SeccompError::UnknownSyscall(rule.name.clone()));
        };
        let entry = map.entry(nr).or_default();
        if rule.when.is_empty() {
            // An unconditional rule: seccompiler expresses it as no rules.
            entry.clear();
            entry.push(SeccompRule::new(vec![SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(0),
                0,
            )?])?);
            continue;
        }
        for conditions in expand(&rule.when)? {
            entry.push(SeccompRule::new(conditions)?);
        }
    }
    let filter = SeccompFilter::new(map, SeccompAction::Allow, ret, ARCH.0)?;
    let mut program: BpfProgram = filter.try_into()?;
    if notify {
        for insn in &mut program {
            if insn.code == (libc::BPF_RET | libc::BPF_K) as u16
                && insn.k == SECCOMP_RET_TRACE | MARK
            {
                insn.k = SECCOMP_RET_USER_NOTIF;
            }
        }
    }
    Ok(program
        .iter()
        .map(|i| libc::sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect())
}

/// Before the groups: calls of a foreign architecture (i386 via `int 0x80`)
/// and x32 numbers fail with ENOSYS instead of slipping past rules written
/// for x86_64 numbers (seccompiler's check would kill the process).
fn prologue() -> Vec<libc::sock_filter> {
    let enosys = SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |code: u32, k: u32, jt: u8, jf: u8| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    vec![
        // seccomp_data.arch
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 4),
        jump(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, ARCH.1, 1, 0),
        stmt(libc::BPF_RET | libc::BPF_K, enosys),
        // seccomp_data.nr
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0),
        jump(
            libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K,
            X32_SYSCALL_BIT,
            0,
            1,
        ),
        stmt(libc::BPF_RET | libc::BPF_K, enosys),
    ]
}

/// Plan checks → seccompiler conditions. `AnyBits` with several bits
/// becomes one rule per bit (rules of a syscall are OR-ed).
fn expand(when: &[ArgCheck]) -> Result<Vec<Vec<SeccompCondition>>, SeccompError> {
    let mut alternatives: Vec<Vec<SeccompCondition>> = vec![Vec::new()];
    for check in when {
        match *check {
            ArgCheck::Eq { index, value } => {
                for alt in &mut alternatives {
                    alt.push(cond(index, SeccompCmpOp::Eq, value)?);
                }
            }
            ArgCheck::Ne { index, value } => {
                for alt in &mut alternatives {
                    alt.push(cond(index, SeccompCmpOp::Ne, value)?);
                }
            }
            ArgCheck::MaskedEq { index, mask, value } => {
                for alt in &mut alternatives {
                    alt.push(cond(index, SeccompCmpOp::MaskedEq(mask), value)?);
                }
            }
            ArgCheck::AnyBits { index, mask } => {
                let mut next = Vec::new();
                for bit in (0..64).map(|b| 1u64 << b).filter(|b| mask & b != 0) {
                    for alt in &alternatives {
                        let mut alt = alt.clone();
                        alt.push(cond(index, SeccompCmpOp::MaskedEq(bit), bit)?);
                        next.push(alt);
                    }
                }
                alternatives = next;
            }
        }
    }
    Ok(alternatives)
}

/// Compare the low 32 bits only when the value fits: the kernel reads `int`
/// arguments (families, flags, ioctl commands) from the low half, so high
/// garbage bits must not make a denied value look different.
fn cond(index: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SeccompError> {
    let len = match op {
        SeccompCmpOp::MaskedEq(mask) if mask > u64::from(u32::MAX) => SeccompCmpArgLen::Qword,
        _ if value > u64::from(u32::MAX) => SeccompCmpArgLen::Qword,
        _ => SeccompCmpArgLen::Dword,
    };
    Ok(SeccompCondition::new(index, len, op, value)?)
}

/// Syscall names the plan uses → this architecture's numbers.
pub fn syscall_number(name: &str) -> Option<i64> {
    let nr = match name {
        "io_uring_setup" => libc::SYS_io_uring_setup,
        "io_uring_enter" => libc::SYS_io_uring_enter,
        "io_uring_register" => libc::SYS_io_uring_register,
        "ptrace" => libc::SYS_ptrace,
        "process_vm_readv" => libc::SYS_process_vm_readv,
        "process_vm_writev" => libc::SYS_process_vm_writev,
        "unshare" => libc::SYS_unshare,
        "setns" => libc::SYS_setns,
        "mount" => libc::SYS_mount,
        "umount2" => libc::SYS_umount2,
        "pivot_root" => libc::SYS_pivot_root,
        "chroot" => libc::SYS_chroot,
        "move_mount" => libc::SYS_move_mount,
        "open_tree" => libc::SYS_open_tree,
        "fsopen" => libc::SYS_fsopen,
        "fsconfig" => libc::SYS_fsconfig,
        "fsmount" => libc::SYS_fsmount,
        "fspick" => libc::SYS_fspick,
        "mount_setattr" => libc::SYS_mount_setattr,
        "bpf" => libc::SYS_bpf,
        "perf_event_open" => libc::SYS_perf_event_open,
        "userfaultfd" => libc::SYS_userfaultfd,
        "keyctl" => libc::SYS_keyctl,
        "add_key" => libc::SYS_add_key,
        "request_key" => libc::SYS_request_key,
        "init_module" => libc::SYS_init_module,
        "finit_module" => libc::SYS_finit_module,
        "delete_module" => libc::SYS_delete_module,
        "kexec_load" => libc::SYS_kexec_load,
        "kexec_file_load" => libc::SYS_kexec_file_load,
        "acct" => libc::SYS_acct,
        "swapon" => libc::SYS_swapon,
        "swapoff" => libc::SYS_swapoff,
        "reboot" => libc::SYS_reboot,
        "syslog" => libc::SYS_syslog,
        "quotactl" => libc::SYS_quotactl,
        "name_to_handle_at" => libc::SYS_name_to_handle_at,
        "open_by_handle_at" => libc::SYS_open_by_handle_at,
        "clone" => libc::SYS_clone,
        "setrlimit" => libc::SYS_setrlimit,
        "prlimit64" => libc::SYS_prlimit64,
        "clone3" => libc::SYS_clone3,
        "openat2" => libc::SYS_openat2,
        "ioctl" => libc::SYS_ioctl,
        "socket" => libc::SYS_socket,
        "socketpair" => libc::SYS_socketpair,
        "connect" => libc::SYS_connect,
        "listen" => libc::SYS_listen,
        "bind" => libc::SYS_bind,
        "sendto" => libc::SYS_sendto,
        "sendmsg" => libc::SYS_sendmsg,
        "sendmmsg" => libc::SYS_sendmmsg,
        "openat" => libc::SYS_openat,
        "mkdirat" => libc::SYS_mkdirat,
        "renameat2" => libc::SYS_renameat2,
        "unlinkat" => libc::SYS_unlinkat,
        "symlinkat" => libc::SYS_symlinkat,
        "linkat" => libc::SYS_linkat,
        "mknodat" => libc::SYS_mknodat,
        "fchmod" => libc::SYS_fchmod,
        "fchmodat" => libc::SYS_fchmodat,
        "fchmodat2" => libc::SYS_fchmodat2,
        "fchown" => libc::SYS_fchown,
        "fchownat" => libc::SYS_fchownat,
        "utimensat" => libc::SYS_utimensat,
        other => return legacy_syscall_number(other),
    };
    Some(nr)
}

/// Calls that only older architectures have (x86_64 has them all; aarch64
/// only those listed for it below).
const ONLY_ON_OLDER_ARCHITECTURES: [&str; 20] = [
    "uselib",
    "vhangup",
    "open",
    "creat",
    "mkdir",
    "rename",
    "renameat",
    "unlink",
    "rmdir",
    "symlink",
    "link",
    "mknod",
    "fork",
    "vfork",
    "chmod",
    "chown",
    "lchown",
    "utime",
    "utimes",
    "futimesat",
];

/// Calls that only older architectures have.
#[cfg(target_arch = "x86_64")]
fn legacy_syscall_number(name: &str) -> Option<i64> {
    Some(match name {
        "uselib" => libc::SYS_uselib,
        "vhangup" => libc::SYS_vhangup,
        "open" => libc::SYS_open,
        "creat" => libc::SYS_creat,
        "mkdir" => libc::SYS_mkdir,
        "rename" => libc::SYS_rename,
        "renameat" => libc::SYS_renameat,
        "unlink" => libc::SYS_unlink,
        "rmdir" => libc::SYS_rmdir,
        "symlink" => libc::SYS_symlink,
        "link" => libc::SYS_link,
        "mknod" => libc::SYS_mknod,
        "fork" => libc::SYS_fork,
        "vfork" => libc::SYS_vfork,
        "chmod" => libc::SYS_chmod,
        "chown" => libc::SYS_chown,
        "lchown" => libc::SYS_lchown,
        "utime" => libc::SYS_utime,
        "utimes" => libc::SYS_utimes,
        "futimesat" => libc::SYS_futimesat,
        _ => return None,
    })
}

#[cfg(target_arch = "aarch64")]
fn legacy_syscall_number(name: &str) -> Option<i64> {
    Some(match name {
        "vhangup" => libc::SYS_vhangup,
        "renameat" => libc::SYS_renameat,
        _ => return None,
    })
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;
    use crate::plan::syscalls;

    #[test]
    fn every_planned_syscall_has_a_number_here() {
        let plan = syscalls::plan(true, true, true);
        let metadata = syscalls::metadata_rules();
        let missing: Vec<_> = plan
            .rules
            .iter()
            .chain(&metadata)
            .filter(|r| syscall_number(&r.name).is_none())
            .map(|r| r.name.as_str())
            .collect();
        // Anything missing here may only be a call this architecture never had.
        assert!(
            missing
                .iter()
                .all(|m| ONLY_ON_OLDER_ARCHITECTURES.contains(m)),
            "no syscall number for {missing:?}"
        );
        #[cfg(target_arch = "x86_64")]
        assert!(missing.is_empty(), "no syscall number for {missing:?}");
    }

    #[test]
    fn a_rule_without_a_syscall_number_refuses_the_filter() {
        let rule = crate::plan::syscalls::SyscallRule {
            name: "no_such_call".into(),
            action: Action::Deny,
            when: vec![],
            why: String::new(),
        };
        let compiled = compile(&[&rule], SeccompAction::Errno(1), false);
        assert!(matches!(compiled, Err(SeccompError::UnknownSyscall(n)) if n == "no_such_call"));
    }

    /// `struct seccomp_data`: `nr`, `arch`, `instruction_pointer`, `args`.
    struct Data {
        nr: u32,
        arch: u32,
        args: [u64; 6],
    }

    impl Data {
        /// The 32-bit word at byte `offset`, as `BPF_LD|BPF_W|BPF_ABS`
        /// reads it (little-endian halves of the arguments).
        fn word(&self, offset: u32) -> u32 {
            match offset {
                0 => self.nr,
                4 => self.arch,
                16..=63 if offset % 4 == 0 => {
                    let arg = self.args[(offset as usize - 16) / 8];
                    if offset % 8 == 0 {
                        arg as u32
                    } else {
                        (arg >> 32) as u32
                    }
                }
                _ => panic!("the filter reads seccomp_data at {offset}"),
            }
        }
    }

    /// Run a classic BPF seccomp program as the kernel would, for the
    /// instructions seccompiler and the prologue emit (any other fails the
    /// test).
    fn run(program: &[libc::sock_filter], data: &Data) -> u32 {
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let insn = program[pc];
            let code = u32::from(insn.code);
            pc += 1;
            let jump = |taken: bool| usize::from(if taken { insn.jt } else { insn.jf });
            match code {
                c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => acc = data.word(insn.k),
                c if c == libc::BPF_ALU | libc::BPF_AND | libc::BPF_K => acc &= insn.k,
                c if c == libc::BPF_JMP | libc::BPF_JA => pc += insn.k as usize,
                c if c == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K => pc += jump(acc == insn.k),
                c if c == libc::BPF_JMP | libc::BPF_JGT | libc::BPF_K => pc += jump(acc > insn.k),
                c if c == libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K => pc += jump(acc >= insn.k),
                c if c == libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K => {
                    pc += jump(acc & insn.k != 0)
                }
                c if c == libc::BPF_RET | libc::BPF_K => return insn.k,
                other => panic!("unexpected BPF instruction {other:#x} at {}", pc - 1),
            }
        }
    }

    /// The calls to try against a plan: each rule's call with its own
    /// values in every argument, with none, with all bits, and with
    /// pseudo-random arguments; a call no rule names; a foreign
    /// architecture and an x32 number.
    fn inputs(plan: &SeccompPlan) -> Vec<Data> {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let native = ARCH.1;
        let mut out = Vec::new();
        let nr = |name: &str| syscall_number(name).map(|n| n as u32);
        for rule in &plan.rules {
            let Some(nr) = nr(&rule.name) else { continue };
            let mut args = [0u64; 6];
            for check in &rule.when {
                let (index, value) = match *check {
                    ArgCheck::Eq { index, value } | ArgCheck::Ne { index, value } => (index, value),
                    ArgCheck::MaskedEq { index, value, .. } => (index, value),
                    ArgCheck::AnyBits { index, mask } => (index, mask),
                };
                args[usize::from(index)] = value;
            }
            out.push(Data {
                nr,
                arch: native,
                args,
            });
            out.push(Data {
                nr,
                arch: native,
                args: [0; 6],
            });
            out.push(Data {
                nr,
                arch: native,
                args: [u64::MAX; 6],
            });
            for _ in 0..32 {
                let mut args = [0u64; 6];
                for a in &mut args {
                    // Mostly small values, as flags and descriptors are.
                    *a = match next() % 3 {
                        0 => next() & 0xffff,
                        1 => next() & 0xffff_ffff,
                        _ => next(),
                    };
                }
                out.push(Data {
                    nr,
                    arch: native,
                    args,
                });
            }
        }
        for (nr, arch) in [
            (nr("getppid"), native),
            (nr("ptrace"), 0x4000_0003),
            (nr("getppid").map(|n| n | X32_SYSCALL_BIT), native),
        ] {
            let Some(nr) = nr else { continue };
            out.push(Data {
                nr,
                arch,
                args: [0; 6],
            });
        }
        out
    }

    /// What a filter per action answered: the first group (strongest
    /// first) whose own program does not allow the call, else allow.
    fn per_action(plan: &SeccompPlan, data: &Data) -> u32 {
        for (action, ret) in GROUPS {
            let rules = group(plan, action);
            if rules.is_empty() {
                continue;
            }
            let mut alone = prologue();
            alone.extend(compile(&rules, ret, action == Action::Notify).unwrap());
            let answer = run(&alone, data);
            if answer != SECCOMP_RET_ALLOW {
                return answer;
            }
        }
        SECCOMP_RET_ALLOW
    }

    #[test]
    fn one_filter_answers_every_call_as_a_filter_per_action_did() {
        let mut plans = Vec::new();
        for (net_off, notify_creation, broker) in [(true, true, true), (false, false, false)] {
            for record_denials in [false, true] {
                let mut plan = syscalls::plan(net_off, notify_creation, broker);
                plan.record_denials = record_denials;
                plans.push(plan.clone());
                plan.rules.extend(syscalls::metadata_rules());
                plans.push(plan);
            }
        }
        for plan in &plans {
            let one = program(plan).unwrap().unwrap();
            assert_eq!(
                one.notifies,
                plan.record_denials || plan.rules.iter().any(|r| r.action == Action::Notify)
            );
            let mut answers = std::collections::BTreeSet::new();
            for data in inputs(plan) {
                let answer = run(&one.program, &data);
                assert_eq!(
                    answer,
                    per_action(plan, &data),
                    "call {} (arch {:#x}) with {:x?}",
                    data.nr,
                    data.arch,
                    data.args
                );
                answers.insert(answer);
            }
            // Every group was reached, and some call was allowed.
            let enosys = SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
            let eperm = SECCOMP_RET_ERRNO | libc::EPERM as u32;
            for want in [SECCOMP_RET_ALLOW, enosys, SECCOMP_RET_USER_NOTIF] {
                if want != SECCOMP_RET_USER_NOTIF || one.notifies {
                    assert!(answers.contains(&want), "no call answered {want:#x}");
                }
            }
            assert_eq!(answers.contains(&eperm), !plan.record_denials);
        }
    }

    #[test]
    fn a_plan_without_rules_loads_no_filter() {
        assert!(program(&SeccompPlan::default()).unwrap().is_none());
    }

    #[test]
    fn notify_filter_returns_user_notif_not_trace() -> Result<(), SeccompError> {
        let plan = syscalls::plan(true, true, true);
        let rules: Vec<_> = plan
            .rules
            .iter()
            .filter(|r| r.action == Action::Notify)
            .collect();
        let prog = compile(&rules, SeccompAction::Trace(MARK), true)?;
        let rets: Vec<u32> = prog
            .iter()
            .filter(|i| i.code == (libc::BPF_RET | libc::BPF_K) as u16)
            .map(|i| i.k)
            .collect();
        assert!(rets.contains(&SECCOMP_RET_USER_NOTIF));
        assert!(!rets.contains(&(SECCOMP_RET_TRACE | MARK)));
        Ok(())
    }
}
