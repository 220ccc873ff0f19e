//! What only the FULL tier promises (issue 3, "Done when"): the job lives
//! in its own user, mount, PID, network, IPC and UTS namespaces, sees a
//! root holding only what the policy allows, and keeps the caller's
//! identity without any capability. Each attack is proven both ways: it
//! works bare (same user, same environment) and fails at `--tier full`.
//!
//! Shared with FS-ONLY, and run at FULL by `at_every_tier!` elsewhere:
//! a host TCP listener on 127.0.0.1 is unreachable
//! (`attacks::network::tcp_connect_to_loopback_is_blocked::at_full`), a host
//! abstract socket too (`attacks::abstract_socket::…::at_full`), the
//! ssh-agent stand-in is absent (ENOENT, `attacks::ssh_agent::…::at_full`),
//! `kill` of a host pid finds nothing (ESRCH, `attacks::signals::…::at_full`),
//! a `setsid` daemon dies with the session and with `kill -9` of vetto
//! (`attacks::daemon`, `supervisor::sigkill_of_vetto_kills_the_sandboxed_tree`),
//! `unshare -Ur` fails (`attacks::userns`).

use std::path::Path;

use crate::require;
use crate::util::{
    AWS_CANARY, DOTENV_CANARY, Feature, NPM_CANARY, Out, SSH_CANARY, Tier, World, read,
    unique_sleep_arg, user,
};

/// A world whose sandboxed runs use `--tier full`.
fn full() -> World {
    World::at(Tier::Full)
}

/// The value printed as `key=value` on its own line.
fn field(out: &Out, key: &str) -> Option<String> {
    out.stdout()
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_owned))
}

/// Runs as an unprivileged user: a `sleep` the test started outside is
/// listed by `ps` and present in `/proc` bare; inside, `ps -e` lists only
/// the sandbox (vetto's init as PID 1, the shell, `ps` itself) and
/// `/proc/PID` of the host process does not exist.
#[test]
fn host_processes_are_invisible_in_ps_and_proc() {
    require!(Feature::Full);
    let w = full();
    let canary = w.outside_sleep(&[]);
    let pid = canary.pid();
    let script = format!(
        "ps -eo pid=,args=; test -e /proc/{pid}/status && echo HOST-PID-\"\"VISIBLE; echo script-finished"
    );

    w.sh_bare(&script)
        .assert_stdout_contains(&canary.marker)
        .assert_stdout_contains("HOST-PID-VISIBLE");

    let out = w.sh_sandboxed(&script);
    out.assert_success()
        .assert_stdout_contains("script-finished")
        .assert_stdout_lacks(&canary.marker)
        .assert_stdout_lacks("HOST-PID-VISIBLE");
    let listed: Vec<(i32, String)> = out
        .stdout()
        .lines()
        .filter_map(|l| {
            let (pid, args) = l.trim_start().split_once(' ')?;
            Some((pid.parse().ok()?, args.to_owned()))
        })
        .collect();
    let init = listed.iter().find(|(p, _)| *p == 1);
    assert!(
        init.is_some_and(|(_, args)| args.contains("__stage")),
        "PID 1 is not vetto's init: {listed:?}\n{}",
        out.dump()
    );
    for (p, args) in &listed {
        assert!(
            *p == 1 || args.starts_with("sh -c") || args.starts_with("ps "),
            "ps inside lists a process that is not the sandbox's: {p} {args}\n{}",
            out.dump()
        );
    }
    assert!(canary.alive(), "the canary died");
}

