//! The session's own directories on the host: the per-session `$TMPDIR`
//! and the notification spares, removed when the session ends.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// A directory vetto made for the session, removed with everything in it.
pub(super) struct RemoveOnDrop(pub(super) Option<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(dir) = &self.0 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The per-session temporary directory: named before the policy is
/// loaded (`${TMPDIR}` expands to it), created only if the plan needs it
/// on the host, removed when the session ends.
pub struct SessionTmp {
    path: PathBuf,
    /// The directory is made in the background while vetto loads and
    /// plans (a fresh directory on a busy ext4 /tmp costs a good part of
    /// the start-up); joined when the plan needs it or the session ends.
    making: Option<std::thread::JoinHandle<std::io::Result<()>>>,
    created: bool,
}

impl SessionTmp {
    /// A name for the session directory (under `$TMPDIR`), made in the
    /// background when the plan is `likely` to need it.
    pub fn reserve(likely: bool) -> Self {
        let path = std::env::temp_dir().join(format!("vetto-{}-{}", std::process::id(), nonce()));
        let target = path.clone();
        let making = likely
            .then(|| {
                std::thread::Builder::new()
                    .name("vetto-tmpdir".into())
                    .spawn(move || std::fs::DirBuilder::new().mode(0o700).create(&target))
                    .ok()
            })
            .flatten();
        SessionTmp {
            path,
            making,
            created: false,
        }
    }

    /// Wait for the directory (or make it now).
    pub fn create(&mut self) -> anyhow::Result<()> {
        let made = match self.making.take().map(std::thread::JoinHandle::join) {
            Some(Ok(result)) => result,
            _ => std::fs::DirBuilder::new().mode(0o700).create(&self.path),
        };
        made.with_context(|| {
            format!(
                "cannot create the session directory {}",
                self.path.display()
            )
        })?;
        self.created = true;
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SessionTmp {
    fn drop(&mut self) {
        // Made in the background but never needed: remove it too.
        if let Some(Ok(Ok(()))) = self.making.take().map(std::thread::JoinHandle::join) {
            self.created = true;
        }
        if self.created {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

fn nonce() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}
