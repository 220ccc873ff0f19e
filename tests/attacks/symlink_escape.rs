//! Symlinks in the project that point at secrets or at writable places
//! outside (a malicious repository can ship them).

use crate::require;
use crate::util::{AWS_CANARY, Feature, SSH_CANARY, World, read};

/// Runs as an unprivileged user: the project ships `link -> ~/.ssh/id_rsa`
/// and `home -> $HOME`; the job cats through them. Evidence: bare, the key
/// is printed; sandboxed, it is not.
#[test]
fn symlink_in_project_to_secret_is_blocked() {
    require!(Feature::FsOnly);
    let w = World::new();
    let script = format!(
        "ln -s '{key}' link; ln -s '{home}' homelink; cat link; cat homelink/.aws/credentials",
        key = w.home.join(".ssh/id_rsa").display(),
        home = w.home.display()
    );
    let bare = w.sh_bare(&script);
    bare.assert_stdout_contains(SSH_CANARY)
        .assert_stdout_contains(AWS_CANARY);

    // The links now exist in P (as if cloned): read them inside.
    let out = w.sh_sandboxed(
        "cat link; cat homelink/.aws/credentials; cat homelink/.ssh/id_rsa; echo script-finished",
    );
    out.assert_ran()
        .assert_stdout_contains("script-finished")
        .assert_no_leak(SSH_CANARY)
        .assert_no_leak(AWS_CANARY);

    // And links the job makes itself.
    let w = World::new();
    let out = w.sh_sandboxed(&format!("{script}; echo script-finished"));
    out.assert_ran()
        .assert_stdout_contains("script-finished")
        .assert_no_leak(SSH_CANARY)
        .assert_no_leak(AWS_CANARY);
}

/// Runs as an unprivileged user: the project ships `out -> <dir outside>`;
/// the job writes through it. Evidence: bare, the file appears outside;
/// sandboxed, it does not.
#[test]
fn symlink_in_project_to_outside_dir_is_not_writable() {
    require!(Feature::FsOnly);
    let w = World::new();
    std::os::unix::fs::symlink(&w.outside, w.project.join("out")).unwrap();
    std::os::unix::fs::lchown(
        w.project.join("out"),
        Some(crate::util::user().uid),
        Some(crate::util::user().gid),
    )
    .ok();
    let target = w.outside.join("planted");
    w.sh_bare("echo PWNED > out/planted").assert_success();
    assert!(
        read(&target).is_some(),
        "control: bare write through the link failed"
    );
    std::fs::remove_file(&target).unwrap();

    let out = w.sh_sandboxed("echo PWNED > out/planted; echo script-finished");
    out.assert_ran().assert_stdout_contains("script-finished");
    assert!(
        read(&target).is_none(),
        "the job wrote through the symlink\n{}",
        out.dump()
    );
}
