//! The seccomp filter as data: which syscalls (with which arguments) get
//! which action. `sandbox::linux::seccomp` compiles it; nothing is decided there.

use serde::{Deserialize, Serialize};

/// What happens to a matching syscall.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Fail with `EPERM`: the program sees "operation not permitted" and can degrade.
    Deny,
    /// Fail with `ENOSYS`: for calls whose arguments BPF cannot inspect
    /// (`clone3`, `openat2`); libc falls back to the inspectable variant.
    Unsupported,
    /// Ask the supervisor (seccomp user notification).
    Notify,
}

/// A comparison on one syscall argument (all must hold for the rule to match).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ArgCheck {
    /// `arg[index] == value`
    Eq { index: u8, value: u64 },
    /// `arg[index] != value`
    Ne { index: u8, value: u64 },
    /// `arg[index] & mask != 0`
    AnyBits { index: u8, mask: u64 },
    /// `arg[index] & mask == value`
    MaskedEq { index: u8, mask: u64, value: u64 },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyscallRule {
    /// The syscall name as in `<asm/unistd.h>` (`io_uring_setup`).
    pub name: String,
    pub action: Action,
    /// All must match; empty means always.
    pub when: Vec<ArgCheck>,
    /// Why, for `vetto doctor`/`policy explain` and reports.
    pub why: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeccompPlan {
    /// Rules; a syscall may have several (any matching rule applies, the
    /// strongest action wins: `Deny` > `Unsupported` > `Notify`).
    pub rules: Vec<SyscallRule>,
    /// Denied calls are notified and answered `EPERM` by the supervisor,
    /// which records each attempt (when seccomp user notification exists).
    #[serde(default)]
    pub record_denials: bool,
}

/// `ioctl` commands (type and number: the low 16 bits, any size or
/// direction) that make or remove a directory entry on their own: btrfs's
/// subvolume and snapshot calls (`<linux/btrfs.h>`: `SNAP_CREATE`,
/// `SUBVOL_CREATE`, `SNAP_DESTROY`, their `_V2`s). The kernel checks only
/// the directory's mode for them, not Landlock, and seccomp would not
/// notify them: refused, with every command of bcachefs's type (its
/// subvolume calls have had several numbers).
const SUBVOLUME_IOCTLS: &[(u64, u64)] = &[
    (0xffff, 0x9401),
    (0xffff, 0x940e),
    (0xffff, 0x940f),
    (0xffff, 0x9417),
    (0xffff, 0x9418),
    (0xffff, 0x943f),
    (0xff00, 0xbc00),
];

fn subvolume_ioctls() -> Vec<SyscallRule> {
    SUBVOLUME_IOCTLS
        .iter()
        .map(|&(mask, value)| {
            rule(
                "ioctl",
                Action::Deny,
                vec![ArgCheck::MaskedEq {
                    index: 1,
                    mask,
                    value,
                }],
                "a filesystem snapshot or subvolume is a directory entry Landlock never sees",
            )
        })
        .collect()
}

impl SeccompPlan {
    /// Whether every call that can add, remove or rename a directory
    /// entry is notified or refused, whatever its arguments: then a job
    /// whose supervisor was notified of none of them changed no directory
    /// listing (`session`'s check of what the job left behind relies on
    /// it). `bind` of a pathname unix socket is the one other way to make
    /// an entry, and a socket holds nothing git or a shell could run. A
    /// filesystem's own entry-making ioctls (btrfs snapshots) are refused.
    pub fn notifies_every_entry_change(&self) -> bool {
        let always = |name: &str| {
            self.rules
                .iter()
                .any(|r| r.name == name && r.when.is_empty())
        };
        let on_create = |name: &str, index: u8| {
            self.rules.iter().any(|r| {
                r.name == name
                    && (r.when.is_empty()
                        || matches!(r.when.as_slice(),
                            [ArgCheck::AnyBits { index: i, mask }]
                                if *i == index && mask & uapi::O_CREAT != 0))
            })
        };
        let subvolumes = subvolume_ioctls().iter().all(|s| {
            self.rules
                .iter()
                .any(|r| r.name == s.name && r.when == s.when)
        });
        CREATION.iter().all(|n| always(n))
            && ["openat2", "io_uring_setup"].iter().all(|n| always(n))
            && on_create("open", 1)
            && on_create("openat", 2)
            && subvolumes
    }
}

/// Constants from the Linux UAPI used by the rules below (same on every
/// architecture vetto supports).
mod uapi {
    pub const AF_UNIX: u64 = 1;
    pub const AF_NETLINK: u64 = 16;
    pub const AF_VSOCK: u64 = 40;
    pub const NETLINK_ROUTE: u64 = 0;
    pub const SOCK_DGRAM: u64 = 2;
    pub const SOCK_RAW: u64 = 3;
    pub const SOCK_TYPE_MASK: u64 = 0xf;
    pub const AF_INET: u64 = 2;
    pub const AF_INET6: u64 = 10;
    pub const IPPROTO_TCP: u64 = 6;
    pub const IPPROTO_UDP: u64 = 17;
    pub const SOCK_STREAM: u64 = 1;
    /// Every socket type but `SOCK_STREAM` (1) the kernel defines.
    pub const NOT_STREAM: [u64; 6] = [2, 3, 4, 5, 6, 10];
    pub const MSG_FASTOPEN: u64 = 0x2000_0000;
    pub const O_CREAT: u64 = 0o100;
    pub const O_ACCMODE: u64 = 0o3;
    pub const O_RDWR: u64 = 0o2;
    pub const O_WRONLY: u64 = 0o1;
    pub const O_NOCTTY: u64 = 0o400;
    pub const TIOCSTI: u64 = 0x5412;
    pub const TIOCLINUX: u64 = 0x541c;
    pub const TIOCGPTPEER: u64 = 0x5441;
    /// CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET.
    pub const CLONE_NEW_ANY: u64 = 0x7e02_0000;
    pub const CLONE_THREAD: u64 = 0x0001_0000;
    pub const RLIMIT_DATA: u64 = 2;
}

fn rule(name: &str, action: Action, when: Vec<ArgCheck>, why: &str) -> SyscallRule {
    SyscallRule {
        name: name.into(),
        action,
        when,
        why: why.into(),
    }
}

/// Calls no build or agent needs and every escape technique wants.
const DANGEROUS: &[(&str, &str)] = &[
    (
        "io_uring_setup",
        "io_uring bypasses seccomp for the operations it performs",
    ),
    (
        "io_uring_enter",
        "io_uring bypasses seccomp for the operations it performs",
    ),
    (
        "io_uring_register",
        "io_uring bypasses seccomp for the operations it performs",
    ),
    (
        "ptrace",
        "tracing another process reads its memory and secrets",
    ),
    ("process_vm_readv", "reads another process's memory"),
    ("process_vm_writev", "writes another process's memory"),
    (
        "unshare",
        "new namespaces can undo the sandbox's view of the system",
    ),
    (
        "setns",
        "joining namespaces can undo the sandbox's view of the system",
    ),
    ("mount", "mounts can reshape the filesystem view"),
    ("umount2", "mounts can reshape the filesystem view"),
    ("pivot_root", "mounts can reshape the filesystem view"),
    ("chroot", "a new root changes what paths mean"),
    ("move_mount", "mounts can reshape the filesystem view"),
    ("open_tree", "mounts can reshape the filesystem view"),
    ("fsopen", "mounts can reshape the filesystem view"),
    ("fsconfig", "mounts can reshape the filesystem view"),
    ("fsmount", "mounts can reshape the filesystem view"),
    ("fspick", "mounts can reshape the filesystem view"),
    ("mount_setattr", "mounts can reshape the filesystem view"),
    ("bpf", "eBPF is a large kernel attack surface"),
    (
        "perf_event_open",
        "perf events leak kernel and process information",
    ),
    ("userfaultfd", "a standard kernel-exploit primitive"),
    (
        "keyctl",
        "the kernel keyring can hold the user's credentials",
    ),
    (
        "add_key",
        "the kernel keyring can hold the user's credentials",
    ),
    (
        "request_key",
        "the kernel keyring can hold the user's credentials",
    ),
    ("init_module", "kernel modules"),
    ("finit_module", "kernel modules"),
    ("delete_module", "kernel modules"),
    ("kexec_load", "replacing the kernel"),
    ("kexec_file_load", "replacing the kernel"),
    ("acct", "process accounting is host configuration"),
    ("swapon", "swap is host configuration"),
    ("swapoff", "swap is host configuration"),
    ("reboot", "host power state"),
    ("syslog", "the kernel log leaks addresses"),
    ("quotactl", "quota is host configuration"),
    ("name_to_handle_at", "file handles bypass path-based rules"),
    ("open_by_handle_at", "file handles bypass path-based rules"),
    ("uselib", "obsolete loader interface"),
    ("vhangup", "hangs up the controlling terminal"),
];

/// The `'static` spelling of a call name this module uses (for events).
pub fn static_name(name: &str) -> Option<&'static str> {
    const OTHERS: [&str; 12] = [
        "socket",
        "listen",
        "bind",
        "socketpair",
        "sendto",
        "sendmsg",
        "sendmmsg",
        "clone",
        "ioctl",
        "connect",
        "setrlimit",
        "prlimit64",
    ];
    DANGEROUS
        .iter()
        .map(|(n, _)| *n)
        .chain(OTHERS)
        .chain(CREATION.iter().copied())
        .chain(METADATA.iter().copied())
        .find(|n| *n == name)
}

