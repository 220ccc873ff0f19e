//! Hiding a secret from the remembered glob walk (issue 12): vetto keeps
//! the listings its `**/*.key`-style masks were found with, keyed on each
//! directory's device, inode, mtime and ctime, so that a start need not
//! walk the whole project. A job that creates a secret after the cache was
//! written — in the same second, or with the directory's mtime forged back
//! with `touch -d` — must still find it masked in the next session, and no
//! job may write the cache itself.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::util::{Tier, World};
use crate::{at_every_tier, require};

const CANARY: &str = "CANARY-walk-cache-key-4e1d";

/// The world's walk cache, warmed by one sandboxed run after the
/// project's directories have settled (a directory changed less than 2 s
/// before the walk is not remembered). Returns the cache directory.
fn warm(w: &World) -> PathBuf {
    w.write(&w.project.join("src/deep/lib.rs"), "// code\n");
    std::thread::sleep(Duration::from_millis(2500));
    w.run_sandboxed(&["true"]).assert_success();
    let cache = w.home.join(".cache/vetto/walk");
    let files = std::fs::read_dir(&cache).map_or(0, |d| d.count());
    assert_eq!(
        files,
        1,
        "control: the walk was not remembered in {}",
        cache.display()
    );
    cache
}

fn read_is_blocked(w: &World, rel: &str) {
    let script = format!("cat '{rel}'");
    w.sh_bare(&script).assert_stdout_contains(CANARY);
    w.sh_sandboxed(&format!("{script}; echo script-finished"))
        .assert_ran()
        .assert_stdout_contains("script-finished")
        .assert_no_leak(CANARY);
}

fn mtime_of(p: &Path) -> String {
    let out = std::process::Command::new("stat")
        .args(["-c", "%.9Y"])
        .arg(p)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Runs as an unprivileged user: the walk is remembered, then a key is
/// created in a remembered directory right away (the same second as the
/// cache write) and read in the next session.
fn secret_created_after_cache_is_still_masked(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    warm(&w);
    w.write(
        &w.project.join("src/deep/server.key"),
        &format!("{CANARY}\n"),
    );
    read_is_blocked(&w, "src/deep/server.key");
}
at_every_tier!(secret_created_after_cache_is_still_masked);

/// Runs as an unprivileged user: as above, and the directory's mtime is
/// then set back to the remembered value with `touch -d` (which anyone
/// owning the directory can do; its ctime moves on regardless).
fn forged_mtime_does_not_hide_secret(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    warm(&w);
    let deep = w.project.join("src/deep");
    let before = mtime_of(&deep);
    w.write(&deep.join("server.key"), &format!("{CANARY}\n"));
    w.sh_bare(&format!("touch -m -d '@{before}' src/deep"))
        .assert_success();
    assert_eq!(
        mtime_of(&deep),
        before,
        "control: the mtime was not forged back"
    );
    read_is_blocked(&w, "src/deep/server.key");
}
at_every_tier!(forged_mtime_does_not_hide_secret);

/// Runs as an unprivileged user: a job allowed to write `~/.cache` plants
/// a walk cache (which would tell the next session a directory holds no
/// key). Bare it can; sandboxed the cache directory is masked.
fn planting_a_walk_cache_is_blocked(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let cache = warm(&w);
    let script = "for f in ~/.cache/vetto/walk/*; do echo planted > \"$f\"; done; \
                  echo planted > ~/.cache/vetto/walk/new; cat ~/.cache/vetto/walk/*";
    let out = w
        .sandboxed_with(&["--allow-write", "~/.cache"], &["sh", "-c", script])
        .run();
    out.assert_stdout_lacks("planted");
    for e in std::fs::read_dir(&cache).unwrap() {
        let body = std::fs::read(e.unwrap().path()).unwrap();
        assert!(
            !body.starts_with(b"planted"),
            "the job wrote the walk cache"
        );
    }
    w.sh_bare(script).assert_stdout_contains("planted");
}
at_every_tier!(planting_a_walk_cache_is_blocked);
