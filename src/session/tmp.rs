//! The session's own directories on the host: the per-session `$TMPDIR`
//! and the notification spares, removed when the session ends.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::sys::safe_fs;

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
    making: Option<std::thread::JoinHandle<Result<safe_fs::Dir, safe_fs::SafeFsError>>>,
    created: bool,
}

impl SessionTmp {
    /// A name for the session directory (under `$TMPDIR`), made in the
    /// background when the plan is `likely` to need it. The name is
    /// unpredictable (80 bits from the kernel) and the directory must be
    /// new: nothing planted under a guessed name is ever used.
    pub fn reserve(likely: bool) -> anyhow::Result<Self> {
        let nonce = safe_fs::random_hex(10)?;
        let path = std::env::temp_dir().join(format!("vetto-{}-{nonce}", std::process::id()));
        let target = path.clone();
        let making = likely
            .then(|| {
                std::thread::Builder::new()
                    .name("vetto-tmpdir".into())
                    .spawn(move || safe_fs::create_private_dir(&target, safe_fs::Parents::Followed))
                    .ok()
            })
            .flatten();
        Ok(SessionTmp {
            path,
            making,
            created: false,
        })
    }

    /// Wait for the directory (or make it now).
    pub fn create(&mut self) -> anyhow::Result<()> {
        let made = match self.making.take().map(std::thread::JoinHandle::join) {
            Some(Ok(result)) => result,
            _ => safe_fs::create_private_dir(&self.path, safe_fs::Parents::Followed),
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
        if let Some(Ok(Ok(_))) = self.making.take().map(std::thread::JoinHandle::join) {
            self.created = true;
        }
        if self.created {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}
