//! Cache poisoning: a job that writes into a shared package cache (a
//! `build.rs` under `~/.cargo/registry/src/…`, an entry of npm's
//! `_cacache`) has a later unsandboxed build compile, run or trust it.
//! Under the toolchain presets the tools use a vetto-owned cache instead
//! (docs/caches.md): the write fails or lands only there, the host's cache
//! is unchanged, and the next sandboxed run finds its cache warm.
//! Run as the unprivileged test user, at both tiers.

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
    let vetto_cache = w.home.join(".cache/vetto/caches");
    let landed =
        std::fs::read_to_string(vetto_cache.join(preset).join(rel_in_cache)).unwrap_or_default();
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

at_every_tier!(
    build_rs_injection_does_not_reach_host_cache,
    npm_cacache_injection_does_not_reach_host_cache
);
