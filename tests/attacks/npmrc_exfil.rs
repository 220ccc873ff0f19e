//! The npm `postinstall` exfiltration: a dependency's install script reads
//! the registry token from `~/.npmrc` (the shape of the 2025 npm worms).

use crate::util::{NPM_CANARY, Tier, World};
use crate::{at_every_tier, require};

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
fn npm_postinstall_cannot_read_npmrc_token(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
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
at_every_tier!(npm_postinstall_cannot_read_npmrc_token);

/// Runs as an unprivileged user, under `--preset npm`, with a `~/.npmrc`
/// that holds a registry token next to npm's settings (what
/// `actions/setup-node` writes). npm reading its own configuration is no
/// finding: it sees its settings (`color=false` here) without the token,
/// and `vetto ci` passes with zero violations. A package's script in the
/// same job that reads `~/.npmrc` is still refused, recorded as
/// `secret-read-denied` at FULL (FS-ONLY: refused by Landlock, unseen),
/// and gets nothing; the copy npm reads holds no token either.
fn npm_reads_its_own_settings_without_the_token_and_no_finding(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    w.write(
        &w.home.join(".npmrc"),
        &format!(
            "color=false\nupdate-notifier=false\n//registry.npmjs.org/:_authToken={NPM_CANARY}\n"
        ),
    );
    let ci = |script: &str| w.ci_sh_with(&["--preset", "npm"], script);
    let (out, log) = ci("npm config get color; cat \"$npm_config_userconfig\"");
    out.assert_stdout_contains("false")
        .assert_no_leak(NPM_CANARY);
    assert_eq!(out.code(), 0, "{}", out.dump());
    let violations = crate::util::violation_lines(&log);
    assert!(violations.is_empty(), "{violations:?}\n{}", out.dump());
    out.assert_stderr_contains("without its credentials");

    let (out, log) = ci("npm config get color; cat \"$HOME/.npmrc\"; echo postinstall-finished");
    out.assert_stdout_contains("postinstall-finished")
        .assert_no_leak(NPM_CANARY);
    if tier == Tier::Full {
        assert_eq!(out.code(), 3, "{}", out.dump());
        let reads: Vec<_> = log
            .lines()
            .filter(|l| {
                l.contains("\"type\":\"violation\"") && l.contains("\"secret-read-denied\"")
            })
            .collect();
        assert!(
            !reads.is_empty()
                && reads
                    .iter()
                    .all(|l| l.contains(".npmrc") && !l.contains("node")),
            "the script's read, and only it, is recorded: {reads:?}\n{}",
            out.dump()
        );
    }
}
at_every_tier!(npm_reads_its_own_settings_without_the_token_and_no_finding);

const PIP_CANARY: &str = "CANARY-pip-index-token-5c1e";
const NETRC_CANARY: &str = "CANARY-netrc-password-93ab";

/// Runs as an unprivileged user, with a user `pip.conf` whose index URL
/// carries a token and a `~/.netrc` with a password for that index (a
/// private-index setup). pip reading its own configuration, and Python's
/// requests (pip's own copy) looking in the netrc as it does on every
/// request, are no finding: pip sees its settings (`timeout = 7`, the
/// index without its user part), requests finds no password, and `vetto
/// ci` passes with zero violations. Bare, both tools get the secrets. A
/// script in the same job that reads either file is still refused,
/// recorded as `secret-read-denied` at FULL, and gets nothing.
fn pip_reads_its_own_settings_without_the_index_token_and_no_finding(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    w.write(
        &w.home.join(".config/pip/pip.conf"),
        &format!(
            "[global]\ntimeout = 7\nindex-url = https://ci:{PIP_CANARY}@pypi.corp.test/simple\n"
        ),
    );
    w.write(
        &w.home.join(".netrc"),
        &format!("machine pypi.corp.test\n  login ci\n  password {NETRC_CANARY}\n"),
    );
    let tools = "python3 -m pip config list --disable-pip-version-check; \
                 python3 -c \"from pip._vendor.requests.utils import get_netrc_auth as a; \
                 print('netrc:', a('https://pypi.corp.test/simple'))\"";
    w.sh_bare(tools)
        .assert_stdout_contains(PIP_CANARY)
        .assert_stdout_contains(NETRC_CANARY);
    let ci = |script: &str| w.ci_sh(script);
    let (out, log) = ci(tools);
    out.assert_stdout_contains("global.timeout='7'")
        .assert_stdout_contains("https://pypi.corp.test/simple")
        .assert_stdout_contains("netrc: None")
        .assert_no_leak(PIP_CANARY)
        .assert_no_leak(NETRC_CANARY)
        .assert_stderr_contains(
            "/.config/pip/pip.conf without its credentials (1 removed; PIP_CONFIG_FILE set for the job)",
        );
    // At FS-ONLY with the network off, importing urllib3 (for requests)
    // probes IPv6 with a socket bound to `::1`: that `socket()` is refused
    // and recorded today (loopback for the job's own use is issue P11), so
    // there the verdict is not asserted, only that nothing else is found.
    let violations: Vec<_> = log
        .lines()
        .filter(|l| l.contains("\"type\":\"violation\""))
        .filter(|l| tier == Tier::Full || !l.contains("\"net-socket-denied\""))
        .collect();
    assert!(violations.is_empty(), "{violations:?}\n{}", out.dump());
    if tier == Tier::Full {
        assert_eq!(out.code(), 0, "{}", out.dump());
    }

    let (out, log) =
        ci("cat \"$HOME/.config/pip/pip.conf\" \"$HOME/.netrc\"; echo script-finished");
    out.assert_stdout_contains("script-finished")
        .assert_no_leak(PIP_CANARY)
        .assert_no_leak(NETRC_CANARY);
    if tier == Tier::Full {
        assert_eq!(out.code(), 3, "{}", out.dump());
        for file in ["pip.conf", ".netrc"] {
            assert!(
                log.lines()
                    .any(|l| l.contains("\"secret-read-denied\"") && l.contains(file)),
                "the script's read of {file} is not recorded\n{}",
                out.dump()
            );
        }
    }
}
at_every_tier!(pip_reads_its_own_settings_without_the_index_token_and_no_finding);

const DOCKER_CANARY: &str = "CANARY-docker-registry-token-4d7f";
const GH_CANARY: &str = "gho_CANARY-gh-token-e21b";

/// The docker CLI, for the tests that run it (its client only: no engine).
fn docker_missing() -> bool {
    let Some(reason) = crate::util::skip::tool_missing("docker") else {
        return false;
    };
    assert!(
        !crate::util::required_by_name("docker"),
        "{}: VETTO_TEST_REQUIRE lists docker, but {reason}",
        crate::util::test_name()
    );
    crate::util::skip::say(&crate::util::test_name(), &reason);
    true
}

/// Runs as an unprivileged user, with a `~/.docker/config.json` holding a
/// registry token (what `docker/login-action` writes) and a CLI plugin
/// beside it (where `docker/setup-buildx-action` installs buildx), and a
/// gh `hosts.yml` with an OAuth token. The docker CLI reading its own
/// configuration at every command is no finding: it sees its settings
/// (`psFormat`) without the token, its plugin still runs (through the
/// stand-in directory's link, where the policy lets the job read
/// `~/.docker`), and `vetto ci` passes with zero violations; gh is handed
/// its hosts and settings without the token the same way. Bare, both
/// tokens are there to read. A script in the same job that reads either
/// file is still refused, recorded as `secret-read-denied` at FULL, and
/// gets nothing.
fn docker_and_gh_read_their_own_settings_without_the_token_and_no_finding(tier: Tier) {
    require!(tier.feature());
    if docker_missing() {
        return;
    }
    let w = World::at(tier);
    let docker = w.home.join(".docker");
    w.write(
        &docker.join("config.json"),
        &format!(
            "{{\"auths\":{{\"ghcr.io\":{{\"auth\":\"{DOCKER_CANARY}\"}}}},\
             \"psFormat\":\"table {{{{.ID}}}}\"}}\n"
        ),
    );
    let plugin = docker.join("cli-plugins/docker-hello");
    w.write(
        &plugin,
        "#!/bin/sh\nif [ \"$1\" = docker-cli-plugin-metadata ]; then\n\
         echo '{\"SchemaVersion\":\"0.1.0\",\"Vendor\":\"t\",\"Version\":\"1\",\"ShortDescription\":\"t\"}'\n\
         else echo plugin-ran; fi\n",
    );
    std::fs::set_permissions(&plugin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let gh = w.home.join(".config/gh");
    w.write(
        &gh.join("hosts.yml"),
        &format!(
            "github.com:\n    oauth_token: {GH_CANARY}\n    git_protocol: https\n    user: ci\n"
        ),
    );
    w.write(
        &gh.join("config.yml"),
        "editor: vi\naliases:\n    co: pr checkout\n",
    );
    w.sh_bare("cat ~/.docker/config.json ~/.config/gh/hosts.yml; docker hello")
        .assert_stdout_contains(DOCKER_CANARY)
        .assert_stdout_contains(GH_CANARY)
        .assert_stdout_contains("plugin-ran");

    let read_docker = format!("--allow-read={}", docker.display());
    let tools = "docker context ls && docker hello && cat \"$DOCKER_CONFIG/config.json\" \
                 \"$GH_CONFIG_DIR/hosts.yml\" \"$GH_CONFIG_DIR/config.yml\"";
    let (out, log) = w.ci_sh_with(&[&read_docker], tools);
    out.assert_stdout_contains("plugin-ran")
        .assert_stdout_contains("table {{.ID}}")
        .assert_stdout_contains("git_protocol: https")
        .assert_stdout_contains("co: pr checkout")
        .assert_no_leak(DOCKER_CANARY)
        .assert_no_leak(GH_CANARY)
        .assert_stderr_contains(
            "/.docker/config.json without its credentials (1 removed; DOCKER_CONFIG set for the job)",
        )
        .assert_stderr_contains(
            "/.config/gh without its credentials (1 removed; GH_CONFIG_DIR set for the job)",
        );
    assert_eq!(out.code(), 0, "{}", out.dump());
    let violations = crate::util::violation_lines(&log);
    assert!(violations.is_empty(), "{violations:?}\n{}", out.dump());

    let (out, log) = w.ci_sh(
        "docker context ls >/dev/null; cat \"$HOME/.docker/config.json\" \
         \"$HOME/.config/gh/hosts.yml\"; echo script-finished",
    );
    out.assert_stdout_contains("script-finished")
        .assert_no_leak(DOCKER_CANARY)
        .assert_no_leak(GH_CANARY);
    if tier == Tier::Full {
        assert_eq!(out.code(), 3, "{}", out.dump());
        for file in ["config.json", "hosts.yml"] {
            let reads: Vec<_> = log
                .lines()
                .filter(|l| l.contains("\"secret-read-denied\"") && l.contains(file))
                .collect();
            assert!(
                !reads.is_empty() && reads.iter().all(|l| l.contains("/cat")),
                "the script's read of {file}, and only it, is recorded: {reads:?}\n{}",
                out.dump()
            );
        }
    }
}
at_every_tier!(docker_and_gh_read_their_own_settings_without_the_token_and_no_finding);