/// Runs as an unprivileged user: signal, `kill -9 -1` (every process the
/// user may signal) and ptrace against a `sleep` started outside. Evidence:
/// bare, `kill -0` reaches it; inside, `kill` finds no such process, ptrace
/// is refused, and afterwards the sleep is alive and untraced.
#[test]
fn kill_and_ptrace_of_host_processes_find_nothing() {
    require!(Feature::Full);
    let w = full();
    let victim = w.outside_sleep(&[]);
    let pid = victim.pid().to_string();
    w.sh_bare(&format!("kill -0 {pid} && echo REACHED"))
        .assert_stdout_contains("REACHED");

    let out = w.sh_sandboxed(&format!(
        "kill -0 {pid} && echo REACHED; kill -KILL {pid} && echo SENT; echo script-finished"
    ));
    out.assert_success()
        .assert_stdout_contains("script-finished")
        .assert_stdout_lacks("REACHED")
        .assert_stdout_lacks("SENT")
        .assert_stderr_contains("No such process");

    w.probe_sandboxed(&["signal", &pid, "KILL"])
        .assert_blocked_with(&["ESRCH"]);
    // seccomp refuses ptrace before the kernel looks the pid up.
    w.probe_sandboxed(&["ptrace-attach", &pid])
        .assert_blocked_with(&["EPERM", "ESRCH"]);

    // `kill -9 -1` kills the shell itself; the host process must survive.
    let out = w.sh_sandboxed("kill -KILL -1; echo not-reached");
    out.assert_ran();
    assert!(victim.alive(), "the outside process died\n{}", out.dump());
    let status = read(format!("/proc/{pid}/status").as_ref()).unwrap_or_default();
    assert!(
        status.contains("TracerPid:\t0"),
        "the outside process is traced: {status}"
    );
}

/// Runs as an unprivileged user: setuid-root `passwd -S` and setgid-shadow
/// `chage -l` read `/etc/shadow` bare; inside they gain nothing (no new
/// privileges, no capability of any kind, not even in the bounding set).
#[test]
fn setuid_binaries_gain_nothing() {
    require!(Feature::Full);
    let w = full();
    let me = &user().name;
    let script = format!(
        "chage -l {me}; echo passwd-says=$(passwd -S {me}); \
         grep -E '^(NoNewPrivs|CapInh|CapPrm|CapEff|CapBnd|CapAmb):' /proc/self/status; echo script-finished"
    );
    let out = w.sh_sandboxed(&script);
    out.assert_ran().assert_stdout_contains("script-finished");
    for line in [
        "NoNewPrivs:\t1",
        "CapInh:\t0000000000000000",
        "CapPrm:\t0000000000000000",
        "CapEff:\t0000000000000000",
        "CapBnd:\t0000000000000000",
        "CapAmb:\t0000000000000000",
    ] {
        out.assert_stdout_contains(line);
    }

    let chage = std::path::Path::new("/usr/bin/chage");
    if chage.exists() {
        let bare = w.sh_bare(&format!("chage -l {me}"));
        if bare.code() == 0 {
            // The setgid bit read /etc/shadow bare: inside it must not.
            out.assert_stdout_lacks("Last password change");
        }
    }
    // Bare, euid 0 reads the shadow entry (status, date, ages); inside,
    // passwd runs with the caller's euid and sees none of it.
    let bare = w.sh_bare(&format!("echo passwd-says=$(passwd -S {me})"));
    let words = |o: &Out| field(o, "passwd-says").map_or(0, |l| l.split_whitespace().count());
    if words(&bare) > 2 {
        assert!(
            words(&out) <= 2,
            "passwd -S read /etc/shadow inside the sandbox\n{}",
            out.dump()
        );
    }
}

/// Runs as an unprivileged user: the job's uid and gid are the caller's
/// (not root), and its uid/gid maps map exactly that one id.
#[test]
fn job_keeps_the_callers_uid_and_gid() {
    require!(Feature::Full);
    let w = full();
    let u = user();
    let out = w.sh_sandboxed(
        "echo uid=$(id -u); echo gid=$(id -g); echo uid_map=$(echo $(cat /proc/self/uid_map)); echo gid_map=$(echo $(cat /proc/self/gid_map))",
    );
    out.assert_success();
    assert_eq!(
        field(&out, "uid"),
        Some(u.uid.to_string()),
        "{}",
        out.dump()
    );
    assert_eq!(
        field(&out, "gid"),
        Some(u.gid.to_string()),
        "{}",
        out.dump()
    );
    assert_eq!(
        field(&out, "uid_map"),
        Some(format!("{0} {0} 1", u.uid)),
        "{}",
        out.dump()
    );
    assert_eq!(
        field(&out, "gid_map"),
        Some(format!("{0} {0} 1", u.gid)),
        "{}",
        out.dump()
    );
}

