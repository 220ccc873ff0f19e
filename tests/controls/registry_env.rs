//! A mirror or private registry configured the normal way — in a user
//! file the job cannot read (`~/.npmrc` and `~/.config/pip/pip.conf` are
//! masked, Go's `~/.config/go/env` is not readable) — is discovered on
//! the host, allowed, and told to the job's own tool in its own variable
//! (`npm_config_registry`, `PIP_INDEX_URL`, `GOPROXY`, …): without the
//! variable the job's tool falls back on its public default, which is
//! not allowed. Each test shows both in one sandboxed run: the tool with
//! the variable removed does not see the mirror; as started, it fetches
//! from the mirror through the egress proxy (the session log shows the
//! connection, allowed by the discovered rule). The mirrors are the
//! stand-ins of tests/attacks/egress.rs and tests/controls/go.rs under a
//! name pinned to the loopback with `--resolve`.

use std::path::Path;

use serde_json::Value;

use super::go;
use crate::attacks::egress;
use crate::util::{self, Out, Tier, World, skip};
use crate::{at_every_tier, require};

/// The session log's connections to `host` allowed by a discovered rule.
fn discovered_connections(reports: &Path, host: &str) -> Vec<Value> {
    std::fs::read_to_string(reports.join("session.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| {
            v["type"] == "connection"
                && v["host"] == host
                && v["decision"] == "allowed"
                && v["rule"].to_string().contains("discovered")
        })
        .collect()
}

/// `sh -c SCRIPT` under `--preset PRESET` with `host` pinned to the
/// loopback, reports in `reports`.
fn session(w: &World, preset: &str, host: &str, reports: &Path, script: &str) -> util::Run {
    let resolve = format!("{host}:127.0.0.1");
    w.sandboxed_with(
        &[
            "--preset",
            preset,
            "--resolve",
            &resolve,
            "--report-dir",
            reports.to_str().unwrap_or_default(),
        ],
        &["sh", "-c", script],
    )
    .timeout(go::HANG_GUARD)
}

const NPM_MIRROR: &str = "npm-mirror.test";

/// Runs as an unprivileged user: `registry=` in the masked `~/.npmrc`
/// names a mirror. The job's npm without `npm_config_registry` and the
/// credential-free copy of the file vetto points it at
/// (`npm_config_userconfig`) reports its public default: the masked file
/// itself is never read; as started it reports the mirror, and `npm
/// install` of the mirror's one package works through the proxy.
fn npm_mirror_in_a_masked_npmrc_is_used_by_the_job(tier: Tier) {
    require!(tier.feature());
    crate::require_tool!("npm", "npm");
    let w = World::at(tier);
    let (mut server, port) = egress::npm_registry(&w);
    let mirror = format!("http://{NPM_MIRROR}:{port}/");
    w.write(&w.home.join(".npmrc"), &format!("registry={mirror}\n"));
    w.write(
        &w.project.join("package.json"),
        "{\"name\":\"demo\",\"version\":\"1.0.0\",\"private\":true}\n",
    );
    let reports = w.root.join("reports");
    let out = session(
        &w,
        "npm",
        NPM_MIRROR,
        &reports,
        "echo \"without: $(env -u npm_config_registry -u npm_config_userconfig -u NPM_CONFIG_USERCONFIG npm config get registry)\"; \
         echo \"with: $(npm config get registry)\"; \
         npm install --no-audit --no-fund --fetch-retries=0 vetto-canary >/dev/null 2>&1; echo install-rc=$?; \
         node -e 'console.log(require(\"vetto-canary\"))'",
    )
    .run();
    let _ = server.kill();
    let _ = server.wait();
    out.assert_success()
        .assert_stderr_contains("npm_config_registry for the job")
        .assert_stdout_contains(&format!("with: {mirror}"))
        .assert_stdout_contains("install-rc=0")
        .assert_stdout_contains(egress::NPM_CANARY);
    mirror_used_only_when_told(&out, &reports, NPM_MIRROR);
}

const PIP_MIRROR: &str = "pip-mirror.test";

