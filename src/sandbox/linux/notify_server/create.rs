//! Creations, removals and renames: performed by the server in the carved
//! directories on its own descriptors (so the job cannot swap a path
//! between the check and the act), judged against the policy elsewhere,
//! and a nested `.git` refused wherever it would land.

use super::*;

impl Shared {
    pub(super) fn creation(&self, n: &Notified) -> (Answer, Option<PathBuf>) {
        let a = n.args;
        let fd_arg = |i: usize| a[i] as u32 as i32;
        let cwd = c::AT_FDCWD;
        match n.call {
            Call::Open => self.create_file(n, cwd, a[0], a[1] as u32 as i32, a[2] as u32),
            Call::Openat => self.create_file(n, fd_arg(0), a[1], a[2] as u32 as i32, a[3] as u32),
            Call::Creat => self.create_file(
                n,
                cwd,
                a[0],
                c::O_CREAT | c::O_WRONLY | c::O_TRUNC,
                a[1] as u32,
            ),
            Call::Mkdir => self.simple(n, Op::Mkdir(a[1] as u32), cwd, a[0]),
            Call::Mkdirat => self.simple(n, Op::Mkdir(a[2] as u32), fd_arg(0), a[1]),
            Call::Unlink => self.simple(n, Op::Unlink(0), cwd, a[0]),
            Call::Rmdir => self.simple(n, Op::Unlink(c::AT_REMOVEDIR), cwd, a[0]),
            Call::Unlinkat => self.simple(n, Op::Unlink(a[2] as u32 as i32), fd_arg(0), a[1]),
            Call::Symlink => self.simple(n, Op::Symlink(a[0]), cwd, a[1]),
            Call::Symlinkat => self.simple(n, Op::Symlink(a[0]), fd_arg(1), a[2]),
            Call::Rename => self.rename(n, (cwd, a[0]), (cwd, a[1]), 0),
            Call::Renameat => self.rename(n, (fd_arg(0), a[1]), (fd_arg(2), a[3]), 0),
            Call::Renameat2 => self.rename(n, (fd_arg(0), a[1]), (fd_arg(2), a[3]), a[4] as u32),
            Call::Link => self.new_name_only(n, cwd, a[1]),
            Call::Linkat => self.new_name_only(n, fd_arg(2), a[3]),
            Call::Mknod => self.new_name_only(n, cwd, a[0]),
            Call::Mknodat => self.new_name_only(n, fd_arg(0), a[1]),
            _ => (Answer::Continue(Reason::NotHandled), None),
        }
    }

    /// `open*`/`creat` with `O_CREAT`: create exclusively, hand the file over.
    pub(super) fn create_file(
        &self,
        n: &Notified,
        dirfd: i32,
        path_addr: u64,
        flags: i32,
        mode: u32,
    ) -> (Answer, Option<PathBuf>) {
        let path = match n.path(path_addr) {
            Ok(p) => p,
            Err(answer) => return (answer, None),
        };
        if flags & c::O_CREAT == 0 {
            return (self.reopen_for_writing(n, dirfd, &path, flags), None);
        }
        let shown = Some(show(&path));
        if flags & !(c::O_KEPT | c::O_ABSORBED) != 0 || flags & c::O_ACCMODE == c::O_ACCMODE {
            return (Answer::Continue(Reason::Unsupported), shown);
        }
        if let Some(refused) = self.nested_git(n, dirfd, &path) {
            return (refused, shown);
        }
        let target = match self.locate(n, dirfd, &path, false) {
            Ok(t) => t,
            Err(answer) => {
                let (answer, target) = self.judge_outside(n, dirfd, &path, answer, false);
                return (answer, target.or(shown));
            }
        };
        let umask = match sys::thread_umask(n.tid) {
            Ok(u) => u,
            Err(_) => return (Answer::Continue(Reason::Unreadable), shown),
        };
        if !self.listener.id_valid(n.id) {
            return (Answer::Drop, shown);
        }
        if let Err(reason) = self.check_name(target.carved, &target.name) {
            return (Answer::Continue(reason), shown);
        }
        let dir = self.carved[target.carved].fd.as_fd();
        let name = target.name_c.clone();
        let created = match self.file_from_spare(target.carved, &name, flags, mode & !umask) {
            Some(result) => result,
            None if self.spares_spent(target.carved, false) && name_free(dir, &name) => {
                return (spent(), shown);
            }
            None => sys::openat2(
                dir,
                &name,
                (flags & c::O_KEPT) | c::O_CREAT | c::O_EXCL | c::O_NOFOLLOW,
                mode & 0o7777 & !umask,
                resolve::BENEATH | resolve::NO_SYMLINKS | resolve::NO_MAGICLINKS | resolve::NO_XDEV,
            ),
        };
        let answer = match created {
            Ok(fd) => {
                if let Ok(f) = sys::facts(fd.as_fd()) {
                    self.remember(f);
                }
                Answer::Fd {
                    fd,
                    cloexec: flags & c::O_CLOEXEC != 0,
                    reason: Reason::CarvedDir,
                    undo: Some((target.carved, name)),
                }
            }
            // It exists (perhaps just now): unless the supervisor made it,
            // Landlock decides on the existing inode, exactly as without
            // the supervisor.
            Err(e) if sys::errno_of(&e) == c::EEXIST => self
                .reopen_created(dir, &name, flags)
                .unwrap_or(Answer::Continue(Reason::Exists)),
            Err(e) => Answer::Errno(sys::errno_of(&e), Decision::Emulated, Reason::CarvedDir),
        };
        (answer, shown)
    }