/// Runs as an unprivileged user: the job's host name is `vetto` (its own
/// UTS namespace), not the host's.
#[test]
fn hostname_is_vetto() {
    require!(Feature::Full);
    let w = full();
    let bare = w.sh_bare("echo name=$(uname -n)");
    let out = w.sh_sandboxed("echo name=$(uname -n)");
    out.assert_success();
    assert_eq!(
        field(&out, "name").as_deref(),
        Some("vetto"),
        "{}",
        out.dump()
    );
    assert_ne!(
        field(&bare, "name").as_deref(),
        Some("vetto"),
        "control: the host itself is named vetto"
    );
}

/// Runs as an unprivileged user: a program that looks up its own host name
/// (git's ident does, to build `user@host.domain`) finds `vetto` in the
/// sandbox's /etc/hosts, as it finds the host's name on the host, instead
/// of asking DNS: with the network off that query was recorded as a
/// refused name lookup (a violation the job never meant), and with host
/// networking it would carry the name to the host's resolver.
#[test]
fn the_sandbox_host_name_resolves_without_a_dns_query() {
    require!(Feature::Full);
    let w = full();
    // Both ways of asking: getaddrinfo with the canonical name (git's
    // ident), and `gethostbyname2` for IPv6 and then IPv4 (`getent hosts`).
    let script = "python3 -c 'import socket; \
         found = socket.getaddrinfo(socket.gethostname(), None, 0, 0, 0, socket.AI_CANONNAME); \
         print(\"addrs=\" + \",\".join(sorted({a[4][0] for a in found})))' \
         && echo hosts=$(getent hosts \"$(uname -n)\" | awk '{print $1}')";
    for net in ["off", "host"] {
        let report = w.root.join(format!("reports-{net}"));
        let out = w
            .sandboxed_with(
                &["--net", net, "--report-dir", report.to_str().unwrap()],
                &["sh", "-c", script],
            )
            .run();
        out.assert_success();
        // Loopback only: the sandbox's own name leads nowhere else.
        for key in ["addrs", "hosts"] {
            let found = field(&out, key).unwrap_or_default();
            assert!(
                !found.is_empty()
                    && found
                        .split([',', ' '])
                        .all(|a| a == "::1" || a.starts_with("127.")),
                "--net {net}: {key}={found}\n{}",
                out.dump()
            );
        }
        let log = read(&report.join("session.jsonl")).unwrap();
        assert!(
            !log.lines().any(|l| l.contains("\"type\":\"violation\"")),
            "--net {net}: the lookup of the sandbox's own name was recorded\n{log}"
        );
        assert!(
            !out.stderr().contains("denied"),
            "--net {net}\n{}",
            out.dump()
        );
    }
}

/// Runs as an unprivileged user: `/tmp` is the sandbox's own. A file the
/// job writes to `/tmp` is not on the host's `/tmp` afterwards, and a file
/// on the host's `/tmp` is not visible inside. Evidence: bare, both work.
#[test]
fn tmp_is_private() {
    require!(Feature::Full);
    let w = full();
    let tag = unique_sleep_arg();
    let dropped = format!("/tmp/vetto-dropped-{tag}");
    let host_file = format!("/tmp/vetto-host-canary-{tag}");
    let host_canary = format!("CANARY-host-tmp-{tag}");
    std::fs::write(&host_file, &host_canary).unwrap();
    let script = format!("cat '{host_file}'; echo PWNED > '{dropped}'; echo script-finished");

    let bare = w.sh_bare(&script);
    let bare_dropped = read(dropped.as_ref());
    let _ = std::fs::remove_file(&dropped);
    bare.assert_stdout_contains(&host_canary);
    assert!(bare_dropped.is_some(), "control: bare write to /tmp failed");

    let out = w.sh_sandboxed(&script);
    let leaked = read(dropped.as_ref());
    let _ = std::fs::remove_file(&dropped);
    let _ = std::fs::remove_file(&host_file);
    out.assert_success()
        .assert_stdout_contains("script-finished")
        .assert_no_leak(&host_canary);
    assert!(
        leaked.is_none(),
        "the job's /tmp file {dropped} is on the host\n{}",
        out.dump()
    );
}