/// Syscalls that create, remove or rename directory entries: notified so
/// the supervisor can emulate them in carved directories (`link*` and
/// `mknod*` only so that it refuses a nested `.git`).
const CREATION: &[&str] = &[
    "creat",
    "mkdir",
    "mkdirat",
    "rename",
    "renameat",
    "renameat2",
    "unlink",
    "unlinkat",
    "rmdir",
    "symlink",
    "symlinkat",
    "link",
    "linkat",
    "mknod",
    "mknodat",
];

/// Calls that change a file's mode, owner or times. Landlock (up to ABI 7)
/// does not restrict them, so at FS-ONLY a job could `chmod 0666
/// ~/.bashrc`, a file it may only read: each is notified and performed by
/// the supervisor on its own descriptor of the target, only where the
/// policy makes the target writable (`NotifyPlan::metadata`).
pub const METADATA: &[&str] = &[
    "chmod",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "chown",
    "fchown",
    "lchown",
    "fchownat",
    "utime",
    "utimes",
    "futimesat",
    "utimensat",
];

/// `bind()` goes to the supervisor, which records a pathname unix
/// socket's where the policy allows no writing (the kernel decides).
pub fn unix_bind_rule() -> SyscallRule {
    rule(
        "bind",
        Action::Notify,
        vec![],
        "a pathname unix socket's bind makes an entry: one the policy refuses is recorded",
    )
}