/// Runs as an unprivileged user: `index-url` (and `trusted-host`, the
/// mirror is plain http) in the masked `~/.config/pip/pip.conf`. The
/// job's pip without `PIP_INDEX_URL` does not know the mirror; as
/// started, `pip download` of the mirror's one wheel works through the
/// proxy.
fn pip_index_in_a_masked_pip_conf_is_used_by_the_job(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    if w.bare(&["python3", "-m", "pip", "--version"]).run().code() != 0 {
        skip::say(&util::test_name(), "python3 has no pip");
        return;
    }
    let (mut server, port) = egress::pip_index(&w);
    w.write(
        &w.home.join(".config/pip/pip.conf"),
        &format!(
            "[global]\nindex-url = http://{PIP_MIRROR}:{port}/simple/\ntrusted-host = {PIP_MIRROR}\n"
        ),
    );
    let reports = w.root.join("reports");
    let wheel = egress::PIP_WHEEL;
    let out = session(
        &w,
        "pip",
        PIP_MIRROR,
        &reports,
        &format!(
            "echo \"without: $(env -u PIP_INDEX_URL -u PIP_TRUSTED_HOST python3 -m pip config list 2>&1)\"; \
             python3 -m pip download -q --disable-pip-version-check --no-deps -d \"$TMPDIR/d\" vetto-canary >/dev/null 2>&1; \
             echo download-rc=$?; \
             python3 -c \"import zipfile,sys; print(zipfile.ZipFile(sys.argv[1]).read('vetto_canary.py').decode())\" \"$TMPDIR/d/{wheel}\""
        ),
    )
    .run();
    let _ = server.kill();
    let _ = server.wait();
    out.assert_success()
        .assert_stderr_contains("PIP_INDEX_URL PIP_TRUSTED_HOST for the job")
        .assert_stdout_contains("download-rc=0")
        .assert_stdout_contains(egress::PIP_CANARY);
    mirror_used_only_when_told(&out, &reports, PIP_MIRROR);
}

/// Runs as an unprivileged user: `GOPROXY` (and `GOSUMDB=off`) in the
/// user's Go env file, where `go env -w` writes, and not in the
/// environment. The job's `go env GOPROXY` without the variable is Go's
/// default; as started, `go build` of the module fetches its dependency
/// from the stand-in proxy through vetto's egress proxy.
fn go_proxy_in_the_go_env_file_is_used_by_the_job(tier: Tier) {
    require!(tier.feature());
    let Some((w, proxy)) = go::module_world(tier) else {
        return;
    };
    w.write(
        &w.home.join(".config/go/env"),
        &format!(
            "GOPROXY=http://{}:{}\nGOSUMDB=off\n",
            go::PROXY_HOST,
            proxy.port
        ),
    );
    // vetto remembers only what changed more than two seconds ago.
    std::thread::sleep(std::time::Duration::from_secs(3));
    let reports = w.root.join("reports");
    let out = session(
        &w,
        "go",
        go::PROXY_HOST,
        &reports,
        "echo \"without: $(env -u GOPROXY go env GOPROXY)\"; go build -o demo . && ./demo",
    )
    .env("GOFLAGS", "-mod=mod")
    .run();
    out.assert_success()
        .assert_stderr_contains("GOPROXY GOSUMDB for the job")
        .assert_stdout_contains(go::GREETING);
    let without = asked_without(&out);
    assert!(
        !without.contains(go::PROXY_HOST),
        "the job's go read the user's env file: {without}"
    );
    assert_eq!(proxy.zip_fetches(), 1, "{:?}", proxy.requests());
    assert!(
        !discovered_connections(&reports, go::PROXY_HOST).is_empty(),
        "the session log shows go's connection to the proxy\n{}",
        out.dump()
    );
    // A remembered answer tells the job the same: the second session
    // does not ask `go` again, and the job's `go` still sees the proxy.
    let learnt = super::toolchains::memo_files(&w.home);
    assert_eq!(learnt.len(), 1, "one answer remembered: {learnt:?}");
    session(
        &w,
        "go",
        go::PROXY_HOST,
        &w.root.join("reports-2"),
        "go env GOPROXY",
    )
    .env("GOFLAGS", "-mod=mod")
    .run()
    .assert_success()
    .assert_stderr_contains("GOPROXY GOSUMDB for the job")
    .assert_stdout_contains(&format!("http://{}:{}", go::PROXY_HOST, proxy.port));
    assert_eq!(
        super::toolchains::memo_files(&w.home),
        learnt,
        "the unchanged configuration was asked again"
    );
}

at_every_tier!(
    npm_mirror_in_a_masked_npmrc_is_used_by_the_job,
    pip_index_in_a_masked_pip_conf_is_used_by_the_job,
    go_proxy_in_the_go_env_file_is_used_by_the_job
);

/// The job's tool, asked without the variable vetto sets (its `without:`
/// line), did not see the mirror in the masked file; as started, it
/// connected to the mirror under the discovered rule.
fn mirror_used_only_when_told(out: &Out, reports: &Path, mirror: &str) {
    let without = asked_without(out);
    assert!(
        !without.contains(mirror),
        "the job's tool read the masked configuration: {without}"
    );
    assert!(
        !discovered_connections(reports, mirror).is_empty(),
        "the session log shows no connection to {mirror}\n{}",
        out.dump()
    );
}

/// What the job's tool said when asked without the variable vetto sets
/// (the script's `without: ` line).
fn asked_without(out: &Out) -> String {
    out.stdout()
        .lines()
        .find(|l| l.starts_with("without: "))
        .unwrap_or_default()
        .to_string()
}
