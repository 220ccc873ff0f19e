//! The network calls the server answers: `connect` (routed to the proxy,
//! a dead namespace, a refusal or the kernel), `listen` and the sockets
//! of vetto's network namespace that leads nowhere, decided on copies of
//! the job's addresses and performed on the server's own descriptors.

use super::*;
use crate::plan::notify::connect::{self, ConnectPlan, Domain, Network, SocketFacts, Verdict};

impl Shared {
    /// `listen(fd, backlog)` under filtered egress without a namespace
    /// (FS-ONLY). Landlock refuses `bind()`, but `listen()` on an unbound
    /// internet socket binds it itself, to `0.0.0.0`/`[::]`: a server the
    /// host's whole network can reach. Both arguments are registers; the
    /// supervisor takes the job's socket (the same open file description)
    /// and decides on its own copy: a unix socket, or an internet socket
    /// bound to a loopback address, is made to listen by the supervisor on
    /// that copy — so a socket the job swaps in under the same number after
    /// the check is never the one that listens. Anything else is refused
    /// with `EACCES` (as Landlock refuses `bind()`) and recorded with the
    /// process.
    pub(super) fn listen(&self, n: &Notif) -> Answer {
        let refuse = Answer::Errno(c::EACCES, Decision::Denied(c::EACCES), Reason::Forbidden);
        let Ok(target) = i32::try_from(n.args[0] as u32) else {
            return Answer::Errno(c::EBADF, Decision::Emulated, Reason::NotHandled);
        };
        let backlog = nix::sys::socket::Backlog::new(n.args[1] as u32 as i32)
            .unwrap_or(nix::sys::socket::Backlog::MAXCONN);
        let Ok(pidfd) = sys::pidfd_open_thread(n.tid) else {
            return self.stale_or(n, refuse);
        };
        let sock = match sys::pidfd_getfd(pidfd.as_fd(), target) {
            Ok(fd) => fd,
            // Not a descriptor of the job's: the kernel's own answer.
            Err(e) if e.raw_os_error() == Some(c::EBADF) => {
                return self.stale_or(
                    n,
                    Answer::Errno(c::EBADF, Decision::Emulated, Reason::NotHandled),
                );
            }
            Err(_) => return self.stale_or(n, refuse),
        };
        // The thread was alive and blocked in this call throughout: the
        // descriptor is the one it passed.
        if !self.listener.id_valid(n.id) {
            return Answer::Drop;
        }
        let allowed = match sys::socket_domain(sock.as_fd()) {
            Ok(libc::AF_UNIX) => true,
            // Made in the namespace that leads nowhere: whatever it is
            // bound to (every interface, when unbound) is that
            // namespace's, reachable from the job's own sockets only.
            Ok(libc::AF_INET | libc::AF_INET6)
                if self.tcp_dead_net
                    && self
                        .egress
                        .as_ref()
                        .is_some_and(|e| e.is_dead_net(sock.as_fd())) =>
            {
                true
            }
            Ok(libc::AF_INET | libc::AF_INET6) => sys::local_inet_addr(sock.as_fd())
                .is_ok_and(|local| local.port() != 0 && local.ip().to_canonical().is_loopback()),
            // Not a socket: the kernel's own answer.
            Err(e) if e.raw_os_error() == Some(c::ENOTSOCK) => {
                return Answer::Errno(c::ENOTSOCK, Decision::Emulated, Reason::NotHandled);
            }
            _ => false,
        };
        if !allowed {
            return refuse;
        }
        match nix::sys::socket::listen(&sock, backlog) {
            Ok(()) => Answer::Value(0, Reason::NotHandled),
            Err(e) => Answer::Errno(e as i32, Decision::Emulated, Reason::NotHandled),
        }
    }

