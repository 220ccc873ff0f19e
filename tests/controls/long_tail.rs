//! The long tail of real jobs (issue P16): what everyday tools do that a
//! sandbox must neither break nor record as an attack.

use crate::util::{Tier, World};
use crate::{at_every_tier, require};

/// Name lookups the way tools make them: glibc's resolver (`getent`,
/// python's `getaddrinfo`) and Node's c-ares (`dns.resolve4`, its own UDP
/// socket), many at once, and a name that is allowed beside names that
/// are not.
const LOOKUPS: &str = r#"for i in 1 2 3 4 5 6 7 8; do (getent hosts "h$i.example" >/dev/null &); done;
getent hosts example.com >/dev/null; getent ahosts allowed.example >/dev/null;
python3 -c 'import socket
for n in ("a.example", "allowed.example"):
    try: socket.getaddrinfo(n, 443)
    except OSError: pass';
command -v node >/dev/null && node -e 'require("dns").resolve4("b.example", () => {}); require("dns").lookup("allowed.example", () => {})';
wait; echo lookups-done"#;

/// Runs as an unprivileged user: every kind of session (`run`, `ci`,
/// `ci --audit`, with the network off and with an allowed name) whose job
/// looks names up. Evidence: each ends as its job did, with the job's
/// output, and vetto's stderr holds no panic (the FULL DNS stub's thread
/// panicked in std's `recv_from` on a short sender address and ended the
/// session).
fn name_lookups_end_every_session_without_a_panic(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let project = w.project.to_str().unwrap();
    let sessions: [&[&str]; 5] = [
        &["run"],
        &["run", "--allow-domain", "allowed.example"],
        &["ci"],
        &["ci", "--audit"],
        &["ci", "--allow-domain", "allowed.example"],
    ];
    for session in sessions {
        let mut args = session.to_vec();
        args.extend_from_slice(&["--tier", tier.name(), "--project", project]);
        args.extend_from_slice(tier.options());
        args.extend_from_slice(&["--", "sh", "-c", LOOKUPS]);
        let out = w.vetto(&args).run();
        out.assert_stdout_contains("lookups-done");
        assert!(
            !out.stderr().contains("panicked"),
            "vetto {session:?} panicked at tier {tier}\n{}",
            out.dump()
        );
        assert!(
            [0, 3].contains(&out.code()),
            "vetto {session:?} did not end as its job did at tier {tier}\n{}",
            out.dump()
        );
    }
}
at_every_tier!(name_lookups_end_every_session_without_a_panic);
