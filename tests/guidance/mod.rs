//! What `vetto run` tells the user at the end of a run that something
//! needed was denied (issue 12): the rule, the flag and the policy line
//! that would allow it, the preset that fits — and never a grant of a
//! `bin/` directory or of the resolver.

use std::path::Path;

use crate::util::{Out, Tier, World};
use crate::{at_every_tier, require};

/// The guidance lines (vetto's own, on stderr) of a run.
fn guidance(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("vetto:")).collect()
}

/// The nameservers of the host's `/etc/resolv.conf`.
fn host_nameservers() -> Vec<String> {
    let resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    resolv
        .lines()
        .filter_map(|l| l.strip_prefix("nameserver"))
        .map(|ns| ns.trim().to_owned())
        .collect()
}

/// The records of `dir/session.jsonl` (none when there is none).
fn session_events(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("session.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// `job` sandboxed at the world's tier, reports in `ROOT/reports`: the
/// run and the records of its session log.
fn run_reported(w: &World, job: &[&str]) -> (Out, Vec<serde_json::Value>) {
    let dir = w.root.join("reports");
    let ran = w
        .sandboxed_with(&["--report-dir", dir.to_str().unwrap()], job)
        .run();
    (ran, session_events(&dir))
}

/// A `net-egress-blocked` violation names the looked-up `canary` and python3.
fn assert_lookup_recorded(events: &[serde_json::Value], canary: &str, ran: &Out) {
    assert!(
        events.iter().any(|v| v["type"] == "violation"
            && v["rule"] == "net-egress-blocked"
            && v["target"].to_string().contains(canary)
            && v["process"].to_string().contains("python3")),
        "the lookup is not recorded by name with python3\n{events:#?}\n{}",
        ran.dump()
    );
}

/// No violation names one of the host's resolvers.
fn assert_resolvers_unrecorded(events: &[serde_json::Value], host_ns: &[String]) {
    for ns in host_ns {
        assert!(
            !events.iter().any(|v| v["type"] == "violation"
                && v["target"].to_string().contains(&format!("\"{ns}\""))),
            "the host's resolver {ns} is recorded\n{events:#?}"
        );
    }
}

/// The guidance names the lookup of `canary` with the flag that allows it.
fn assert_guidance_names_the_host(err: &str, canary: &str) {
    assert!(
        guidance(err).iter().any(|l| l
            .contains(&format!("net-egress-blocked {canary} (a name lookup)"))
            && l.contains(&format!("to allow: --allow-domain {canary}"))),
        "{err}"
    );
}

/// Runs as an unprivileged user: a stand-in for npm (`node`, writing its
/// cache where `npm_config_cache` says, else `~/.npm`, as npm does) in a
/// project with `package.json` (bare it creates `~/.npm`). Sandboxed, the
/// write is denied and answered with the vetto-owned cache — the preset
/// and its policy line, never `--allow-write ~/.npm`, which would let the
/// job poison the cache the next unsandboxed `npm install` trusts. Taking
/// that advice, the same job succeeds and `~/.npm` is still untouched.
fn a_denied_write_into_a_host_cache_is_answered_with_a_vetto_owned_cache(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    w.write(&w.project.join("package.json"), "{\"name\":\"demo\"}\n");
    let job = [
        "node",
        "-e",
        "const c = process.env.npm_config_cache || process.env.HOME + '/.npm';\
         require('fs').mkdirSync(c + '/_cacache', {recursive: true})",
    ];
    w.bare(&job).run().assert_success();
    assert!(w.home.join(".npm/_cacache").is_dir());
    std::fs::remove_dir_all(w.home.join(".npm")).unwrap();

    // (Without `--no-auto-preset` the preset is applied by itself: the
    // project's marker and the command agree; see the end of this test.)
    let ran = w.sandboxed_with(&["--no-auto-preset"], &job).run();
    let err = ran.stderr();
    assert!(!w.home.join(".npm").exists(), "{err}");
    let lines = guidance(&err);
    assert!(
        lines.iter().any(|l| l.contains("fs-write-denied ~/.npm")
            && l.contains("to allow: --preset npm  (policy: [filesystem] caches = [\"npm\"])")),
        "{err}"
    );
    assert!(!err.contains("--allow-write ~/.npm"), "{err}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("vetto: did you mean `--preset npm`")
                && l.ends_with("(the project has package.json and the command is node)")),
        "{err}"
    );
    // The advice taken: the job writes its vetto-owned cache, and the
    // preset is not suggested again.
    let with = w.sandboxed_with(&["--preset", "npm"], &job).run();
    let err = with.stderr();
    with.assert_success();
    assert!(!err.contains("did you mean"), "{err}");
    assert!(!err.contains("fs-write-denied"), "{err}");
    // (The preset's discovery runs the host's own npm, outside the
    // sandbox, which may make `~/.npm/_logs`: the cache is what counts.)
    assert!(!w.home.join(".npm/_cacache").exists(), "{err}");
    assert!(w.vetto_cache("npm").join("_cacache").is_dir(), "{err}");
    // No flag at all: the same preset, chosen and said.
    let auto = w.sandboxed(&job).run();
    let err = auto.stderr();
    auto.assert_success();
    assert!(
        err.contains("plus preset npm (the project has package.json and the command is node;"),
        "{err}"
    );
    assert!(!err.contains("fs-write-denied"), "{err}");
    assert!(!w.home.join(".npm/_cacache").exists(), "{err}");
}
at_every_tier!(a_denied_write_into_a_host_cache_is_answered_with_a_vetto_owned_cache);

/// Runs as an unprivileged user: a job plants a program in `~/.cargo/bin`
/// (bare it can), which a later unsandboxed `cargo` would run. Sandboxed,
/// the write is denied, and the guidance says no flag allows it — never
/// `--allow-write ~/.cargo/bin` or `~/.cargo`.
fn a_write_into_a_bin_directory_is_never_proposed(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    w.write(&w.home.join(".cargo/bin/.keep"), "");
    let plant = "printf '#!/bin/sh\\necho pwned\\n' > \"$HOME/.cargo/bin/cargo-evil\"";
    w.sh_bare(plant).assert_success();
    std::fs::remove_file(w.home.join(".cargo/bin/cargo-evil")).unwrap();

    let ran = w.sandboxed(&["sh", "-c", plant]).run();
    let err = ran.stderr();
    assert!(!w.home.join(".cargo/bin/cargo-evil").exists(), "{err}");
    let lines = guidance(&err);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("fs-write-denied ~/.cargo/bin/cargo-evil")
                && l.contains("no flag: a bin/ directory")),
        "{err}"
    );
    for l in &lines {
        assert!(!l.contains("--allow-write ~/.cargo"), "{l}");
    }
}
at_every_tier!(a_write_into_a_bin_directory_is_never_proposed);