    /// `socket(AF_INET or AF_INET6, SOCK_DGRAM, 0 or IPPROTO_UDP)` at
    /// FS-ONLY (and with the network off `SOCK_STREAM, 0 or IPPROTO_TCP`
    /// too, `tcp_dead_net`): answered with a socket the egress broker made
    /// in its namespace with only loopback, where every destination is
    /// local and vetto's DNS stub listens on port 53. The arguments are
    /// registers: nothing the job can still change is read. `None`: not
    /// such a socket, or no such namespace: refused (EPERM, recorded) as
    /// the filter refuses every other.
    pub(super) fn dead_net_socket(&self, n: &Notif) -> Option<Answer> {
        let (domain, kind, protocol) = (
            n.args[0] as u32 as i32,
            n.args[1] as u32 as i32,
            n.args[2] as u32 as i32,
        );
        let v6 = match domain {
            libc::AF_INET => false,
            libc::AF_INET6 => true,
            _ => return None,
        };
        let flags = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
        let stream = match (kind & !flags, protocol) {
            (libc::SOCK_DGRAM, 0 | libc::IPPROTO_UDP) => false,
            (libc::SOCK_STREAM, 0 | libc::IPPROTO_TCP) if self.tcp_dead_net => true,
            _ => return None,
        };
        let egress = self.egress.as_ref()?;
        let process = self.describe(n.tid);
        if !self.listener.id_valid(n.id) {
            return Some(Answer::Drop);
        }
        let fd = match egress.dead_net_socket(v6, stream, process)? {
            Ok(fd) => fd,
            Err(e) => {
                return Some(Answer::Errno(
                    sys::errno_of(&e),
                    Decision::Emulated,
                    Reason::DeadNet,
                ));
            }
        };
        // O_NONBLOCK lives on the open file description the job shares.
        if kind & libc::SOCK_NONBLOCK != 0
            && let Err(e) = sys::set_nonblocking(fd.as_fd())
        {
            return Some(Answer::Errno(
                sys::errno_of(&e),
                Decision::Emulated,
                Reason::DeadNet,
            ));
        }
        Some(Answer::Fd {
            fd,
            cloexec: kind & libc::SOCK_CLOEXEC != 0,
            reason: Reason::DeadNet,
            undo: None,
        })
    }

    /// `bind()` with the network off at FS-ONLY (`tcp_dead_net`): on a
    /// socket of the namespace that leads nowhere, performed here on our
    /// copy of it with the address as copied once — any address there is
    /// that namespace's, so there is nothing to decide, and Landlock (which
    /// refuses TCP binds to the job) does not hold the supervisor. Any
    /// other socket: the kernel decides, under the job's own Landlock
    /// domain, as if nothing had been notified.
    /// `bind()`: a TCP socket of the namespace that leads nowhere is
    /// bound here (`dead_net_bind`); a pathname unix socket's is the
    /// kernel's to decide, and recorded where the policy allows no
    /// writing (a fixed path in the shared /tmp at FS-ONLY), as a
    /// creation there would be; anything else is the kernel's.
    pub(super) fn bind(&self, n: &Notified) -> (Answer, Option<PathBuf>) {
        let pass = || (Answer::Continue(Reason::NotHandled), None);
        if self.tcp_dead_net {
            let answer = self.dead_net_bind(n);
            if !matches!(answer, Answer::Continue(Reason::NotHandled)) {
                return (answer, None);
            }
        }
        if !self.unix_bind {
            return pass();
        }
        let len = n.args[2] as u32 as usize;
        if len <= SUN_PATH_OFFSET || len > SOCKADDR_MAX {
            return pass();
        }
        let mut addr = [0u8; SOCKADDR_MAX];
        match sys::read_remote(n.tid, n.args[1], &mut addr[..len]) {
            Ok(got) if got == len => {}
            _ => return pass(),
        }
        let SockAddr::Path(path) = classify(&addr[..len]) else {
            return pass();
        };
        let Ok(path) = CString::new(path) else {
            return pass();
        };
        self.judge_outside(
            n,
            c::AT_FDCWD,
            &path,
            Answer::Continue(Reason::NotCarved),
            false,
        )
    }

