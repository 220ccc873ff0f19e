//! Creating a user namespace inside the sandbox: it hands the job full
//! capabilities over new mount and network namespaces, the kernel attack
//! surface behind most container escapes.

use crate::util::{Feature, Tier, World};
use crate::{at_every_tier, require};

/// Runs as an unprivileged user: `unshare -Ur` and a raw
/// `unshare(CLONE_NEWUSER)`. Evidence: bare, `unshare -Ur id -u` prints 0;
/// sandboxed, it fails and the probe gets EPERM.
fn unshare_user_namespace_is_blocked(tier: Tier) {
    require!(tier.feature());
    require!(Feature::Userns);
    let w = World::at(tier);
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
at_every_tier!(unshare_user_namespace_is_blocked);

/// Runs as an unprivileged user: `clone3` with `CLONE_NEWUSER`. Its flags
/// are in memory, out of the filter's sight, so a filter that only checked
/// `clone`'s flags would let it make the namespace. Evidence: bare, the
/// child is made in a new user namespace; sandboxed, `clone3` answers
/// `ENOSYS` (libc then falls back to `clone`, whose flags are checked).
fn clone3_hides_new_namespace_flags_from_the_filter_in_vain(tier: Tier) {
    require!(tier.feature());
    require!(Feature::Userns);
    let w = World::at(tier);
    w.probe_bare(&["clone3-newuser"]).assert_ok();
    w.probe_sandboxed(&["clone3-newuser"])
        .assert_blocked_with(&["ENOSYS"]);
}
at_every_tier!(clone3_hides_new_namespace_flags_from_the_filter_in_vain);
