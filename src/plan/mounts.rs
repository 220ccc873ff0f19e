//! FULL tier: the new root as an ordered list of mounts, built from the
//! policy. Only what the policy allows is mounted; everything else is
//! simply absent. Landlock still applies on top (defence in depth).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::fs::{EntryKind, FsView, beneath};
use crate::policy::{Access, FsRule};

/// One step of building the new root, applied in order. Paths are where
/// the entry appears inside the sandbox (the same as on the host).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "op")]
pub enum Mount {
    /// A fresh, private tmpfs (`/tmp`, the skeleton of `$HOME`).
    Tmpfs { path: PathBuf },
    /// The host path bound at the same place; read-only unless `writable`.
    Bind { path: PathBuf, writable: bool },
    /// The host's symlink recreated (e.g. `/lib -> usr/lib`).
    Symlink { path: PathBuf, target: PathBuf },
    /// A masked file: an empty read-only file in its place.
    MaskFile { path: PathBuf },
    /// A masked directory: an empty read-only tmpfs in its place.
    MaskDir { path: PathBuf },
    /// A fresh procfs for the sandbox's PID namespace.
    Proc { path: PathBuf },
    /// A minimal /dev: null, zero, full, random, urandom, tty, a private
    /// devpts and /dev/shm; the terminal vetto runs on, if any, bound at
    /// `/dev/console` and at its own `/dev/pts/N` (so `ttyname()` names
    /// the job's own terminal as outside).
    Dev {
        path: PathBuf,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        console: Option<PathBuf>,
    },
}

impl Mount {
    pub fn path(&self) -> &Path {
        match self {
            Mount::Tmpfs { path }
            | Mount::Bind { path, .. }
            | Mount::Symlink { path, .. }
            | Mount::MaskFile { path }
            | Mount::MaskDir { path }
            | Mount::Proc { path }
            | Mount::Dev { path, .. } => path,
        }
    }
}

/// Namespaces and the new root for the FULL tier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespacePlan {
    /// Own network namespace with only loopback (up).
    pub net: bool,
    pub hostname: String,
    pub mounts: Vec<Mount>,
    /// Filtered egress: the DNS stub and transparent listeners made in the
    /// namespace (`None` without filtered egress).
    #[serde(default)]
    pub dns_stub: Option<super::net::DnsStub>,
}

impl NamespacePlan {
    /// The masked paths with their index in `mounts` (which names each
    /// stand-in) and whether they are directories: the traps vetto
    /// serves to see who reads secrets.
    pub fn masks(&self) -> impl Iterator<Item = (usize, &Path, bool)> {
        self.mounts.iter().enumerate().filter_map(|(i, m)| match m {
            Mount::MaskFile { path } => Some((i, path.as_path(), false)),
            Mount::MaskDir { path } => Some((i, path.as_path(), true)),
            _ => None,
        })
    }
}

/// The new root for `rules`: parents before children, so nested rules
/// (a read-only path under a writable one, a masked file under the
/// project) are mounted on top of their parent.
///
/// `console` is the host terminal bound at `/dev/console` (`plan::terminal`).
pub fn plan(rules: &[FsRule], view: &dyn FsView, console: Option<PathBuf>) -> Vec<Mount> {
    let norm = super::fs::normalize(rules);

    let mut mounts = vec![
        Mount::Proc {
            path: "/proc".into(),
        },
        Mount::Dev {
            path: "/dev".into(),
            console,
        },
        Mount::Tmpfs {
            path: "/tmp".into(),
        },
    ];
    let special = |p: &Path| {
        beneath(p, Path::new("/proc")) || beneath(p, Path::new("/dev")) || p == Path::new("/tmp")
    };
    for (path, access) in &norm {
        if special(path) {
            continue;
        }
        let covered = norm
            .iter()
            .filter(|(p, _)| p.as_os_str() != path.as_os_str() && beneath(path, p) && !special(p))
            .max_by_key(|(p, _)| p.as_os_str().len())
            .map(|(_, a)| *a);
        let kind = view.kind(path);
        let m = match (access, kind) {
            (_, None) => continue,
            // Beneath a masked directory: already hidden.
            (Access::Deny, Some(_)) if covered == Some(Access::Deny) => continue,
            // Elsewhere an empty stand-in takes the secret's place, even
            // where nothing around it is mounted: reading it gives nothing,
            // and vetto sees who tried (the stand-in is a trap it serves).
            (Access::Deny, Some(EntryKind::Dir)) => Mount::MaskDir { path: path.clone() },
            (Access::Deny, Some(_)) => Mount::MaskFile { path: path.clone() },
            (_, Some(EntryKind::Symlink)) => match view.read_link(path) {
                Some(target) if covered.is_none() => Mount::Symlink {
                    path: path.clone(),
                    target,
                },
                // Beneath a bound directory the link is already there.
                _ => continue,
            },
            (Access::Write, Some(_)) => Mount::Bind {
                path: path.clone(),
                writable: true,
            },
            (Access::Read | Access::Protect, Some(_)) => {
                if covered.is_some_and(|c| c != Access::Write && c != Access::Deny) {
                    // Already read-only through its parent's bind.
                    continue;
                }
                Mount::Bind {
                    path: path.clone(),
                    writable: false,
                }
            }
        };
        mounts.push(m);
    }
    // Parents before children; stable, so /proc, /dev and /tmp come before
    // anything the policy binds beneath them.
    mounts.sort_by(|a, b| a.path().cmp(b.path()));
    mounts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_name_each_stand_in_by_its_mount_index() {
        let ns = NamespacePlan {
            net: true,
            hostname: "vetto".into(),
            dns_stub: None,
            mounts: vec![
                Mount::Tmpfs {
                    path: "/tmp".into(),
                },
                Mount::MaskDir {
                    path: "/home/u/.ssh".into(),
                },
                Mount::Bind {
                    path: "/p".into(),
                    writable: true,
                },
                Mount::MaskFile {
                    path: "/p/.env".into(),
                },
            ],
        };
        let masks: Vec<_> = ns.masks().collect();
        assert_eq!(
            masks,
            [
                (1, Path::new("/home/u/.ssh"), true),
                (3, Path::new("/p/.env"), false)
            ]
        );
    }
}