    pub(super) fn dead_net_bind(&self, n: &Notif) -> Answer {
        let einval = Answer::Errno(c::EINVAL, Decision::Emulated, Reason::DeadNet);
        let Ok(target) = i32::try_from(n.args[0] as u32) else {
            return Answer::Errno(c::EBADF, Decision::Emulated, Reason::NotHandled);
        };
        let len = n.args[2] as u32 as usize;
        if len > SOCKADDR_MAX {
            return einval;
        }
        let Ok(pidfd) = sys::pidfd_open_thread(n.tid) else {
            return self.stale_or(n, Answer::Continue(Reason::NotHandled));
        };
        let sock = match sys::pidfd_getfd(pidfd.as_fd(), target) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(c::EBADF) => {
                return self.stale_or(
                    n,
                    Answer::Errno(c::EBADF, Decision::Emulated, Reason::NotHandled),
                );
            }
            Err(_) => return self.stale_or(n, Answer::Continue(Reason::NotHandled)),
        };
        let ours = matches!(
            sys::socket_domain(sock.as_fd()),
            Ok(libc::AF_INET | libc::AF_INET6)
        ) && self
            .egress
            .as_ref()
            .is_some_and(|e| e.is_dead_net(sock.as_fd()));
        if !ours {
            return self.stale_or(n, Answer::Continue(Reason::NotHandled));
        }
        let mut addr = [0u8; SOCKADDR_MAX];
        match sys::read_remote(n.tid, n.args[1], &mut addr[..len]) {
            Ok(got) if got == len => {}
            _ => {
                return self.stale_or(
                    n,
                    Answer::Errno(c::EFAULT, Decision::Emulated, Reason::DeadNet),
                );
            }
        }
        // The thread was alive and blocked in this call through the reads:
        // the descriptor and the bytes are the ones it passed.
        if !self.listener.id_valid(n.id) {
            return Answer::Drop;
        }
        match sys::bind_raw(sock.as_fd(), &addr[..len]) {
            Ok(()) => Answer::Value(0, Reason::DeadNet),
            Err(e) => Answer::Errno(sys::errno_of(&e), Decision::Emulated, Reason::DeadNet),
        }
    }

    /// Decide a `connect()`. `Ok`: perform this connect; `Err`: answer.
    pub(super) fn connect(
        &self,
        n: &Notif,
    ) -> (Result<(Connect, OwnedFd), Answer>, Option<PathBuf>) {
        let sockfd = n.args[0] as u32 as i32;
        let addr_ptr = n.args[1];
        let len = n.args[2] as u32 as i32;
        let denied = |errno, reason| Answer::Errno(errno, Decision::Denied(errno), reason);
        if len < 0 || len as usize > SOCKADDR_MAX {
            return (
                Err(Answer::Errno(
                    c::EINVAL,
                    Decision::Emulated,
                    Reason::SocketNoName,
                )),
                None,
            );
        }
        let len = len as usize;
        let mut addr = [0u8; SOCKADDR_MAX];
        if len > 0 {
            match sys::read_remote(n.tid, addr_ptr, &mut addr[..len]) {
                Ok(got) if got == len => {}
                Ok(_) => {
                    return (
                        Err(Answer::Errno(
                            c::EFAULT,
                            Decision::Emulated,
                            Reason::SocketNoName,
                        )),
                        None,
                    );
                }
                Err(e) if sys::errno_of(&e) == c::EPERM || sys::errno_of(&e) == c::EACCES => {
                    return (Err(denied(c::EPERM, Reason::Unreadable)), None);
                }
                Err(e) if sys::errno_of(&e) == c::ESRCH => {
                    return (
                        Err(self.stale_or(n, denied(c::EPERM, Reason::Unreadable))),
                        None,
                    );
                }
                Err(_) => {
                    return (
                        Err(Answer::Errno(
                            c::EFAULT,
                            Decision::Emulated,
                            Reason::SocketNoName,
                        )),
                        None,
                    );
                }
            }
        }
        // With the network off, an internet address the job may not reach
        // is refused on this one copy of its bytes, and never performed;
        // with filtered egress, the proxy decides on the same copy.
        let to = inet_addr(&addr[..len]);
        let plan = self.connect_plan();
        let by = match connect::by_address(&plan, to) {
            Ok(by) => by,
            Err(refused) => return (Err(refusal(refused)), None),
        };
        let kind = classify(&addr[..len]);
        // A unix address longer than `sockaddr_un` is one the kernel refuses
        // (EINVAL): vetto, which connects its own resolved copy, must too.
        if kind != SockAddr::Other && len > SOCKADDR_UN_LEN {
            return (
                Err(Answer::Errno(
                    c::EINVAL,
                    Decision::Emulated,
                    Reason::SocketNoName,
                )),
                None,
            );
        }
        let shown = match &kind {
            SockAddr::Path(p) => Some(PathBuf::from(std::ffi::OsStr::from_bytes(p))),
            SockAddr::Abstract(name) => {
                let mut s = b"@".to_vec();
                s.extend_from_slice(name);
                Some(PathBuf::from(std::ffi::OsStr::from_bytes(&s)))
            }
            SockAddr::Other => None,
        };
        // Open the socket path relative to the job's cwd before the
        // validity check, so that one check covers every remote look-up.
        // Absolute socket paths resolve from the job's root, relative ones
        // from its cwd: what the path means to the job.
        let cwd = match &kind {
            SockAddr::Path(p) => {
                let what = if p.first() == Some(&b'/') {
                    "root"
                } else {
                    "cwd"
                };
                match sys::open_proc_dir(n.tid, what) {
                    Ok(fd) => Some(fd),
                    Err(_) => return (Err(denied(c::EPERM, Reason::Unreadable)), shown),
                }
            }
            _ => None,
        };
        let pidfd = match sys::pidfd_open_thread(n.tid) {
            Ok(fd) => fd,
            Err(_) => {
                return (
                    Err(self.stale_or(n, denied(c::EPERM, Reason::Unreadable))),
                    shown,
                );
            }
        };
        let sock = match sys::pidfd_getfd(pidfd.as_fd(), sockfd) {
            Ok(s) => s,
            Err(e) => {
                let errno = sys::errno_of(&e);
                let answer = if !self.listener.id_valid(n.id) {
                    Answer::Drop
                } else if errno == c::EBADF {
                    Answer::Errno(c::EBADF, Decision::Emulated, Reason::SocketNoName)
                } else {
                    denied(c::EPERM, Reason::Unreadable)
                };
                return (Err(answer), shown);
            }
        };
        // The thread was alive and blocked in this call through the memory
        // read, the cwd look-up and pidfd_open: all were about it.
        if !self.listener.id_valid(n.id) {
            return (Err(Answer::Drop), shown);
        }
        let domain = match sys::socket_domain(sock.as_fd()) {
            Ok(c::AF_UNIX) => Domain::Unix,
            Ok(c::AF_INET) => Domain::Inet,
            Ok(c::AF_INET6) => Domain::Inet6,
            Ok(_) => Domain::Other,
            Err(e) => {
                return (
                    Err(Answer::Errno(
                        sys::errno_of(&e),
                        Decision::Emulated,
                        Reason::SocketNoName,
                    )),
                    shown,
                );
            }
        };
        // Decided on the socket itself (our copy of it), not on a number
        // the job can re-point.
        let socket = SocketFacts {
            domain,
            stream: matches!(sys::socket_type(sock.as_fd()), Ok(t) if t == libc::SOCK_STREAM),
            dead_net: self.udp_dead_net
                && matches!(domain, Domain::Inet | Domain::Inet6)
                && self
                    .egress
                    .as_ref()
                    .is_some_and(|e| e.is_dead_net(sock.as_fd())),
        };
        let tables = TcpTables {
            shared: self,
            tid: n.tid,
        };
        let connect = match connect::by_socket(&plan, to, by, socket, &tables) {
            Verdict::Redirect { to, via } => Connect::Redirect { to, via },
            Verdict::Named(to) => Connect::Named { addr, len, to },
            Verdict::AsAsked(reason) => Connect::Raw(addr, len, reason),
            Verdict::Unix => match kind {
                SockAddr::Other => Connect::Raw(addr, len, Reason::SocketNoName),
                SockAddr::Abstract(name) => {
                    // CONTINUE would let the job rewrite the address into a
                    // path after this check, and a connect of ours skips
                    // Landlock's abstract-socket scoping: so reproduce the
                    // scoping here (the listener must belong to the job).
                    match abstract_owner(n.tid, &name) {
                        Owner::Job => Connect::Raw(addr, len, Reason::SocketAbstract),
                        Owner::Nobody => {
                            return (
                                Err(Answer::Errno(
                                    c::ECONNREFUSED,
                                    Decision::Emulated,
                                    Reason::SocketAbstract,
                                )),
                                shown,
                            );
                        }
                        // Audit: what would be refused is performed, and named.
                        Owner::Outside if self.audit => Connect::Raw(addr, len, Reason::WouldDeny),
                        Owner::Outside => {
                            return (Err(denied(c::EACCES, Reason::SocketAbstract)), shown);
                        }
                    }
                }
                SockAddr::Path(p) => match self.check_socket_path(cwd, &p) {
                    Ok((target, reason)) => Connect::Checked(target, reason),
                    Err(answer) => return (Err(answer), shown),
                },
            },
            refused => return (Err(refusal(refused)), shown),
        };
        (Ok((connect, sock)), shown)
    }

    /// What the plan says about connects, for `plan::notify::connect`.
    fn connect_plan(&self) -> ConnectPlan<'_> {
        ConnectPlan {
            mode: self.net_connect,
            audit: self.audit,
            udp_dead_net: self.udp_dead_net,
            tcp_dead_net: self.tcp_dead_net,
            egress: self.egress.as_deref(),
        }
    }

    pub(super) fn check_socket_path(
        &self,
        base: Option<OwnedFd>,
        path: &[u8],
    ) -> Result<(OwnedFd, Reason), Answer> {
        let denied = |errno, reason| Answer::Errno(errno, Decision::Denied(errno), reason);
        let c_path = sys::cstring(path).map_err(|_| denied(c::EACCES, Reason::SocketOutside))?;
        let Some(base) = base else {
            return Err(denied(c::EACCES, Reason::SocketOutside));
        };
        // An absolute path starts at the job's root and stays in it.
        let in_root = if path.first() == Some(&b'/') {
            resolve::IN_ROOT
        } else {
            0
        };
        // Follow symlinks as the kernel would; decide on what was reached.
        let target = sys::openat2(
            base.as_fd(),
            &c_path,
            c::O_PATH,
            0,
            resolve::NO_MAGICLINKS | in_root,
        )
        .map_err(|e| {
            let errno = sys::errno_of(&e);
            // At FULL a host socket outside the job's view is simply not
            // there for the job; it still asked for it, so name it. The
            // job's answer stays what its view says.
            if errno == c::ENOENT && in_root != 0 && host_socket_at(&c_path) {
                denied(errno, Reason::SocketOutside)
            } else {
                Answer::Errno(errno, Decision::Emulated, Reason::SocketOutside)
            }
        })?;
        let facts = sys::facts(target.as_fd()).map_err(|e| {
            Answer::Errno(sys::errno_of(&e), Decision::Emulated, Reason::SocketOutside)
        })?;
        if !facts.is_socket() {
            return Err(Answer::Errno(
                c::ECONNREFUSED,
                Decision::Emulated,
                Reason::SocketOutside,
            ));
        }
        let real =
            sys::fd_path(target.as_fd()).map_err(|_| denied(c::EACCES, Reason::SocketOutside))?;
        if !self.unix_sockets.contains(&(facts.dev, facts.ino)) && !self.socket_allowed(&real) {
            // Audit: connect anyway, and name it.
            if self.audit {
                return Ok((target, Reason::WouldDeny));
            }
            return Err(denied(c::EACCES, Reason::SocketOutside));
        }
        Ok((target, Reason::SocketAllowed))
    }

    /// Whether `real`, the resolved path of a socket inode, lies where the
    /// policy's filesystem rules allow sockets (writable).
    pub(super) fn socket_allowed(&self, real: &Path) -> bool {
        if !real.is_absolute() || real.as_os_str().as_bytes().ends_with(b" (deleted)") {
            return false;
        }
        let rules = self.resolved_rules().iter().map(|(p, a)| (p.as_path(), *a));
        writable(rules, real)
    }

    /// Connect the job's socket (our copy) and answer. A blocking socket
    /// may wait long (a full backlog, a slow TCP handshake): that wait
    /// happens in a thread of its own so the workers keep answering.
    pub(super) fn perform_connect(
        self: &Arc<Self>,
        n: Notif,
        connect: Connect,
        sock: OwnedFd,
        path: Option<PathBuf>,
        events: &Sender<NotifyEvent>,
    ) {
        let reason = match connect {
            Connect::Checked(_, reason) | Connect::Raw(_, _, reason) => reason,
            Connect::Redirect { .. } => Reason::Redirected,
            Connect::Named { .. } => Reason::SocketNoName,
        };
        let may_block = !matches!(sys::is_nonblocking(sock.as_fd()), Ok(true));
        let run = move |shared: &Shared, events: &Sender<NotifyEvent>| {
            let result = match &connect {
                Connect::Checked(target, _) => {
                    sys::connect_to_checked(sock.as_fd(), target.as_fd())
                }
                Connect::Raw(addr, len, _) => sys::connect_raw(sock.as_fd(), &addr[..*len]),
                Connect::Redirect { to, via } => shared.redirect(&n, sock.as_fd(), *to, *via),
                Connect::Named { addr, len, to } => {
                    shared.name_process(&n, sock.as_fd(), *to);
                    sys::connect_raw(sock.as_fd(), &addr[..*len])
                }
            };
            let answer = match result {
                Ok(()) => Answer::Value(0, reason),
                // EINPROGRESS/EAGAIN pass through unchanged: the job polls
                // its own descriptor, which shares our file description.
                Err(e) => Answer::Errno(sys::errno_of(&e), Decision::Emulated, reason),
            };
            shared.answer(&n, n.call.name(), answer, path, events);
        };
        if !may_block {
            run(self, events);
            return;
        }
        // A blocking connect may wait for long (a full backlog, a slow
        // handshake): it runs in a pool thread, never in a worker, so the
        // workers keep answering and end when the job is gone.
        let shared = Arc::clone(self);
        let events = events.clone();
        let id = n.id;
        let task: Task = Box::new(move || {
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run(&shared, &events);
            }));
            if ran.is_err() {
                let _ = shared.listener.respond_errno(id, c::EPERM);
            }
        });
        if let Err(task) = self.pool.submit(task) {
            // At the thread cap: wait here rather than fail the call.
            task();
        }
    }

    /// Connect the job's socket (our copy) to the proxy's redirected
    /// listener, telling the proxy first what it stands for: the socket is
    /// bound (to loopback, if the job did not bind it) so its address is
    /// known before the proxy can see the connection.
    pub(super) fn redirect(
        &self,
        n: &Notif,
        sock: BorrowedFd<'_>,
        to: std::net::SocketAddr,
        via: std::net::SocketAddr,
    ) -> io::Result<()> {
        let egress = self
            .egress
            .as_ref()
            .ok_or_else(|| io::Error::from_raw_os_error(c::ECONNREFUSED))?;
        let local = bound_to_loopback(sock, via)?;
        egress.expect(local, to, Some(self.describe(n.tid)));
        sys::connect_raw(sock, &sys::inet_bytes(via))
    }

    /// Tell the proxy which process the connection from this socket to
    /// its listener at `to` comes from. Attribution only: if the socket
    /// cannot be bound first, the connect goes ahead unnamed.
    pub(super) fn name_process(&self, n: &Notif, sock: BorrowedFd<'_>, to: std::net::SocketAddr) {
        if let Some(egress) = &self.egress
            && let Ok(local) = bound_to_loopback(sock, to)
        {
            egress.expect(local, to, Some(self.describe(n.tid)));
        }
    }
}