    /// Create `name` in carved directory `carved` from a spare file: open
    /// the spare (so the descriptor is the spare's inode whatever happens
    /// to names meanwhile), empty it and give it the job's mode, then move
    /// it into place without replacing anything. `None`: no spare here.
    pub(super) fn file_from_spare(
        &self,
        carved: usize,
        name: &CStr,
        flags: i32,
        mode: u32,
    ) -> Option<io::Result<OwnedFd>> {
        let spares = self
            .spares
            .as_ref()
            .filter(|s| s.file_dirs.contains(&carved))?;
        let spare = Spares::take(&spares.files)?;
        let fd = match sys::openat2(
            spares.pool.as_fd(),
            &spare,
            (flags & c::O_KEPT) | c::O_NOFOLLOW | c::O_NONBLOCK,
            0,
            resolve::BENEATH | resolve::NO_SYMLINKS | resolve::NO_MAGICLINKS | resolve::NO_XDEV,
        ) {
            Ok(fd) => fd,
            // Gone or replaced: the spare is spent; create plainly.
            Err(_) => return None,
        };
        let usable = sys::facts(fd.as_fd()).is_ok_and(|f| f.is_regular() && f.nlink == 1)
            && (flags & c::O_NONBLOCK != 0 || sys::clear_nonblocking(fd.as_fd()).is_ok())
            && sys::truncate_to_zero(fd.as_fd()).is_ok()
            && sys::fchmod(fd.as_fd(), mode & 0o7777).is_ok();
        if !usable {
            return None;
        }
        let dir = self.carved[carved].fd.as_fd();
        match sys::renameat2(spares.pool.as_fd(), &spare, dir, name, c::RENAME_NOREPLACE) {
            Ok(()) => Some(Ok(fd)),
            Err(e) => {
                Spares::give_back(&spares.files, spare);
                // The name exists: answer as the plain path would; any
                // other failure (another filesystem): create plainly.
                (sys::errno_of(&e) == c::EEXIST).then_some(Err(e))
            }
        }
    }

    /// `mkdir` in carved directory `carved` from a spare directory, which
    /// stays fully writable to the job beneath its new name.
    pub(super) fn dir_from_spare(
        &self,
        carved: usize,
        name: &CStr,
        mode: u32,
    ) -> Option<io::Result<()>> {
        let spares = self
            .spares
            .as_ref()
            .filter(|s| s.dev == self.carved[carved].dev)?;
        let spare = Spares::take(&spares.dirs)?;
        let fd = sys::openat2(
            spares.pool.as_fd(),
            &spare,
            c::O_RDONLY | c::O_DIRECTORY | c::O_NOFOLLOW,
            0,
            resolve::BENEATH | resolve::NO_SYMLINKS | resolve::NO_MAGICLINKS | resolve::NO_XDEV,
        )
        .ok()?;
        sys::fchmod(fd.as_fd(), mode & 0o7777).ok()?;
        let dir = self.carved[carved].fd.as_fd();
        match sys::renameat2(spares.pool.as_fd(), &spare, dir, name, c::RENAME_NOREPLACE) {
            Ok(()) => Some(Ok(())),
            Err(e) => {
                Spares::give_back(&spares.dirs, spare);
                (sys::errno_of(&e) == c::EEXIST).then_some(Err(e))
            }
        }
    }

