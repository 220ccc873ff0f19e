//! Rewriting the sandbox's own policy: a job that edits `vetto.toml` in the
//! project widens every later run (and the next CI job) without review.

use crate::require;
use crate::util::{Feature, World, read};

const POLICY: &str = "extends = [\"default\"]\n";

/// Runs as an unprivileged user: the project's `vetto.toml` (picked up by
/// default) is appended to, replaced by rename, and deleted. Evidence:
/// bare, it changes; sandboxed, it is byte for byte what it was.
#[test]
fn project_policy_file_is_not_writable() {
    require!(Feature::FsOnly);
    let w = World::new();
    let policy = w.project.join("vetto.toml");
    w.write(&policy, POLICY);
    let script = "echo '[filesystem]' >> vetto.toml; echo 'write = [\"/\"]' >> vetto.toml; \
                  printf 'write = [\"/\"]\\n' > evil.toml; mv -f evil.toml vetto.toml; rm -f vetto.toml";

    w.sh_bare(script);
    assert_ne!(
        read(&policy).as_deref(),
        Some(POLICY),
        "control: bare tampering failed"
    );
    w.write(&policy, POLICY);

    let out = w.sh_sandboxed(&format!("{script}; echo script-finished"));
    out.assert_ran().assert_stdout_contains("script-finished");
    assert_eq!(
        read(&policy).as_deref(),
        Some(POLICY),
        "vetto.toml changed\n{}",
        out.dump()
    );
}