/// Runs as an unprivileged user: a lookup of a host no rule allows, under
/// filtered egress, is named by the host (with the flag that allows it),
/// not the resolver's address; with the network off, the resolver is
/// never proposed as a destination.
fn a_refused_lookup_names_the_host_not_the_resolver(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let lookup = [
        "python3",
        "-c",
        "import socket\ntry: socket.getaddrinfo('registry.example.test', 443)\nexcept OSError: pass",
    ];
    let ran = w
        .sandboxed_with(&["--allow-domain", "other.example.test"], &lookup)
        .run();
    let err = ran.stderr();
    assert!(
        guidance(&err).iter().any(|l| l
            .contains("net-egress-blocked registry.example.test (a name lookup)")
            && l.contains("to allow: --allow-domain registry.example.test  (policy: [network] allow = [\"registry.example.test\"])")),
        "{err}"
    );
    let off = w.sandboxed(&lookup).run();
    let err = off.stderr();
    for l in guidance(&err) {
        let proposes = l.split("to allow: ").nth(1).unwrap_or_default();
        assert!(
            !proposes.contains(":53"),
            "the resolver is proposed: {l}\n{err}"
        );
    }
}
at_every_tier!(a_refused_lookup_names_the_host_not_the_resolver);

/// Runs as an unprivileged user: `--allow-write ~/.cargo/git` when it
/// does not exist grants nothing the job can use (`~/.cargo` is
/// read-only; vetto creates nothing in the home by itself): bare the
/// job creates it, sandboxed it cannot, and the start says so — with
/// what to do — instead of leaving the user to wonder why the grant did
/// not work.
fn a_granted_write_path_that_does_not_exist_is_said_to_be_unusable(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let job = ["sh", "-c", "mkdir -p \"$HOME/.cargo/git/db\" && echo made"];
    w.bare(&job).run().assert_success();
    std::fs::remove_dir_all(w.home.join(".cargo/git")).unwrap();

    let ran = w
        .sandboxed_with(&["--allow-write", "~/.cargo/git"], &job)
        .run();
    ran.assert_ran().assert_stdout_lacks("made");
    assert!(!w.home.join(".cargo/git").exists(), "{}", ran.dump());
    let err = ran.stderr();
    assert!(
        guidance(&err).iter().any(|l| l.starts_with(
            "vetto: warning: --allow-write ~/.cargo/git does not exist yet, and the job cannot create it (~/.cargo is not writable)"
        ) && l.contains("create it first (mkdir -p ~/.cargo/git)")),
        "{err}"
    );
    // Created first, it is granted and nothing is said.
    w.write(&w.home.join(".cargo/git/.keep"), "");
    let again = w
        .sandboxed_with(&["--allow-write", "~/.cargo/git"], &job)
        .run();
    again.assert_success().assert_stdout_contains("made");
    assert!(
        !again.stderr().contains("does not exist yet"),
        "{}",
        again.dump()
    );
}
at_every_tier!(a_granted_write_path_that_does_not_exist_is_said_to_be_unusable);