/// A connect the supervisor performs.
pub(super) enum Connect {
    /// To the checked socket inode behind this `O_PATH` descriptor, with
    /// the reason it is performed (allowed, or only audited).
    Checked(OwnedFd, Reason),
    /// With the job's address (copied): no name resolved, or an abstract
    /// name whose listener belongs to the job.
    Raw([u8; SOCKADDR_MAX], usize, Reason),
    /// Filtered egress: to the proxy's own listener at `to` as asked, which
    /// is told first which process this socket is (attribution only).
    Named {
        addr: [u8; SOCKADDR_MAX],
        len: usize,
        to: std::net::SocketAddr,
    },
    /// Filtered egress: to the proxy's redirected listener `via`, which is
    /// told first that this socket stands for `to`.
    Redirect {
        to: std::net::SocketAddr,
        via: std::net::SocketAddr,
    },
}

/// A refusal `plan::notify::connect` decided, as the answer to give.
fn refusal(verdict: Verdict) -> Answer {
    match verdict {
        Verdict::Unreachable(to) => Answer::Unreachable(to),
        Verdict::Refused(to) => Answer::Refused(to),
        _ => Answer::Errno(c::EACCES, Decision::Denied(c::EACCES), Reason::Forbidden),
    }
}

/// The kernel's TCP socket tables, read only when the decision asks.
struct TcpTables<'a> {
    shared: &'a Shared,
    tid: i32,
}

