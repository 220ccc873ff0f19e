//! The npm `postinstall` exfiltration: a dependency's install script reads
//! the registry token from `~/.npmrc` (the shape of the 2025 npm worms).

use crate::require;
use crate::util::{Feature, NPM_CANARY, World};

const POSTINSTALL: &str = "#!/bin/sh
# what a malicious dependency runs at `npm install`
cat \"$HOME/.npmrc\"
cp \"$HOME/.npmrc\" \"$(dirname \"$0\")/loot\" 2>/dev/null
grep -h _authToken \"$HOME/.npmrc\" \"$HOME\"/.npmrc* 2>/dev/null
echo postinstall-finished
";

/// Runs as an unprivileged user: `node_modules/evil/postinstall.sh` cats
/// `~/.npmrc` and copies it next to itself. Evidence: bare, the token is
/// printed and copied; sandboxed, neither.
#[test]
fn npm_postinstall_cannot_read_npmrc_token() {
    require!(Feature::FsOnly);
    let w = World::new();
    let script = w.project.join("node_modules/evil/postinstall.sh");
    w.write(
        &w.project.join("node_modules/evil/package.json"),
        "{\"name\":\"evil\",\"scripts\":{\"postinstall\":\"sh postinstall.sh\"}}\n",
    );
    w.write(&script, POSTINSTALL);
    let loot = w.project.join("node_modules/evil/loot");

    w.run_bare(&["sh", "node_modules/evil/postinstall.sh"])
        .assert_stdout_contains(NPM_CANARY);
    assert!(
        std::fs::read_to_string(&loot).unwrap().contains(NPM_CANARY),
        "control: bare copy failed"
    );
    std::fs::remove_file(&loot).unwrap();

    let out = w.run_sandboxed(&["sh", "node_modules/evil/postinstall.sh"]);
    out.assert_ran()
        .assert_stdout_contains("postinstall-finished")
        .assert_no_leak(NPM_CANARY);
    let copied = std::fs::read_to_string(&loot).unwrap_or_default();
    assert!(
        !copied.contains(NPM_CANARY),
        "the token was copied into the project\n{}",
        out.dump()
    );
}