/// The lookup job of [`a_refused_lookup_with_the_network_off_names_the_host`]:
/// the nameserver the job's resolver asks, and how the lookup ended.
const PY_LOOKUP: &str = r#"
import socket
ns = [l.split()[1] for l in open('/etc/resolv.conf') if l.split()[:1] == ['nameserver']]
print('nameserver', ' '.join(ns))
try:
    socket.getaddrinfo('NAME', 443)
    print('resolved')
except socket.gaierror as e:
    print('gaierror', e.errno)
"#;

/// The hostile lookup of
/// [`a_hostile_lookup_name_cannot_forge_vettos_last_words`]: one UDP
/// query for a name whose labels hold terminal escapes (clear the screen,
/// retitle the window) and shell words, sent to `HOST:PORT`; `wait`: the
/// answer's rcode is printed.
const PY_HOSTILE_QUERY: &str = r#"
import socket, sys
labels = [sys.argv[2].encode() + b'\x1b[2J\x1b]0;pwned\x07', b'a b;id', b'test']
q = b'\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00' + b''.join(
    bytes([len(l)]) + l for l in labels) + b'\x00\x00\x01\x00\x01'
host, port = sys.argv[1].rsplit(':', 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(60)
s.connect((host, int(port)))
s.send(q)
if sys.argv[3:] == ['wait']:
    print('rcode', s.recv(512)[3] & 15)
else:
    print('sent')
"#;

/// Runs as an unprivileged user, with the network off (the default): the
/// job looks up a name whose labels hold terminal escapes and shell words,
/// so that vetto's end-of-run line would clear the user's screen, retitle
/// the window and offer `--allow-domain` with a command to paste. Bare, the
/// raw bytes go out to whoever answers (a stand-in resolver receives the
/// escape). Sandboxed, vetto's stub answers NXDOMAIN (FULL: in the job's
/// namespace; FS-ONLY: in the namespace that leads nowhere) and records the
/// name as asked, escapes included; its last words show the name escaped
/// (no escape byte reaches the terminal) and offer no flag for it.
fn a_hostile_lookup_name_cannot_forge_vettos_last_words(tier: Tier) {
    require!(tier.feature());
    if tier == Tier::FsOnly {
        require!(crate::util::Feature::Userns);
    }
    let w = World::at(tier);
    w.write(&w.project.join("hostile.py"), PY_HOSTILE_QUERY);
    let tag = format!("vt{}x{}", std::process::id(), line!());
    let stand_in = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    stand_in
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    let at = stand_in.local_addr().unwrap().to_string();
    w.bare(&["python3", "hostile.py", &at, &tag])
        .run()
        .assert_success()
        .assert_stdout_contains("sent");
    let mut buf = [0u8; 512];
    let n = stand_in.recv(&mut buf).unwrap();
    assert!(
        buf[..n].windows(2).any(|b| b == b"\x1b]"),
        "control: the raw escape did not go out bare"
    );

    let (ran, events) = run_reported(
        &w,
        &["python3", "hostile.py", "127.0.0.53:53", &tag, "wait"],
    );
    ran.assert_success().assert_stdout_contains("rcode 3");
    assert!(
        events.iter().any(|v| v["type"] == "connection"
            && v["host"]
                .as_str()
                .is_some_and(|h| h.starts_with(&tag) && h.contains('\u{1b}'))),
        "the name is not recorded as asked\n{events:#?}\n{}",
        ran.dump()
    );
    let err = ran.stderr();
    assert!(
        !err.contains('\u{1b}') && !err.contains('\u{7}'),
        "a control byte of the job's name reached vetto's output\n{err:?}"
    );
    let line = guidance(&err)
        .into_iter()
        .find(|l| l.contains(&tag) && l.contains("(a name lookup)"))
        .unwrap_or_else(|| panic!("the lookup is not named\n{err}"));
    assert!(
        !line.contains("--allow-domain") && line.contains("no flag"),
        "{line}"
    );
}
at_every_tier!(a_hostile_lookup_name_cannot_forge_vettos_last_words);

/// Runs as an unprivileged user at FS-ONLY, where user namespaces exist:
/// with the network off (the default), a lookup of `<canary>.example.test`
/// — a name that carries data out to whoever answers for the domain — is
/// sent to the host's resolver (FS-ONLY has no namespace of the job's own,
/// and reads the host's `/etc/resolv.conf`) on a UDP socket vetto made in
/// its network namespace that leads nowhere, where vetto's DNS stub
/// answers every address on port 53: NXDOMAIN, recorded with the name and
/// python as the process, and the guidance names the host with the flag
/// that allows it, never the resolver. Bare, the same lookup is asked of
/// the host's resolver, which carries the name out.
#[test]
fn a_refused_lookup_at_fs_only_with_the_network_off_names_the_host() {
    require!(Tier::FsOnly.feature());
    require!(crate::util::Feature::Userns);
    let host_ns = host_nameservers();
    let w = World::at(Tier::FsOnly);
    let canary = format!("vt{}x{}.example.test", std::process::id(), line!());
    let script = PY_LOOKUP.replace("NAME", &canary);
    let job = ["python3", "-c", script.as_str()];

    w.bare(&job)
        .run()
        .assert_success()
        .assert_stdout_contains("gaierror");

    let (ran, events) = run_reported(&w, &job);
    ran.assert_success()
        // EAI_NONAME: an answer (NXDOMAIN), not a resolver out of reach.
        .assert_stdout_contains("gaierror -2");
    assert_lookup_recorded(&events, &canary, &ran);
    assert!(
        !events
            .iter()
            .any(|v| v["type"] == "violation" && v["rule"] == "net-socket-denied"),
        "the resolver's socket was refused\n{events:#?}"
    );
    assert_resolvers_unrecorded(&events, &host_ns);
    assert_guidance_names_the_host(&ran.stderr(), &canary);
}

/// Runs as an unprivileged user at FULL: with the network off (the
/// default), a lookup of `<canary>.example.test` — a name that carries data
/// out to whoever answers for the domain — is answered by vetto's DNS stub
/// inside the job's namespace (NXDOMAIN), recorded with the name and python
/// as the process, and the guidance names the host with the flag that
/// allows it, never the resolver. Bare, the same lookup is asked of the
/// host's resolver (its `/etc/resolv.conf` nameserver), which carries the
/// name out.
#[test]
fn a_refused_lookup_with_the_network_off_names_the_host() {
    require!(Tier::Full.feature());
    let host_ns = host_nameservers();
    let linked = std::fs::symlink_metadata("/etc/resolv.conf").is_ok_and(|m| m.is_symlink());
    if linked && host_ns != ["127.0.0.53"] {
        // vetto does not cover a symlinked resolv.conf (docs/network.md).
        assert!(
            !crate::util::required_by_name("resolv-conf"),
            "{}: VETTO_TEST_REQUIRE lists resolv-conf, but /etc/resolv.conf is a symlink naming {host_ns:?}",
            crate::util::test_name()
        );
        crate::util::skip::say(
            &crate::util::test_name(),
            "/etc/resolv.conf is a symlink naming another resolver than 127.0.0.53",
        );
        return;
    }
    let w = World::at(Tier::Full);
    let canary = format!("vt{}x{}.example.test", std::process::id(), line!());
    let script = PY_LOOKUP.replace("NAME", &canary);
    let job = ["python3", "-c", script.as_str()];

    let bare = w.bare(&job).run();
    bare.assert_success()
        .assert_stdout_contains(&format!("nameserver {}", host_ns.join(" ")))
        .assert_stdout_contains("gaierror");

    let (ran, events) = run_reported(&w, &job);
    ran.assert_success()
        .assert_stdout_contains("nameserver 127.0.0.53")
        // EAI_NONAME: an answer (NXDOMAIN), not a resolver out of reach.
        .assert_stdout_contains("gaierror -2");
    assert_lookup_recorded(&events, &canary, &ran);
    assert_resolvers_unrecorded(&events, &host_ns);
    assert_guidance_names_the_host(&ran.stderr(), &canary);
    // The same stub under filtered egress names the process too.
    let filtered = w.root.join("filtered");
    let ran = w
        .sandboxed_with(
            &[
                "--allow-domain",
                "other.example.test",
                "--report-dir",
                filtered.to_str().unwrap(),
            ],
            &job,
        )
        .run();
    ran.assert_success().assert_stdout_contains("gaierror -2");
    let log = std::fs::read_to_string(filtered.join("session.jsonl")).unwrap_or_default();
    assert!(
        log.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .any(|v| v["type"] == "violation"
                && v["target"].to_string().contains(&canary)
                && v["process"].to_string().contains("python3")),
        "{log}\n{}",
        ran.dump()
    );
}

/// The servers and the host address of the egress tests are Linux-only.
#[cfg(target_os = "linux")]
mod internal_address {
    use super::*;

    /// Runs as an unprivileged user: a mirror on the host's own network
    /// address (an internal one), reached by an allowed name pinned there
    /// (`--resolve`) — the name is still decided and its address by number
    /// stays closed: a request to it by number is refused and recorded,
    /// and the advice for it names that address, not a pin.
    pub(super) fn a_name_pinned_to_an_internal_address_reaches_it_and_the_address_by_number_does_not(
        tier: Tier,
    ) {
        require!(tier.feature());
        let Some(ip) = crate::attacks::egress::host_address_or_skip() else {
            return;
        };
        let w = World::at(tier);
        let mirror = crate::attacks::egress::Server::start_on("0.0.0.0:0", "MIRROR-BODY-5e1f");
        let port = mirror.port;
        let name = format!("mirror.test:{port}");
        let pin = format!("mirror.test:{ip}");
        let by_number = match ip {
            std::net::IpAddr::V6(v6) => format!("[{v6}]:{port}"),
            v4 => format!("{v4}:{port}"),
        };
        let script = format!(
            "curl -s -m 20 http://mirror.test:{port}/; echo; curl -s -m 20 http://{by_number}/; echo rc=$?"
        );
        let out = w
            .sandboxed_with(
                &["--allow-domain", &name, "--resolve", &pin],
                &["sh", "-c", &script],
            )
            .run();
        out.assert_stdout_contains("MIRROR-BODY-5e1f");
        assert_eq!(
            mirror.hits(),
            1,
            "the address by number was reached\n{}",
            out.dump()
        );
        let err = out.stderr();
        assert!(
            guidance(&err)
                .iter()
                .any(|l| l.contains("net-egress-blocked")
                    && l.contains(&by_number)
                    && l.contains(&format!("to allow: --allow-domain {by_number}"))),
            "{err}"
        );
    }
    at_every_tier!(
        a_name_pinned_to_an_internal_address_reaches_it_and_the_address_by_number_does_not
    );

    /// Runs as an unprivileged user, where the package registries resolve
    /// to an internal address (these machines: a reserved range): an
    /// allowed registry is refused, and the guidance names the pin of that
    /// name to that address — never an address rule, which would drop the
    /// name and TLS checks. Taken, the advice lets the same HTTPS request
    /// through, checked by name and server name; no new refusal.
    pub(super) fn an_allowed_name_that_resolves_internally_is_told_the_pin_that_lets_it_through(
        tier: Tier,
    ) {
        require!(tier.feature());
        let w = World::at(tier);
        let host = "registry.npmjs.org";
        let url = format!("https://{host}/");
        let reachable = w
            .bare(&["curl", "-sS", "-m", "20", "-o", "/dev/null", &url])
            .run()
            .code()
            == 0;
        let addr = w
            .bare(&["getent", "ahostsv4", host])
            .run()
            .stdout()
            .lines()
            .find_map(|l| l.split_whitespace().next().map(str::to_string));
        let internal = addr
            .as_deref()
            .and_then(|a| a.parse::<std::net::Ipv4Addr>().ok())
            .is_some_and(|ip| {
                let [a, b, c, _] = ip.octets();
                ip.is_private()
                    || (a == 198 && (b & 0xfe) == 18)
                    || (a == 100 && (b & 0xc0) == 64)
                    || matches!((a, b, c), (192, 0, 2) | (198, 51, 100) | (203, 0, 113))
                    || a >= 240
            });
        let (Some(addr), true, true) = (addr, reachable, internal) else {
            assert!(
                !crate::util::required_by_name("registry") || reachable,
                "{}: VETTO_TEST_REQUIRE lists registry, but {url} is unreachable",
                crate::util::test_name()
            );
            crate::util::skip::say(
                &crate::util::test_name(),
                &format!(
                    "{host} is unreachable here, or resolves to a public address: nothing to advise"
                ),
            );
            return;
        };
        let job = [
            "curl",
            "-sS",
            "-m",
            "20",
            "-o",
            "/dev/null",
            "-w",
            "code=%{http_code}",
            &url,
        ];
        let refused = w.sandboxed_with(&["--allow-domain", host], &job).run();
        let err = refused.stderr();
        let pin = format!("{host}:{addr}");
        assert!(
            guidance(&err)
                .iter()
                .any(|l| l.contains("net-egress-blocked")
                    && l.contains(&format!("to allow: --resolve {pin}"))),
            "{err}"
        );
        assert!(!err.contains(&format!("--allow-domain {addr}")), "{err}");
        let through = w
            .sandboxed_with(&["--allow-domain", host, "--resolve", &pin], &job)
            .run();
        through.assert_success().assert_stdout_contains("code=");
        assert!(
            !through.stderr().contains("net-egress-blocked"),
            "{}",
            through.stderr()
        );
    }
    at_every_tier!(an_allowed_name_that_resolves_internally_is_told_the_pin_that_lets_it_through);
}

/// Runs as an unprivileged user: a job that makes and removes 25,100
/// files at FULL (50,200 calls), where each is checked live, is told the
/// mode that checks them after the session; the same job with that mode,
/// or at FS-ONLY (where the mode does not apply), a job making a few
/// files, and one making 2,100 (a short job: tens of milliseconds of
/// checks, which were told before), are not.
#[test]
fn many_creations_checked_live_at_full_name_the_after_mode() {
    require!(Tier::Full.feature());
    require!(Tier::FsOnly.feature());
    let w = World::at(Tier::Full);
    let many = "mkdir -p out && cd out && python3 -c 'import os\nfor i in range(25100):\n open(\"f\", \"w\").close(); os.unlink(\"f\")' && echo made";
    let hinted = |err: &str| {
        guidance(err)
            .iter()
            .any(|l| l.contains("--check-creations after") && l.contains("checked one by one"))
    };
    let live = w.sandboxed(&["sh", "-c", many]).run();
    live.assert_success().assert_stdout_contains("made");
    assert!(hinted(&live.stderr()), "{}", live.dump());
    assert!(
        guidance(&live.stderr())
            .iter()
            .any(|l| l.contains("checked one by one") && l.starts_with("vetto: 5")),
        "the count of checked calls is not named\n{}",
        live.dump()
    );
    std::fs::remove_dir_all(w.project.join("out")).unwrap();

    let after = w
        .sandboxed_with(&["--check-creations", "after"], &["sh", "-c", many])
        .run();
    after.assert_success();
    assert!(!hinted(&after.stderr()), "{}", after.dump());
    std::fs::remove_dir_all(w.project.join("out")).unwrap();

    let few = w
        .sandboxed(&["sh", "-c", "for i in 1 2 3; do : > f$i; done"])
        .run();
    few.assert_success();
    assert!(!hinted(&few.stderr()), "{}", few.dump());

    let short = w
        .sandboxed(&[
            "sh",
            "-c",
            "mkdir -p out && cd out && for i in $(seq 2100); do : > f$i; done; echo made",
        ])
        .run();
    short.assert_success().assert_stdout_contains("made");
    assert!(!hinted(&short.stderr()), "{}", short.dump());
    std::fs::remove_dir_all(w.project.join("out")).unwrap();

    let fs_only = w.sandboxed_at("fs-only", &[], &["sh", "-c", many]).run();
    fs_only.assert_success();
    assert!(!hinted(&fs_only.stderr()), "{}", fs_only.dump());
}