    /// Whether new entries of this kind (`dirs`, else files) in carved
    /// directory `carved` are made from spares, and none is left. Not
    /// under `--audit`, which changes nothing the job does.
    fn spares_spent(&self, carved: usize, dirs: bool) -> bool {
        let Some(spares) = self.spares.as_ref().filter(|_| !self.audit) else {
            return false;
        };
        let (applies, list) = if dirs {
            (
                self.carved.get(carved).is_some_and(|c| c.dev == spares.dev),
                &spares.dirs,
            )
        } else {
            (spares.file_dirs.contains(&carved), &spares.files)
        };
        applies && list.lock().is_ok_and(|l| l.is_empty())
    }

    pub(super) fn remember(&self, f: FileFacts) {
        if let Ok(mut set) = self.created.lock() {
            set.insert((f.dev, f.ino));
        }
    }

    pub(super) fn was_created_here(&self, f: &FileFacts) -> bool {
        self.created
            .lock()
            .map(|set| set.contains(&(f.dev, f.ino)))
            .unwrap_or(false)
    }

    /// `open*` for writing without `O_CREAT` (append to, or rewrite, a
    /// file): a file the supervisor made in a carved directory has no
    /// Landlock rule of its own (the rules were fixed before it existed),
    /// so the kernel would refuse it `EACCES` although the job made it.
    /// Opened here when it is such a file (regular, one link, its inode
    /// made this session: see [`Shared::reopen_created`]); anything else
    /// (a file that was there before, a protected name, a path outside
    /// the carved directories) is the kernel's to decide, as without the
    /// supervisor, and not recorded.
    fn reopen_for_writing(&self, n: &Notified, dirfd: i32, path: &CStr, flags: i32) -> Answer {
        let unhandled = Answer::Continue(Reason::NotHandled);
        if flags & c::O_ACCMODE == c::O_RDONLY
            || flags & c::O_ACCMODE == c::O_ACCMODE
            || flags & !(c::O_KEPT | c::O_ABSORBED) != 0
        {
            return unhandled;
        }
        let Ok(target) = self.locate(n, dirfd, path, false) else {
            return unhandled;
        };
        let dir = self.carved[target.carved].fd.as_fd();
        // Looked at without opening first: nothing but a file this
        // session made is ever opened on the job's behalf.
        if !sys::facts_at(dir, &target.name_c)
            .is_ok_and(|f| f.is_regular() && f.nlink == 1 && self.was_created_here(&f))
        {
            return unhandled;
        }
        if !self.listener.id_valid(n.id) {
            return Answer::Drop;
        }
        self.reopen_created(dir, &target.name_c, flags)
            .unwrap_or(unhandled)
    }

    /// Open again a regular file this supervisor created (and nothing
    /// else: checked on the opened descriptor, before any truncation).
    pub(super) fn reopen_created(
        &self,
        dir: BorrowedFd<'_>,
        name: &CStr,
        flags: i32,
    ) -> Option<Answer> {
        if flags & c::O_EXCL != 0 {
            return None;
        }
        // O_NONBLOCK: a FIFO swapped in cannot stall the worker.
        let fd = sys::openat2(
            dir,
            name,
            (flags & c::O_KEPT) | c::O_NOFOLLOW | c::O_NONBLOCK,
            0,
            resolve::BENEATH | resolve::NO_SYMLINKS | resolve::NO_MAGICLINKS | resolve::NO_XDEV,
        )
        .ok()?;
        let f = sys::facts(fd.as_fd()).ok()?;
        if !f.is_regular() || f.nlink != 1 || !self.was_created_here(&f) {
            return None;
        }
        if flags & c::O_NONBLOCK == 0 && sys::clear_nonblocking(fd.as_fd()).is_err() {
            return None;
        }
        if flags & c::O_TRUNC != 0 {
            if let Err(e) = sys::truncate_to_zero(fd.as_fd()) {
                return Some(Answer::Errno(
                    sys::errno_of(&e),
                    Decision::Emulated,
                    Reason::CarvedDir,
                ));
            }
        }
        Some(Answer::Fd {
            fd,
            cloexec: flags & c::O_CLOEXEC != 0,
            reason: Reason::CarvedDir,
            undo: None,
        })
    }