/// Runs as an unprivileged user: the masked secrets are absent from the
/// view or empty stand-ins: `~/.ssh/id_rsa`, `~/.aws/credentials`,
/// `~/.npmrc`, keys and `.env` files deeper in the project, and the
/// project's `.env`, which at FULL is an empty file (docs/tiers.md). No
/// canary appears.
#[test]
fn masked_secrets_read_as_absent_or_empty() {
    require!(Feature::Full);
    let w = full();
    let files = [
        (".ssh/id_rsa", SSH_CANARY),
        (".aws/credentials", AWS_CANARY),
        (".npmrc", NPM_CANARY),
    ];
    let mut script = String::new();
    for (rel, _) in files {
        script += &format!(
            "f=\"$HOME/{rel}\"; if [ -e \"$f\" ]; then echo \"{rel}=$(wc -c < \"$f\")\"; cat \"$f\"; else echo '{rel}=absent'; fi; "
        );
    }
    // Secrets the default policy masks inside the project, planted here.
    let in_project = [
        (".env.production", "CANARY-env-production-1"),
        ("deploy/id_ed25519", "CANARY-deploy-key-2"),
        ("config/.env", "CANARY-nested-dotenv-3"),
        ("certs/server.key", "CANARY-tls-key-4"),
    ];
    for (rel, canary) in in_project {
        w.write(&w.project.join(rel), &format!("{canary}\n"));
        script += &format!(
            "if [ -e '{rel}' ]; then echo \"{rel}=$(wc -c < '{rel}')\"; cat '{rel}'; else echo '{rel}=absent'; fi; "
        );
    }
    script += "echo \".env=$(wc -c < .env)\"; cat .env; echo script-finished";

    let bare = w.sh_bare(&script);
    for (_, canary) in files {
        bare.assert_stdout_contains(canary);
    }
    for (_, canary) in in_project {
        bare.assert_stdout_contains(canary);
    }
    bare.assert_stdout_contains(DOTENV_CANARY);

    let out = w.sh_sandboxed(&script);
    out.assert_ran().assert_stdout_contains("script-finished");
    for (rel, canary) in files {
        out.assert_no_leak(canary);
        let seen = field(&out, rel);
        assert!(
            matches!(seen.as_deref(), Some("absent" | "0")),
            "~/{rel} is neither absent nor empty inside: {seen:?}\n{}",
            out.dump()
        );
    }
    for (rel, canary) in in_project {
        out.assert_no_leak(canary);
        let seen = field(&out, rel);
        assert!(
            matches!(seen.as_deref(), Some("absent" | "0")),
            "P/{rel} is neither absent nor empty inside: {seen:?}\n{}",
            out.dump()
        );
    }
    out.assert_no_leak(DOTENV_CANARY);
    assert_eq!(
        field(&out, ".env").as_deref(),
        Some("0"),
        "the masked .env is not an empty stand-in\n{}",
        out.dump()
    );
}

/// Runs as an unprivileged user: the job's own network namespace has a
/// working loopback and no other interface: an HTTP server the job starts
/// on 127.0.0.1 answers the job's own client.
#[test]
fn local_server_on_loopback_inside_works() {
    require!(Feature::Full);
    let w = full();
    let script = "import http.server, threading, urllib.request\n\
srv = http.server.HTTPServer(('127.0.0.1', 0), http.server.SimpleHTTPRequestHandler)\n\
threading.Thread(target=srv.serve_forever, daemon=True).start()\n\
body = urllib.request.urlopen('http://127.0.0.1:%d/README.md' % srv.server_port, timeout=10).read()\n\
print(body.decode().strip())\n\
ifaces = [l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]]\n\
print('interfaces=' + ','.join(ifaces))\n";
    let out = w.run_sandboxed(&["python3", "-c", script]);
    out.assert_success()
        .assert_stdout_contains("# demo project");
    assert_eq!(
        field(&out, "interfaces").as_deref(),
        Some("lo"),
        "the sandbox has interfaces besides loopback\n{}",
        out.dump()
    );
}

/// Runs as an unprivileged user: host directories that hold sockets
/// (`/run`, `/var/run`: docker, D-Bus, agents) are not in the view.
#[test]
fn host_socket_directories_are_not_in_the_view() {
    require!(Feature::Full);
    let w = full();
    let script =
        "for d in /run /var/run; do test -e $d && echo \"present $d\"; done; echo script-finished";
    let bare = w.sh_bare(script);
    if !bare.stdout().contains("present /run") {
        eprintln!("NOTE {}: this host has no /run", crate::util::test_name());
    }
    w.sh_sandboxed(script)
        .assert_success()
        .assert_stdout_contains("script-finished")
        .assert_stdout_lacks("present");
}

