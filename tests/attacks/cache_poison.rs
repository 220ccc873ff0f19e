//! Cache poisoning: a job that writes into a shared package cache (a
//! `build.rs` under `~/.cargo/registry/src/…`, an entry of npm's
//! `_cacache`) has a later unsandboxed build compile, run or trust it.
//! Under the toolchain presets the tools use a vetto-owned cache instead
//! (docs/caches.md): the write fails or lands only there, the host's cache
//! is unchanged, and the next sandboxed run finds its cache warm — in that
//! project only: another project's sandboxed build never sees the plant.
//! Run as the unprivileged test user, at both tiers.

use crate::controls::go::{self, GREETING, MODULE_DIR};
use crate::util::{Tier, World};
use crate::{at_every_tier, require};

const EVIL: &str = "fn main() { std::process::Command::new(\"sh\").arg(\"-c\").arg(\"echo PWNED\").status().ok(); }";
const CLEAN: &str = "fn main() {}";

/// Write `rel` under the world's home as the test user (bare).
fn plant(w: &World, rel: &str, body: &str) {
    let script = format!(
        "mkdir -p \"$(dirname \"$HOME/{rel}\")\" && printf '%s' '{body}' > \"$HOME/{rel}\""
    );
    w.sh_bare(&script).assert_success();
}

fn host_file(w: &World, rel: &str) -> String {
    std::fs::read_to_string(w.home.join(rel)).unwrap_or_default()
}

/// Bare, the job's write poisons the host cache; under `--preset PRESET`
/// the same write (to the host path, and to the tool's own cache
/// variable) leaves the host's file as it was and lands only in the
/// vetto-owned cache, where a second sandboxed run finds it.
fn poison_attempt(tier: Tier, preset: &str, var: &str, rel_in_cache: &str, host_rel: &str) {
    require!(tier.feature());
    let w = World::at(tier);
    plant(&w, host_rel, CLEAN);
    let attack = format!(
        "printf '%s' '{EVIL}' > \"$HOME/{host_rel}\"; \
         mkdir -p \"$(dirname \"${var}/{rel_in_cache}\")\" && printf '%s' '{EVIL}' > \"${var}/{rel_in_cache}\"; \
         echo script-finished"
    );
    // Bare: the attack works (the variable unset, the tool's cache is the host's).
    let bare = World::at(tier);
    plant(&bare, host_rel, CLEAN);
    bare.sh_bare(&attack);
    assert_eq!(
        host_file(&bare, host_rel),
        EVIL,
        "bare, the host cache is poisoned"
    );

    let out = w
        .sandboxed_with(&["--preset", preset], &["sh", "-c", &attack])
        .run();
    out.assert_ran().assert_stdout_contains("script-finished");
    assert_eq!(
        host_file(&w, host_rel),
        CLEAN,
        "the host cache changed under --preset {preset}\n{}",
        out.dump()
    );
    let landed =
        std::fs::read_to_string(w.vetto_cache(preset).join(rel_in_cache)).unwrap_or_default();
    assert_eq!(
        landed,
        EVIL,
        "the write lands in the vetto-owned cache\n{}",
        out.dump()
    );
    // The next sandboxed run sees its warm cache.
    let again = w
        .sandboxed_with(
            &["--preset", preset],
            &["sh", "-c", &format!("cat \"${var}/{rel_in_cache}\"")],
        )
        .run();
    again.assert_success().assert_stdout_contains("PWNED");
    // Another project's sandboxed build, same user and preset, has a
    // cache of its own: the plant never reaches it (that build may write
    // its own project's sources and outputs).
    let other = w.root.join("other-project");
    w.write(&other.join("README.md"), "another project\n");
    let elsewhere = w
        .sandboxed_in(
            &other,
            tier.name(),
            &["--preset", preset],
            &[
                "sh",
                "-c",
                &format!("cat \"${var}/{rel_in_cache}\" 2>&1; echo \"cache=${var}\""),
            ],
        )
        .run();
    elsewhere.assert_success().assert_stdout_lacks("PWNED");
    assert!(
        !elsewhere
            .stdout()
            .contains(&format!("cache={}\n", w.vetto_cache(preset).display())),
        "{}",
        elsewhere.dump()
    );
    // And an unsandboxed build still reads the host's clean file.
    assert_eq!(host_file(&w, host_rel), CLEAN);
}