    /// `mkdir*`, `unlink*`, `rmdir`, `symlink*`.
    pub(super) fn simple(
        &self,
        n: &Notified,
        op: Op,
        dirfd: i32,
        path_addr: u64,
    ) -> (Answer, Option<PathBuf>) {
        let path = match n.path(path_addr) {
            Ok(p) => p,
            Err(answer) => return (answer, None),
        };
        let shown = Some(show(&path));
        if !matches!(op, Op::Unlink(_))
            && let Some(refused) = self.nested_git(n, dirfd, &path)
        {
            return (refused, shown);
        }
        // Trailing slashes name a directory: fine for mkdir and rmdir,
        // not something to reproduce for files and symlinks.
        let dir_op =
            matches!(op, Op::Mkdir(_)) || matches!(op, Op::Unlink(f) if f == c::AT_REMOVEDIR);
        if let Op::Unlink(flags) = op {
            if flags != 0 && flags != c::AT_REMOVEDIR {
                return (Answer::Continue(Reason::Unsupported), shown);
            }
        }
        let target_bytes = match op {
            Op::Symlink(addr) => match n.path(addr) {
                Ok(t) if !t.as_bytes().is_empty() => Some(t),
                Ok(_) => return (Answer::Continue(Reason::Unsupported), shown),
                Err(answer) => return (answer, shown),
            },
            _ => None,
        };
        let target = match self.locate(n, dirfd, &path, dir_op) {
            Ok(t) => t,
            Err(answer) => {
                let mkdir = matches!(op, Op::Mkdir(_));
                let (answer, target) = self.judge_outside(n, dirfd, &path, answer, mkdir);
                return (answer, target.or(shown));
            }
        };
        let umask = match op {
            Op::Mkdir(_) => match sys::thread_umask(n.tid) {
                Ok(u) => u,
                Err(_) => return (Answer::Continue(Reason::Unreadable), shown),
            },
            _ => 0,
        };
        if !self.listener.id_valid(n.id) {
            return (Answer::Drop, shown);
        }
        if let Err(reason) = self.check_name(target.carved, &target.name) {
            return (Answer::Continue(reason), shown);
        }
        let dir = self.carved[target.carved].fd.as_fd();
        let name = &target.name_c;
        let result = match op {
            Op::Mkdir(mode) => match self.dir_from_spare(target.carved, name, mode & !umask) {
                Some(result) => result,
                None if self.spares_spent(target.carved, true) && name_free(dir, name) => {
                    return (spent(), shown);
                }
                None => sys::mkdirat(dir, name, mode & 0o7777 & !umask),
            },
            Op::Unlink(flags) => sys::unlinkat(dir, name, flags),
            Op::Symlink(_) => match &target_bytes {
                Some(t) => sys::symlinkat(t, dir, name),
                None => return (Answer::Continue(Reason::Unsupported), shown),
            },
        };
        (done(result), shown)
    }