impl connect::Listeners for TcpTables<'_> {
    /// A TCP connect to loopback in the sandbox's own network — FULL's
    /// namespace (that of thread `tid`), or at FS-ONLY the one that leads
    /// nowhere — where none of the job's servers listens, but a service of
    /// the host's does: the job reaching for the host's service. The
    /// namespace refuses it all the same; this names it, so that it is
    /// recorded with its process (issue P10, item 6). A connect where
    /// nothing listens at all reached nothing, and a test suite's
    /// wait-for-port loop before its own server is up is no finding. Read
    /// from the kernel's socket tables, not from the job's memory; a
    /// server the job starts right after this look still gets its
    /// connection.
    fn host_service_only(&self, network: Network, to: std::net::SocketAddr) -> bool {
        let sandbox = match network {
            Network::Job => Some(PathBuf::from(format!("/proc/{}/net", self.tid))),
            Network::DeadNet => self.shared.egress.as_ref().and_then(|e| e.dead_net_proc()),
        };
        let Some(sandbox) = sandbox else {
            return false;
        };
        !sys::tcp_listens(&sandbox, to) && sys::tcp_listens(Path::new("/proc/self/net"), to)
    }
}

/// The local address of `sock`, bound first (to the loopback address of
/// `to`'s family, as the connect to `to` would bind it) if the job did not
/// bind it, so that it is known before the connection exists.
pub(super) fn bound_to_loopback(
    sock: BorrowedFd<'_>,
    to: std::net::SocketAddr,
) -> io::Result<std::net::SocketAddr> {
    let local = sys::local_inet_addr(sock)?;
    if local.port() != 0 {
        return Ok(local);
    }
    let loopback: std::net::IpAddr = match to.ip() {
        std::net::IpAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
        // A v4-mapped destination from a dual-stack socket.
        std::net::IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => {
            std::net::Ipv4Addr::LOCALHOST.to_ipv6_mapped().into()
        }
        std::net::IpAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
    };
    sys::bind_inet(sock, std::net::SocketAddr::new(loopback, 0))?;
    sys::local_inet_addr(sock)
}

