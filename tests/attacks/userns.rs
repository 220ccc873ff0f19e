//! Creating a user namespace inside the sandbox: it hands the job full
//! capabilities over new mount and network namespaces, the kernel attack
//! surface behind most container escapes.

use crate::require;
use crate::util::{Feature, World};

/// Runs as an unprivileged user: `unshare -Ur` and a raw
/// `unshare(CLONE_NEWUSER)`. Evidence: bare, `unshare -Ur id -u` prints 0;
/// sandboxed, it fails and the probe gets EPERM.
#[test]
fn unshare_user_namespace_is_blocked() {
    require!(Feature::FsOnly);
    require!(Feature::Userns);
    let w = World::new();
    w.run_bare(&["unshare", "-Ur", "id", "-u"])
        .assert_success()
        .assert_stdout_contains("0");
    w.probe_bare(&["unshare-user"]).assert_ok();

    let out = w.sh_sandboxed("unshare -Ur id -u && echo ESCAPED; echo script-finished");
    out.assert_ran()
        .assert_stdout_contains("script-finished")
        .assert_stdout_lacks("ESCAPED");
    w.probe_sandboxed(&["unshare-user"]).assert_blocked();
}