    pub(super) fn rename(
        &self,
        n: &Notified,
        (old_dirfd, old_addr): (i32, u64),
        (new_dirfd, new_addr): (i32, u64),
        flags: u32,
    ) -> (Answer, Option<PathBuf>) {
        let old = match n.path(old_addr) {
            Ok(p) => p,
            Err(answer) => return (answer, None),
        };
        let shown = Some(show(&old));
        let new = match n.path(new_addr) {
            Ok(p) => p,
            Err(answer) => return (answer, shown),
        };
        // An exchange puts something new under both names.
        if let Some(refused) = self.nested_git(n, new_dirfd, &new).or_else(|| {
            (flags & c::RENAME_EXCHANGE != 0)
                .then(|| self.nested_git(n, old_dirfd, &old))
                .flatten()
        }) {
            return (refused, shown);
        }
        if flags & !(c::RENAME_NOREPLACE | c::RENAME_EXCHANGE) != 0 {
            return (Answer::Continue(Reason::Unsupported), shown);
        }
        let from = self.locate(n, old_dirfd, &old, true);
        let to = self.locate(n, new_dirfd, &new, true);
        let (from, to) = match (from, to) {
            (Ok(f), Ok(t)) => (Some(f), Some(t)),
            (Ok(f), Err(Answer::Continue(Reason::NotCarved))) => (Some(f), None),
            (Err(Answer::Continue(Reason::NotCarved)), Ok(t)) => (None, Some(t)),
            (
                Err(Answer::Continue(Reason::NotCarved)),
                Err(Answer::Continue(Reason::NotCarved)),
            ) => {
                // Neither side carved: Landlock decides; record a rename
                // the policy would refuse on either side.
                let not_carved = || Answer::Continue(Reason::NotCarved);
                let (a, target) = self.judge_outside(n, old_dirfd, &old, not_carved(), false);
                let (a, target) = match a {
                    Answer::Continue(Reason::NotCarved) => {
                        self.judge_outside(n, new_dirfd, &new, not_carved(), false)
                    }
                    other => (other, target),
                };
                return (a, target.or(shown));
            }
            (Err(a), _) | (_, Err(a)) => return (a, shown),
        };
        if !self.listener.id_valid(n.id) {
            return (Answer::Drop, shown);
        }
        for t in [&from, &to].into_iter().flatten() {
            if let Err(reason) = self.check_name(t.carved, &t.name) {
                return (Answer::Continue(reason), shown);
            }
        }
        let answer = match (from, to) {
            (Some(f), Some(t)) if f.carved == t.carved => {
                let dir = self.carved[f.carved].fd.as_fd();
                // A trailing slash is kept: the kernel then insists on
                // directories, as it would have for the job.
                match (f.with_slash(), t.with_slash()) {
                    (Ok(old), Ok(new)) => done(sys::renameat2(dir, &old, dir, &new, flags)),
                    _ => Answer::Continue(Reason::Unsupported),
                }
            }
            // One side in a carved directory (or two different ones):
            // `mv` falls back to copy and unlink, which are emulated.
            _ => Answer::Errno(c::EXDEV, Decision::Emulated, Reason::CrossCarve),
        };
        (answer, shown)
    }

    /// Resolve the parent of `path` as the job sees it (from `dirfd`, its
    /// cwd, or `/`) without following symlinks, and match it against the
    /// carved directories by inode. Anything unclear → CONTINUE.
    pub(super) fn locate(
        &self,
        n: &Notified,
        dirfd: i32,
        path: &CStr,
        dir_op: bool,
    ) -> Result<Target, Answer> {
        let bytes = path.to_bytes();
        let (parent, name, trailing) = split(bytes).ok_or(Answer::Continue(Reason::Unsupported))?;
        if trailing && !dir_op {
            return Err(Answer::Continue(Reason::Unsupported));
        }
        if name.is_empty() || name == b"." || name == b".." {
            return Err(Answer::Continue(Reason::Unsupported));
        }
        // Absolute paths resolve from the job's own root (at FULL it is
        // not ours), clamped to it with RESOLVE_IN_ROOT.
        let absolute = bytes.first() == Some(&b'/');
        let what = start_dir(bytes, dirfd).ok_or(Answer::Continue(Reason::Unsupported))?;
        let facts: FileFacts = if parent.is_empty() {
            // The common case, a bare name: one stat of the magic link.
            sys::proc_dir_facts(n.tid, &what).map_err(|_| Answer::Continue(Reason::Unreadable))?
        } else if self.not_carved_hint(n, &what, parent) {
            // The next most common (`.git/objects/ab/tmp_obj_…`, and the
            // absolute paths cargo hands rustc): one `statx` shows the
            // parent is none of the carved directories, or does not exist,
            // so Landlock decides — the answer the exact resolution gives
            // whatever it finds (another directory, a link on the way,
            // nothing). For an absolute path the `statx` starts at the
            // job's root but takes an absolute link or a `..` above it
            // from ours: a wrong hint only makes a creation in a carved
            // directory CONTINUE, which Landlock refuses — never a grant.
            return Err(Answer::Continue(Reason::NotCarved));
        } else {
            let base = sys::open_proc_dir(n.tid, &what)
                .map_err(|_| Answer::Continue(Reason::Unreadable))?;
            let in_root = if absolute { resolve::IN_ROOT } else { 0 };
            let p = sys::cstring(parent).map_err(|_| Answer::Continue(Reason::Unsupported))?;
            let parent_fd = sys::openat2(
                base.as_fd(),
                &p,
                c::O_PATH | c::O_DIRECTORY,
                0,
                resolve::NO_SYMLINKS | resolve::NO_MAGICLINKS | in_root,
            )
            .map_err(|_| Answer::Continue(Reason::Unsupported))?;
            sys::facts(parent_fd.as_fd()).map_err(|_| Answer::Continue(Reason::Unsupported))?
        };
        let carved = self
            .carved
            .iter()
            .position(|d| d.dev == facts.dev && d.ino == facts.ino)
            .ok_or(Answer::Continue(Reason::NotCarved))?;
        let name_c = sys::cstring(name).map_err(|_| Answer::Continue(Reason::Unsupported))?;
        Ok(Target {
            carved,
            name: name.to_vec(),
            name_c,
            trailing,
        })
    }