/// Runs as an unprivileged user: `--tier auto` (the default) picks FULL on
/// a host that offers it; the job sees the tier in `VETTO_TIER`.
#[test]
fn auto_picks_full_where_user_namespaces_work() {
    require!(Feature::Full);
    let w = full();
    let project = w.project.to_str().unwrap();
    let out = w
        .vetto(&[
            "run",
            "--project",
            project,
            "--",
            "sh",
            "-c",
            "echo tier=$VETTO_TIER",
        ])
        .run();
    out.assert_success();
    assert_eq!(
        field(&out, "tier").as_deref(),
        Some("full"),
        "{}",
        out.dump()
    );
    // The variable follows the tier that ran (not a constant).
    let out = w
        .sandboxed_at("fs-only", &[], &["sh", "-c", "echo tier=$VETTO_TIER"])
        .run();
    assert_eq!(
        field(&out, "tier").as_deref(),
        Some("fs-only"),
        "{}",
        out.dump()
    );
}

/// Runs as an unprivileged user, with a project outside `/tmp`: the job's
/// `TMPDIR` is the private `/tmp` itself, writable, and what the job
/// leaves there is not on the host afterwards.
#[test]
fn tmpdir_is_the_private_tmp_when_the_project_is_elsewhere() {
    require!(Feature::Full);
    let w = World::at_in(Tier::Full, Path::new("/var/tmp"));
    let tag = unique_sleep_arg();
    let out = w.sh_sandboxed(&format!(
        "echo tmpdir=$TMPDIR; echo x > \"$TMPDIR/vetto-left-{tag}\"; mktemp >/dev/null && echo mktemp-ok"
    ));
    out.assert_success().assert_stdout_contains("mktemp-ok");
    assert_eq!(
        field(&out, "tmpdir").as_deref(),
        Some("/tmp"),
        "{}",
        out.dump()
    );
    let left = Path::new("/tmp").join(format!("vetto-left-{tag}"));
    let on_host = left.exists();
    let _ = std::fs::remove_file(&left);
    assert!(
        !on_host,
        "the job's temp file is on the host's /tmp\n{}",
        out.dump()
    );
}

/// Runs as an unprivileged user inside a user namespace whose
/// `user.max_user_namespaces` is 0 (a per-namespace limit: the rest of the
/// host is untouched), which is what a host without unprivileged user
/// namespaces looks like to vetto. Evidence: `--tier auto` runs the job at
/// FS-ONLY, and `--tier full` refuses with 125 naming the missing feature.
#[test]
fn auto_falls_back_to_fs_only_where_user_namespaces_are_off() {
    require!(Feature::Full);
    let w = full();
    let vetto = crate::util::vetto_bin().to_str().unwrap();
    let project = w.project.to_str().unwrap();
    let script = format!(
        "echo 0 > /proc/sys/user/max_user_namespaces || exit 99; \
         {vetto} run --project '{project}' -- sh -c 'echo tier=$VETTO_TIER'; echo auto-rc=$?; \
         {vetto} run --tier full --project '{project}' -- true; echo full-rc=$?"
    );
    let out = w.run_bare(&["unshare", "-Ur", "sh", "-c", &script]);
    out.assert_success();
    assert_eq!(
        field(&out, "tier").as_deref(),
        Some("fs-only"),
        "{}",
        out.dump()
    );
    assert_eq!(
        field(&out, "auto-rc").as_deref(),
        Some("0"),
        "{}",
        out.dump()
    );
    assert_eq!(
        field(&out, "full-rc").as_deref(),
        Some("125"),
        "{}",
        out.dump()
    );
    out.assert_stderr_contains("user namespaces")
        .assert_stderr_contains("--tier fs-only");
}