/// Mode, owner and time changes go to the supervisor (see [`METADATA`]).
pub fn metadata_rules() -> Vec<SyscallRule> {
    METADATA
        .iter()
        .map(|name| {
            rule(
                name,
                Action::Notify,
                vec![],
                "Landlock does not restrict mode, owner or time changes: the supervisor performs them where the policy allows writing",
            )
        })
        .collect()
}

/// The slave of a pseudo-terminal the job created goes to the supervisor,
/// which opens it where Landlock grants no slave (the host's shared
/// `/dev/pts`, FS-ONLY): `ioctl(master, TIOCGPTPEER)` (glibc's `openpty`),
/// and `open*("/dev/pts/N", O_RDWR | O_NOCTTY)` after `ptsname()` (Go's
/// `creack/pty`). Other ioctls are not notified, and only opens that are
/// read-write *and* `O_NOCTTY`: GNU tools pass `O_NOCTTY` on ordinary
/// opens, but read-only (`cat`, `fts`) or write-only (`cp`, `touch`).
pub fn pty_rules() -> Vec<SyscallRule> {
    use uapi::*;
    const WHY: &str = "the slave of a pseudo-terminal the job created is opened by the supervisor";
    let mut rules = vec![rule(
        "ioctl",
        Action::Notify,
        vec![ArgCheck::Eq {
            index: 1,
            value: TIOCGPTPEER,
        }],
        WHY,
    )];
    for (name, index) in [("open", 1), ("openat", 2)] {
        rules.push(rule(
            name,
            Action::Notify,
            vec![ArgCheck::MaskedEq {
                index,
                mask: O_ACCMODE | O_NOCTTY,
                value: O_RDWR | O_NOCTTY,
            }],
            WHY,
        ));
    }
    rules
}