pub(super) type Task = Box<dyn FnOnce() + Send>;

/// Threads for connects that may block, reused (a hand-off costs far less
/// than a thread start) and added when none is idle, up to a cap.
pub(super) struct ConnectPool {
    tx: Sender<Task>,
    inner: Arc<PoolInner>,
}

impl std::fmt::Debug for ConnectPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectPool")
            .field("idle", &self.inner.idle.load(Ordering::Relaxed))
            .field("live", &self.inner.live.load(Ordering::Relaxed))
            .finish()
    }
}

impl ConnectPool {
    pub(super) fn new() -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        ConnectPool {
            tx,
            inner: Arc::new(PoolInner {
                rx: Mutex::new(rx),
                idle: AtomicUsize::new(0),
                live: AtomicUsize::new(0),
            }),
        }
    }

    /// Hand `task` to an idle thread (reserved first, so every queued task
    /// has a thread of its own) or to a new one. `Err` at the cap.
    pub(super) fn submit(&self, task: Task) -> Result<(), Task> {
        let inner = &self.inner;
        let reserved = inner
            .idle
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok();
        if !reserved {
            if inner.live.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECT_THREADS {
                inner.live.fetch_sub(1, Ordering::AcqRel);
                return Err(task);
            }
            let pool = Arc::clone(inner);
            let spawned = std::thread::Builder::new()
                .name("vetto-connect".into())
                .spawn(move || pool.run());
            if spawned.is_err() {
                inner.live.fetch_sub(1, Ordering::AcqRel);
                return Err(task);
            }
        }
        self.tx.send(task).map_err(|e| e.0)
    }
}