    /// A creation outside the carved directories is Landlock's to decide;
    /// when the policy does not make its target writable the kernel will
    /// refuse it, so record the attempt (the answer stays CONTINUE). The
    /// path is the job's, made absolute lexically: this names the attempt
    /// in reports and decides nothing.
    pub(super) fn judge_outside(
        &self,
        n: &Notified,
        dirfd: i32,
        path: &CStr,
        answer: Answer,
        mkdir: bool,
    ) -> (Answer, Option<PathBuf>) {
        if !matches!(answer, Answer::Continue(Reason::NotCarved)) {
            return (answer, None);
        }
        let bytes = path.to_bytes();
        // The parent as `locate` saw it (one `statx`, already made for a
        // path with a parent; nothing new is read here).
        let seen = match (start_dir(bytes, dirfd), split(bytes)) {
            (Some(what), Some((parent, _, _))) if !parent.is_empty() => Some(n.hint(&what, parent)),
            _ => None,
        };
        let missing = matches!(seen, Some(Err(c::ENOENT)));
        // No parent where the view is the host's: the kernel answers
        // ENOENT before any permission is checked, so nothing is refused.
        if missing && !self.own_view {
            return (answer, None);
        }
        // A directory already found writable, with no rule below it: every
        // name in it is too (the longest rule decides), so nothing to read.
        let known = match seen {
            Some(Ok((f, Some(birth)))) => Some((f.dev, f.ino, birth)),
            _ => None,
        };
        let remembered = known.and_then(|k| {
            self.writable_dirs
                .lock()
                .ok()
                .and_then(|w| w.get(&k).copied())
        });
        if remembered == Some(true) {
            return (answer, None);
        }
        let absolute = if bytes.first() == Some(&b'/') {
            PathBuf::from(std::ffi::OsStr::from_bytes(bytes))
        } else {
            let what = if dirfd == c::AT_FDCWD {
                "cwd".to_string()
            } else if dirfd >= 0 {
                format!("fd/{dirfd}")
            } else {
                return (answer, None);
            };
            match std::fs::read_link(format!("/proc/{}/{what}", n.tid)) {
                Ok(base) => base.join(std::ffi::OsStr::from_bytes(bytes)),
                Err(_) => return (answer, None),
            }
        };
        let target = normalise_abs(&absolute);
        let rules = self.resolved_rules().iter().map(|(p, a)| (p.as_path(), *a));
        let may_write = writable(rules, &target);
        if may_write && let (Some(k), None) = (known, remembered) {
            self.learn_writable(k, &target);
        }
        // FULL's view leaves out what the policy grants nothing of; the job
        // names host paths (its view mirrors them), so whether the host has
        // the parent is one `stat` in vetto's own view. It decides nothing:
        // the answer stays CONTINUE and the kernel refuses, whatever is
        // found.
        let parent = if missing {
            entries::Parent::Missing {
                on_host: !may_write && target.parent().is_some_and(Path::is_dir),
            }
        } else {
            entries::Parent::Seen
        };
        // `mkdir -p` of a directory that exists fails with EEXIST before any
        // permission is checked: nothing was refused. One the view hid is
        // refused (ENOENT, or EACCES in its parent): the job reached into
        // what the policy keeps from it.
        let mkdir_of_existing = mkdir
            && !may_write
            && std::fs::symlink_metadata(
                Path::new(&format!("/proc/{}/root", n.tid))
                    .join(target.strip_prefix("/").unwrap_or(&target)),
            )
            .is_ok();
        if !entries::refused_outside(may_write, parent, mkdir_of_existing) {
            return (answer, None);
        }
        (Answer::Continue(Reason::OutsidePolicy), Some(target))
    }