/// `--max-memory` shared out over the tree (`plan::memory`): the job
/// cannot set its own `RLIMIT_DATA` (the supervisor sets the soft limit
/// of each process), and every new process (a `clone` that is not a
/// thread, `fork`, `vfork`) is notified so that the supervisor splits
/// the parent's share before the child inherits it. Threads share their
/// process's limit and are not notified.
pub fn memory_shares() -> Vec<SyscallRule> {
    use uapi::*;
    let locked = "the supervisor shares --max-memory out as each process's RLIMIT_DATA";
    let split = "a new process inherits its parent's RLIMIT_DATA: the supervisor splits it first";
    vec![
        rule(
            "setrlimit",
            Action::Deny,
            vec![ArgCheck::Eq {
                index: 0,
                value: RLIMIT_DATA,
            }],
            locked,
        ),
        rule(
            "prlimit64",
            Action::Deny,
            vec![
                ArgCheck::Eq {
                    index: 1,
                    value: RLIMIT_DATA,
                },
                ArgCheck::Ne { index: 2, value: 0 },
            ],
            locked,
        ),
        rule(
            "clone",
            Action::Notify,
            vec![ArgCheck::MaskedEq {
                index: 0,
                mask: CLONE_THREAD,
                value: 0,
            }],
            split,
        ),
        rule("fork", Action::Notify, vec![], split),
        rule("vfork", Action::Notify, vec![], split),
    ]
}

/// `socket()`'s (and `socketpair()`'s) family, argument 0, is `family`.
fn family_is(family: u64) -> ArgCheck {
    ArgCheck::Eq {
        index: 0,
        value: family,
    }
}

/// `socket()`'s type, argument 1, is `kind` whatever its flags
/// (`SOCK_NONBLOCK`, `SOCK_CLOEXEC`).
fn type_is(kind: u64) -> ArgCheck {
    ArgCheck::MaskedEq {
        index: 1,
        mask: uapi::SOCK_TYPE_MASK,
        value: kind,
    }
}

/// `socket()` refused for every family but unix, route netlink (for
/// interface listing) and `inet`: the families a plan lets through.
fn socket_families(inet: &[u64], why: &str, netlink_why: &str) -> Vec<SyscallRule> {
    use uapi::*;
    let mut others = vec![
        ArgCheck::Ne {
            index: 0,
            value: AF_UNIX,
        },
        ArgCheck::Ne {
            index: 0,
            value: AF_NETLINK,
        },
    ];
    others.extend(inet.iter().map(|&value| ArgCheck::Ne { index: 0, value }));
    vec![
        rule("socket", Action::Deny, others, why),
        rule(
            "socket",
            Action::Deny,
            vec![
                family_is(AF_NETLINK),
                ArgCheck::Ne {
                    index: 2,
                    value: NETLINK_ROUTE,
                },
            ],
            netlink_why,
        ),
    ]
}

/// FULL without `--net host`: the network namespace is the wall, but
/// `AF_VSOCK` does not go through it — a vsock socket reaches the
/// hypervisor's host (CID 2) and other VMs from any namespace. Refused at
/// `socket()`. (Below FULL the family lists already refuse it.)
pub fn vsock_off() -> Vec<SyscallRule> {
    vec![rule(
        "socket",
        Action::Deny,
        vec![family_is(uapi::AF_VSOCK)],
        "vsock reaches the hypervisor's host past the network namespace",
    )]
}