pub(super) struct PoolInner {
    rx: Mutex<std::sync::mpsc::Receiver<Task>>,
    idle: AtomicUsize,
    live: AtomicUsize,
}

impl PoolInner {
    pub(super) fn run(&self) {
        loop {
            let task = match self.rx.lock() {
                Ok(rx) => rx.recv(),
                Err(_) => break,
            };
            // The sender is gone with the supervisor state: nothing is left.
            let Ok(task) = task else { break };
            task();
            self.idle.fetch_add(1, Ordering::AcqRel);
        }
        self.live.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The kinds of socket address.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum SockAddr {
    /// `AF_UNIX` with a path (up to the first NUL, as the kernel reads it).
    Path(Vec<u8>),
    /// `AF_UNIX` abstract name (after the leading NUL).
    Abstract(Vec<u8>),
    /// Unnamed, too short, or another family.
    Other,
}

/// The sockets `[network] unix` names, opened `O_PATH` (symlinks
/// followed, as the job's connect would) with their (dev, ino). A path
/// that is no socket now is left out: nothing there is allowed (the plan
/// refused the session if it was none when planning).
/// Whether an absolute path names a socket in vetto's own view of the
/// host (for the record only: it decides nothing the job gets).
pub(super) fn host_socket_at(path: &CStr) -> bool {
    let Ok(root) = sys::open_dir_path(Path::new("/")) else {
        return false;
    };
    sys::openat2(
        root.as_fd(),
        path,
        c::O_PATH,
        0,
        resolve::NO_MAGICLINKS | resolve::IN_ROOT,
    )
    .and_then(|fd| sys::facts(fd.as_fd()))
    .is_ok_and(|f| f.is_socket())
}

pub(super) fn named_sockets(paths: &[PathBuf]) -> Vec<(std::fs::File, (u64, u64))> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
    paths
        .iter()
        .filter_map(|path| {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(c::O_PATH)
                .open(path)
                .ok()?;
            let md = file.metadata().ok()?;
            md.file_type()
                .is_socket()
                .then(|| (file, (md.dev(), md.ino())))
        })
        .collect()
}

pub(super) fn inet_addr(addr: &[u8]) -> Option<std::net::SocketAddr> {
    let family = i32::from(u16::from_ne_bytes([*addr.first()?, *addr.get(1)?]));
    let port = u16::from_be_bytes([*addr.get(2)?, *addr.get(3)?]);
    if family == c::AF_INET {
        let ip: [u8; 4] = addr.get(4..8)?.try_into().ok()?;
        Some(std::net::SocketAddr::from((ip, port)))
    } else if family == c::AF_INET6 {
        let ip: [u8; 16] = addr.get(8..24)?.try_into().ok()?;
        Some(std::net::SocketAddr::from((ip, port)))
    } else {
        None
    }
}

pub(super) fn classify(addr: &[u8]) -> SockAddr {
    if addr.len() <= SUN_PATH_OFFSET {
        return SockAddr::Other;
    }
    let family = u16::from_ne_bytes([addr[0], addr[1]]);
    if i32::from(family) != c::AF_UNIX {
        return SockAddr::Other;
    }
    let sun_path = &addr[SUN_PATH_OFFSET..];
    if sun_path[0] == 0 {
        return SockAddr::Abstract(sun_path[1..].to_vec());
    }
    let end = sun_path
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(sun_path.len());
    SockAddr::Path(sun_path[..end].to_vec())
}

pub(super) enum Owner {
    /// Every listener of the name is held by a process of the job.
    Job,
    /// No listener.
    Nobody,
    /// Anything else (outside, unknown, ambiguous).
    Outside,
}

/// Who listens on the abstract `name`: the job's processes (descendants of
/// the supervisor), nobody, or someone else. Slow (walks /proc) and only
/// for abstract connects, which are rare. A listener could change between
/// this look and the connect only if a process outside the sandbox binds
/// the very name the job just released.
pub(super) fn abstract_owner(tid: i32, name: &[u8]) -> Owner {
    let inodes = match sys::abstract_listeners(tid, name) {
        Ok(Some(inodes)) => inodes,
        _ => return Owner::Outside,
    };
    if inodes.is_empty() {
        return Owner::Nobody;
    }
    let Ok(job) = sys::descendants() else {
        return Owner::Outside;
    };
    if inodes
        .iter()
        .all(|&ino| job.iter().any(|&pid| sys::holds_socket(pid, ino)))
    {
        Owner::Job
    } else {
        Owner::Outside
    }
}