fn build_rs_injection_does_not_reach_host_cache(tier: Tier) {
    let rel = "registry/src/index.crates.io-1949cf8c6b5b557f/serde-1.0.200/build.rs";
    poison_attempt(tier, "cargo", "CARGO_HOME", rel, &format!(".cargo/{rel}"));
}

fn npm_cacache_injection_does_not_reach_host_cache(tier: Tier) {
    let rel = "_cacache/index-v5/ab/cd/0123456789abcdef";
    poison_attempt(tier, "npm", "npm_config_cache", rel, &format!(".npm/{rel}"));
}

/// What the forged dependency source says.
const GO_FORGED: &str = "PWNED-forged-greet-9d3a";

/// Go's module cache is trusted after the first go.sum check: a job that
/// rewrites an extracted module under `~/go/pkg/mod` has the next
/// unsandboxed `go build` compile its code (and one that plants a file in
/// `~/.cache/go-build` has it served as a build output). Bare, both
/// writes land and the next build prints the forged string; under
/// `--preset go` both fail, the host's module source is unchanged, and
/// sandboxed builds still work — from the vetto-owned cache, never the
/// host's (so they stay clean even after the host cache is poisoned).
fn go_module_source_injection_does_not_reach_host_cache(tier: Tier) {
    require!(tier.feature());
    let Some((w, proxy)) = go::module_world(tier) else {
        return;
    };
    let build = "go build -o demo . && ./demo";
    // The host's caches, filled by an ordinary unsandboxed build.
    go::bare_go(&w, &proxy, build)
        .assert_success()
        .assert_stdout_contains(GREETING);
    let src = w.home.join("go/pkg/mod").join(MODULE_DIR).join("greet.go");
    let clean = std::fs::read_to_string(&src).unwrap();
    let planted = w.home.join(".cache/go-build/ff/ff-forged-a");
    let attack = format!(
        "d=\"$HOME/go/pkg/mod/{MODULE_DIR}\"; chmod u+w \"$d\" \"$d/greet.go\"; \
         printf 'package greet\\n\\nfunc Hello() string {{ return \"{GO_FORGED}\" }}\\n' > \"$d/greet.go\"; \
         mkdir -p \"$HOME/.cache/go-build/ff\"; echo forged > \"$HOME/.cache/go-build/ff/ff-forged-a\"; \
         echo script-finished"
    );

    let reports = w.root.join("reports");
    let out = go::sandboxed_go(&w, &proxy, &reports, &attack);
    out.assert_ran().assert_stdout_contains("script-finished");
    assert_eq!(
        std::fs::read_to_string(&src).unwrap(),
        clean,
        "the host's module source changed under --preset go\n{}",
        out.dump()
    );
    assert!(
        !planted.exists(),
        "a file was planted in the host's GOCACHE\n{}",
        out.dump()
    );
    // Sandboxed builds work, from the vetto-owned cache.
    go::sandboxed_go(&w, &proxy, &reports, build)
        .assert_success()
        .assert_stdout_contains(GREETING);
    assert!(
        w.vetto_cache("go")
            .join("mod")
            .join(MODULE_DIR)
            .join("greet.go")
            .is_file()
    );
    // An unsandboxed build still compiles the clean source.
    go::bare_go(&w, &proxy, build)
        .assert_success()
        .assert_stdout_contains(GREETING)
        .assert_stdout_lacks(GO_FORGED);

    // Bare, the same step poisons the host cache: the next build runs it.
    go::bare_go(&w, &proxy, &attack).assert_success();
    assert!(planted.is_file(), "bare, the GOCACHE plant lands");
    go::bare_go(&w, &proxy, build)
        .assert_success()
        .assert_stdout_contains(GO_FORGED);
    // And a sandboxed build is not fooled by the poisoned host cache.
    go::sandboxed_go(&w, &proxy, &reports, build)
        .assert_success()
        .assert_stdout_contains(GREETING)
        .assert_stdout_lacks(GO_FORGED);
}

at_every_tier!(
    build_rs_injection_does_not_reach_host_cache,
    npm_cacache_injection_does_not_reach_host_cache,
    go_module_source_injection_does_not_reach_host_cache
);