/// Filtered egress without a namespace (FS-ONLY): the job may create TCP
/// internet sockets (each `connect()` is notified and decided by the
/// supervisor) and nothing else that reaches a network: no raw, packet or
/// other families, no TCP variant whose protocol the proxy does not speak
/// (SCTP), and no `MSG_FASTOPEN`, which connects from `sendto`/`sendmsg`
/// without a `connect()`. UDP sockets (protocol 0 or UDP; not ICMP ping
/// sockets nor UDP-Lite) are refused too, unless `udp_dead_net`: then
/// their `socket()` is notified and the supervisor answers with a socket
/// made in a network namespace that leads nowhere
/// (`NotifyPlan::udp_dead_net`), and so is a TCP socket's
/// (`NotifyPlan::tcp_dead_net`): the proxy listens in that namespace, and
/// the job's own servers bind and listen on its loopback (`bind()`
/// notified, as Landlock refuses it to the job), where nothing outside
/// can reach them (issue P11).
pub fn tcp_only(udp_dead_net: bool) -> Vec<SyscallRule> {
    use uapi::*;
    let mut rules = socket_families(
        &[AF_INET, AF_INET6],
        "filtered egress: only TCP reaches the proxy",
        "filtered egress (only route netlink, for interface listing)",
    );
    for family in [AF_INET, AF_INET6] {
        for kind in NOT_STREAM {
            if udp_dead_net && kind == SOCK_DGRAM {
                continue;
            }
            rules.push(rule(
                "socket",
                Action::Deny,
                vec![family_is(family), type_is(kind)],
                if udp_dead_net {
                    "filtered egress: raw and packet sockets are refused; only TCP reaches the proxy"
                } else {
                    "filtered egress: UDP (DNS included) and raw sockets are refused; only TCP reaches the proxy"
                },
            ));
        }
        let mut other_protocol = vec![
            family_is(family),
            ArgCheck::Ne { index: 2, value: 0 },
            ArgCheck::Ne {
                index: 2,
                value: IPPROTO_TCP,
            },
        ];
        if udp_dead_net {
            other_protocol.push(ArgCheck::Ne {
                index: 2,
                value: IPPROTO_UDP,
            });
        }
        rules.push(rule(
            "socket",
            Action::Deny,
            other_protocol,
            "filtered egress: protocols other than TCP (SCTP, MPTCP, ICMP) are refused",
        ));
        if udp_dead_net {
            for (kind, protocol) in [(SOCK_STREAM, IPPROTO_UDP), (SOCK_DGRAM, IPPROTO_TCP)] {
                rules.push(rule(
                    "socket",
                    Action::Deny,
                    vec![
                        family_is(family),
                        type_is(kind),
                        ArgCheck::Eq {
                            index: 2,
                            value: protocol,
                        },
                    ],
                    "filtered egress: a socket type with another type's protocol",
                ));
            }
            rules.push(rule(
                "socket",
                Action::Notify,
                vec![family_is(family), type_is(SOCK_DGRAM)],
                "filtered egress: a UDP socket is made by vetto in a network namespace that leads nowhere",
            ));
            rules.push(rule(
                "socket",
                Action::Notify,
                vec![family_is(family), type_is(SOCK_STREAM)],
                "filtered egress: a TCP socket is made by vetto in a network namespace that leads nowhere, where the proxy listens",
            ));
        }
    }
    if udp_dead_net {
        rules.push(rule(
            "bind",
            Action::Notify,
            vec![],
            "a TCP socket of the namespace that leads nowhere is bound by the supervisor (Landlock refuses the job's)",
        ));
    }
    for (name, index) in [("sendto", 3), ("sendmsg", 2), ("sendmmsg", 3)] {
        rules.push(rule(
            name,
            Action::Deny,
            vec![ArgCheck::AnyBits {
                index,
                mask: MSG_FASTOPEN,
            }],
            "TCP fast open connects without connect(), past the supervisor",
        ));
    }
    // Landlock refuses bind(); listen() on an unbound socket binds it
    // itself, to every interface of the host. The socket's family and
    // address are no argument BPF can read: the supervisor decides
    // (`NotifyPlan::listen`).
    rules.push(rule(
        "listen",
        Action::Notify,
        vec![],
        "listen() on an unbound socket binds it to every interface, past Landlock's bind() rule",
    ));
    rules
}