    /// Remember that the directory `(dev, ino, birth)` holding `target` is
    /// writable by the policy, if that holds for every name in it: no rule
    /// lies below it, and the path the verdict was made on (the job's,
    /// made absolute lexically) really is that directory, with no link on
    /// the way (one `openat2` with `RESOLVE_NO_SYMLINKS`, once per
    /// directory; a directory where it does not hold is remembered as
    /// such and not looked at again). Only names a refused write, and
    /// decides nothing: Landlock decides on the call.
    pub(super) fn learn_writable(&self, known: DirId, target: &Path) {
        let holds = target
            .parent()
            .is_some_and(|dir| self.writable_for_every_name(known, dir));
        if let Ok(mut w) = self.writable_dirs.lock() {
            if w.len() >= WRITABLE_DIRS_MAX {
                w.clear();
            }
            w.insert(known, holds);
        }
    }

    pub(super) fn writable_for_every_name(&self, known: DirId, dir: &Path) -> bool {
        let rules = self.resolved_rules();
        if rules
            .iter()
            .any(|(p, _)| p.as_path() != dir && beneath(p, dir))
        {
            return false;
        }
        let Ok(dir_c) = CString::new(dir.as_os_str().as_bytes()) else {
            return false;
        };
        sys::open_dir_path(Path::new("/"))
            .and_then(|root| {
                sys::openat2(
                    root.as_fd(),
                    &dir_c,
                    c::O_PATH | c::O_DIRECTORY,
                    0,
                    resolve::NO_SYMLINKS | resolve::NO_MAGICLINKS,
                )
            })
            .and_then(|fd| sys::facts(fd.as_fd()))
            .is_ok_and(|f| (f.dev, f.ino) == (known.0, known.1))
    }

    /// `link*`, `mknod*`: only a nested `.git` is refused; Landlock
    /// decides everything else (it denies both in carved directories).
    pub(super) fn new_name_only(
        &self,
        n: &Notified,
        dirfd: i32,
        path_addr: u64,
    ) -> (Answer, Option<PathBuf>) {
        let path = match n.path(path_addr) {
            Ok(p) => p,
            Err(answer) => return (answer, None),
        };
        match self.nested_git(n, dirfd, &path) {
            Some(refused) => (refused, Some(show(&path))),
            None => (Answer::Continue(Reason::NotHandled), None),
        }
    }

    /// A new entry named `.git` (as git on a case-insensitive filesystem
    /// would take it) whose parent lies below the project root: refused
    /// with `EPERM` and recorded (under `--audit`, only recorded). The
    /// name is the supervisor's own copy; refusing on it is safe whatever
    /// the job's memory says later. (A racing thread can still make the
    /// kernel see `.git` where this copy said another name: the check
    /// after the session catches what gets through.) The root's own
    /// `.git` is the carve's (a protected name). A parent that cannot be
    /// resolved is taken to be below the root: refused, closed.
    pub(super) fn nested_git(&self, n: &Notif, dirfd: i32, path: &CStr) -> Option<Answer> {
        let project = self.project?;
        let bytes = path.to_bytes();
        let (parent, name, _) = split(bytes)?;
        if fold(name) != b".git" {
            return None;
        }
        let below = self
            .below(n.tid, dirfd, bytes, parent, project)
            .unwrap_or(true);
        if !below {
            return None;
        }
        if !self.listener.id_valid(n.id) {
            return Some(Answer::Drop);
        }
        Some(if self.audit {
            Answer::Continue(Reason::NestedGit)
        } else {
            Answer::Errno(c::EPERM, Decision::Denied(c::EPERM), Reason::NestedGit)
        })
    }