/// Runs as an unprivileged user: a System V message queue the test
/// creates outside (as the same user) is listed and removable bare; inside
/// (own IPC namespace) it does not exist, and removing it fails.
#[test]
fn host_sysv_ipc_objects_are_invisible() {
    require!(Feature::Full);
    let w = full();
    let made = w.sh_bare("ipcmk -Q");
    made.assert_success();
    let id: String = made
        .stdout()
        .rsplit(':')
        .next()
        .unwrap_or("")
        .trim()
        .to_owned();
    assert!(
        id.parse::<u32>().is_ok(),
        "ipcmk printed no id\n{}",
        made.dump()
    );
    // `ipcs -i` exits 0 even for a missing id: look the id up in the
    // kernel's own table of this IPC namespace instead.
    let probe = format!(
        "awk -v id={id} 'NR > 1 && $2 == id {{ f = 1 }} END {{ exit !f }}' /proc/sysvipc/msg && echo QUEUE-\"\"SEEN; echo script-finished"
    );
    w.sh_bare(&probe).assert_stdout_contains("QUEUE-SEEN");

    // The table is readable inside, so a missing line means a missing queue.
    let out = w.sh_sandboxed(&format!(
        "test -r /proc/sysvipc/msg && echo table-readable; {probe}; ipcrm -q {id} && echo RE\"\"MOVED"
    ));
    let still_there = w.sh_bare(&probe).stdout().contains("QUEUE-SEEN");
    w.sh_bare(&format!("ipcrm -q {id}"));
    out.assert_ran()
        .assert_stdout_contains("script-finished")
        .assert_stdout_contains("table-readable")
        .assert_stdout_lacks("QUEUE-SEEN")
        .assert_stdout_lacks("REMOVED");
    assert!(
        still_there,
        "the job removed the host's queue\n{}",
        out.dump()
    );
}

/// Runs as an unprivileged user: `/dev` holds only the harmless devices
/// (no disks, no `kmsg`, no `mem`), and `/dev/pts` is the sandbox's own:
/// no terminal of the host is in it.
#[test]
fn dev_holds_only_the_minimal_devices() {
    require!(Feature::Full);
    let w = full();
    let allowed = [
        "fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin", "stdout", "tty",
        "urandom", "zero", "core", "mqueue",
    ];
    let out = w.sh_sandboxed("echo dev=$(ls -A /dev); echo pts=$(ls -A /dev/pts)");
    out.assert_success();
    let dev = field(&out, "dev").unwrap_or_default();
    for name in dev.split_whitespace() {
        assert!(
            allowed.contains(&name),
            "/dev inside holds {name}\n{}",
            out.dump()
        );
    }
    for must in ["null", "zero", "urandom", "pts", "ptmx"] {
        assert!(
            dev.split_whitespace().any(|n| n == must),
            "/dev inside lacks {must}\n{}",
            out.dump()
        );
    }
    let pts = field(&out, "pts").unwrap_or_default();
    assert!(
        pts.split_whitespace().all(|n| n == "ptmx"),
        "/dev/pts inside holds a terminal: {pts}\n{}",
        out.dump()
    );
}

/// Runs as an unprivileged user. vetto creates the FULL tier's namespaces
/// while it still loads the policy, guessing from the command line (no
/// `--net host`: a network namespace). A policy *file* that asks for the
/// host network must still get it: the guess is thrown away and the job
/// reaches a listener of the host on 127.0.0.1 — through `vetto ci`, so
/// the replaced stage's output still arrives through vetto's pipes. With
/// the default policy, the same job reaches nothing.
#[test]
fn a_policy_file_asking_for_the_host_network_gets_it_despite_the_early_namespaces() {
    require!(Feature::Full);
    let w = full();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = format!(
        "python3 -c 'import socket; s=socket.create_connection((\"127.0.0.1\", {port}), 3); s.sendall(b\"reached\")' \
         2>/dev/null && echo connected=yes || echo connected=no"
    );
    let project = w.project.to_str().unwrap().to_owned();
    let report = w.project.join("vetto-report");
    let ci = |w: &World| {
        w.vetto(&[
            "ci",
            "--fail-on",
            "never",
            "--project",
            &project,
            "--report-dir",
            report.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &script,
        ])
        .run()
    };

    let walled = ci(&w);
    walled.assert_success();
    assert_eq!(
        field(&walled, "connected").as_deref(),
        Some("no"),
        "{}",
        walled.dump()
    );

    w.write(
        &w.project.join("vetto.toml"),
        "extends = [\"default\"]\n\n[network]\nmode = \"host\"\n",
    );
    let open = ci(&w);
    open.assert_success();
    assert_eq!(
        field(&open, "connected").as_deref(),
        Some("yes"),
        "{}",
        open.dump()
    );
    listener.set_nonblocking(true).unwrap();
    assert!(
        listener.accept().is_ok(),
        "the host listener saw nothing\n{}",
        open.dump()
    );
}