/// The network off without a namespace of the job's own (FS-ONLY), where
/// vetto can make a network namespace that leads nowhere
/// (`NotifyPlan::udp_dead_net`, `tcp_dead_net`): as the network-off
/// families, except that an internet UDP socket (protocol 0 or UDP) or TCP
/// socket (protocol 0 or TCP) is notified and answered with a socket made
/// there: a DNS stub that refuses every name, and the job's own loopback
/// (its test servers) but no other. `bind()` is notified: Landlock refuses
/// TCP binds to the job, and the supervisor performs those on a socket of
/// that namespace. Every other internet socket (raw, ICMP ping, UDP-Lite,
/// SCTP, MPTCP …) is refused.
pub fn off_but_dead_net() -> Vec<SyscallRule> {
    use uapi::*;
    const WHY: &str = "the network is off: only UDP and TCP sockets, made by vetto in a network namespace that leads nowhere";
    let mut rules = socket_families(
        &[AF_INET, AF_INET6],
        "the network is off",
        "the network is off (only route netlink, for interface listing)",
    );
    for family in [AF_INET, AF_INET6] {
        // Every type value the mask leaves but UDP's and TCP's, not only
        // the types Linux has now: what the filter does not name it lets
        // through.
        for kind in 0..=SOCK_TYPE_MASK {
            if kind != SOCK_DGRAM && kind != SOCK_STREAM {
                rules.push(rule(
                    "socket",
                    Action::Deny,
                    vec![family_is(family), type_is(kind)],
                    WHY,
                ));
            }
        }
        for (kind, protocol) in [(SOCK_DGRAM, IPPROTO_UDP), (SOCK_STREAM, IPPROTO_TCP)] {
            rules.push(rule(
                "socket",
                Action::Deny,
                vec![
                    family_is(family),
                    type_is(kind),
                    ArgCheck::Ne { index: 2, value: 0 },
                    ArgCheck::Ne {
                        index: 2,
                        value: protocol,
                    },
                ],
                WHY,
            ));
            rules.push(rule(
                "socket",
                Action::Notify,
                vec![family_is(family), type_is(kind)],
                "the network is off: the socket is made by vetto in a network namespace that leads nowhere",
            ));
        }
    }
    rules.push(rule(
        "bind",
        Action::Notify,
        vec![],
        "a TCP socket of the namespace that leads nowhere is bound by the supervisor (Landlock refuses the job's)",
    ));
    rules
}

/// The filter for a plan: dangerous calls always; socket families when the
/// network is off; notifications for what the supervisor decides.
pub fn plan(net_off: bool, notify_creation: bool, broker_unix_connect: bool) -> SeccompPlan {
    use uapi::*;
    let mut rules: Vec<SyscallRule> = DANGEROUS
        .iter()
        .map(|(name, why)| rule(name, Action::Deny, vec![], why))
        .collect();
    rules.push(rule(
        "clone",
        Action::Deny,
        vec![ArgCheck::AnyBits {
            index: 0,
            mask: CLONE_NEW_ANY,
        }],
        "new namespaces can undo the sandbox's view of the system",
    ));
    rules.push(rule(
        "clone3",
        Action::Unsupported,
        vec![],
        "its flags live in memory BPF cannot read; libc falls back to clone",
    ));
    rules.push(rule(
        "openat2",
        Action::Unsupported,
        vec![],
        "its flags live in memory BPF cannot read; libc falls back to openat",
    ));
    for cmd in [TIOCSTI, TIOCLINUX] {
        rules.push(rule(
            "ioctl",
            Action::Deny,
            vec![ArgCheck::Eq {
                index: 1,
                value: cmd,
            }],
            "injects keystrokes into the terminal outside the sandbox",
        ));
    }
    rules.extend(subvolume_ioctls());
    if net_off {
        rules.extend(socket_families(
            &[],
            "the network is off",
            "the network is off (only route netlink, for interface listing)",
        ));
    }
    if broker_unix_connect {
        // A datagram sendto() names a socket path without connect(), past
        // the broker; socketpair() makes one too. The kernel turns an
        // AF_UNIX SOCK_RAW into a SOCK_DGRAM (`unix_create`), so both types.
        for name in ["socket", "socketpair"] {
            for kind in [SOCK_DGRAM, SOCK_RAW] {
                rules.push(rule(
                    name,
                    Action::Deny,
                    vec![family_is(AF_UNIX), type_is(kind)],
                    "unix datagrams name a socket path without connect(), past the broker",
                ));
            }
        }
        rules.push(rule(
            "connect",
            Action::Notify,
            vec![],
            "pathname unix sockets are brokered by the supervisor",
        ));
    }
    if notify_creation {
        for (name, index) in [("open", 1), ("openat", 2)] {
            rules.push(rule(
                name,
                Action::Notify,
                vec![ArgCheck::AnyBits {
                    index,
                    mask: O_CREAT | O_WRONLY | O_RDWR,
                }],
                "creation in carved directories is performed by the supervisor, \
                 and a file it made there is opened for writing again by it \
                 (no Landlock rule can name a file made after the domain)",
            ));
        }
        for name in CREATION {
            rules.push(rule(
                name,
                Action::Notify,
                vec![],
                "creation in carved directories is performed by the supervisor",
            ));
        }
    }
    SeccompPlan {
        rules,
        record_denials: false,
    }
}