    /// Whether the parent of a path (as the job resolves it, following
    /// its symlinks but no magic links) lies strictly below the project
    /// root, found by walking `..` up to the first directory met twice.
    /// `None` when the parent cannot be resolved.
    pub(super) fn below(
        &self,
        tid: i32,
        dirfd: i32,
        path: &[u8],
        parent: &[u8],
        project: (u64, u64),
    ) -> Option<bool> {
        let mut dir = self.job_dir(tid, dirfd, path, parent)?;
        let dotdot = sys::cstring(b"..").ok()?;
        let mut first = true;
        // PATH_MAX bounds how deep a directory the job can name.
        for _ in 0..libc::PATH_MAX {
            let here = sys::facts(dir.as_fd()).ok()?;
            if (here.dev, here.ino) == project {
                return Some(!first);
            }
            let up = sys::openat2(
                dir.as_fd(),
                &dotdot,
                c::O_PATH | c::O_DIRECTORY,
                0,
                resolve::NO_MAGICLINKS,
            )
            .ok()?;
            let there = sys::facts(up.as_fd()).ok()?;
            if (there.dev, there.ino) == (here.dev, here.ino) {
                return Some(false);
            }
            dir = up;
            first = false;
        }
        None
    }

    /// One `statx` of a relative `parent` from the job's `what` (links
    /// followed) shows a directory that is not carved, or nothing.
    pub(super) fn not_carved_hint(&self, n: &Notified, what: &str, parent: &[u8]) -> bool {
        match n.hint(what, parent) {
            Ok((f, _)) => !self.carved.iter().any(|d| d.dev == f.dev && d.ino == f.ino),
            // Nothing there: the job's call fails as it would without
            // vetto, unless a racing thread makes the parent first — and
            // then Landlock decides (a carved directory is read-only).
            Err(e) => e == c::ENOENT,
        }
    }

    /// The directory `parent` of `path` names for thread `tid` (from
    /// `dirfd`, its cwd, or its root), following its symlinks but no
    /// magic links.
    pub(super) fn job_dir(
        &self,
        tid: i32,
        dirfd: i32,
        path: &[u8],
        parent: &[u8],
    ) -> Option<OwnedFd> {
        let absolute = path.first() == Some(&b'/');
        let what = start_dir(path, dirfd)?;
        let base = sys::open_proc_dir(tid, &what).ok()?;
        if parent.is_empty() {
            return Some(base);
        }
        let in_root = if absolute { resolve::IN_ROOT } else { 0 };
        let p = sys::cstring(parent).ok()?;
        sys::openat2(
            base.as_fd(),
            &p,
            c::O_PATH | c::O_DIRECTORY,
            0,
            resolve::NO_MAGICLINKS | in_root,
        )
        .ok()
    }

    /// The plan's decision on a name in carved directory `carved`.
    pub(super) fn check_name(&self, carved: usize, name: &[u8]) -> Result<(), Reason> {
        entries::check_name(&self.carved[carved].view(), name)
    }
}

/// A located name in a carved directory.
pub(super) struct Target {
    carved: usize,
    name: Vec<u8>,
    name_c: CString,
    /// The job's path ended in `/`.
    trailing: bool,
}

impl Target {
    pub(super) fn with_slash(&self) -> io::Result<CString> {
        if self.trailing {
            let mut bytes = self.name.clone();
            bytes.push(b'/');
            sys::cstring(&bytes)
        } else {
            Ok(self.name_c.clone())
        }
    }
}

#[derive(Clone, Copy)]
pub(super) enum Op {
    Mkdir(u32),
    /// `unlinkat` flags: 0 or `AT_REMOVEDIR`.
    Unlink(i32),
    /// Address of the symlink target in the job's memory.
    Symlink(u64),
}

/// `name` is not in `dir` (so a creation there would make a new entry;
/// an existing one is answered as it always is).
fn name_free(dir: BorrowedFd<'_>, name: &CStr) -> bool {
    sys::facts_at(dir, name).is_err_and(|e| sys::errno_of(&e) == c::ENOENT)
}

/// The refusal of a new entry once the spares are used ([`Reason::SparesSpent`]).
fn spent() -> Answer {
    Answer::Errno(c::EACCES, Decision::Denied(c::EACCES), Reason::SparesSpent)
}
