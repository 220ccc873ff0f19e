//! The merge rules — the only place they live (docs/policy.md quotes them).
//!
//! 1. Sources, lowest precedence first: the presets named by the policy
//!    file's `extends` (each preset's own `extends` before it, recursively;
//!    a preset is applied once, at its first position; a cycle is an error),
//!    then the `--preset` options (same expansion), then the policy file,
//!    then the command-line options. With no policy file (none given, no
//!    `vetto.toml` at the project root, or none at `--policy-ref`) the
//!    file is replaced by the `default` preset. A policy file without an
//!    `extends` key extends `default` (so a comment-only file behaves like
//!    no file); `extends = []` is the explicit blank slate: only what the
//!    file itself says.
//! 2. Lists accumulate over all sources: `read`, `write`, `deny`, `protect`,
//!    `outputs`, `allow` (host patterns and address ranges), `deny` (of
//!    `[network]`: host patterns refused even where `allow` allows them),
//!    `resolve`, `pass`, `withhold`, `pass_secret`, `discover`, `caches`.
//! 3. Scalars are overridden by later sources: `min_tier`, `mode`,
//!    `timeout`, `max_procs`, `max_memory`; `set` is overridden per name.
//! 4. In one source a non-empty `allow` (or `discover`) implies
//!    `mode = "allow"`; an explicit `off`/`host` next to a non-empty
//!    `allow`, `deny` or `discover` is an error. The hosts, ranges,
//!    denials, pins and discovered registries of every source are used
//!    only if the final mode is `allow`.
//! 5. Rules naming the same path do not conflict: the longest matching
//!    path decides, and for equal paths Deny > Protect > Write > Read
//!    (`paths::decide`).
//! 6. Built-in rules are added last (source `built-in`): the project's
//!    `vetto.toml`, the `--policy` file and the report directory become
//!    `protect` where they would otherwise be writable — whether or not
//!    they exist, so the job can neither change nor plant them; the files named by `GITHUB_ENV`, `GITHUB_PATH`,
//!    `GITHUB_OUTPUT`, `GITHUB_STATE`, `GITHUB_STEP_SUMMARY` become `deny`,
//!    and those variable names are always withheld.

use std::ops::Range;
use std::path::{Path, PathBuf};

use super::diag::{Diags, SourceRef, did_you_mean, list};
use super::raw::{self, RawPolicy};
use super::validate::{self, Layer, NetMode, PathCtx};
use super::{
    Access, FsRule, HostPattern, IpRule, Limits, NetPolicy, Origin, Overrides, PinnedHost, Policy,
    SourceInfo, UnixSocket, presets,
};

/// Variables naming CI control files that a job must not write, nor see.
pub const CI_CONTROL_VARS: &[&str] = &[
    "GITHUB_ENV",
    "GITHUB_PATH",
    "GITHUB_OUTPUT",
    "GITHUB_STATE",
    "GITHUB_STEP_SUMMARY",
];

pub const BUILT_IN: &str = "built-in";

/// A parsed preset, in merge order.
pub struct PresetSource {
    pub name: &'static str,
    pub text: &'static str,
    pub raw: RawPolicy,
}

/// Where a preset was asked for, to point errors at it.
pub enum Asker<'a> {
    Source(SourceRef<'a>, Range<usize>),
    Option,
}

/// Adds `name` (after its own `extends`) to `order`, once; presets come
/// from `catalog` (`presets::PRESETS` outside tests).
pub fn add_preset(
    catalog: &[(&'static str, &'static str)],
    name: &str,
    asker: Asker<'_>,
    stack: &mut Vec<&'static str>,
    order: &mut Vec<PresetSource>,
    diags: &mut Diags,
) {
    let known: Vec<&str> = catalog.iter().map(|(n, _)| *n).collect();
    let Some((pname, text)) = catalog.iter().find(|(n, _)| *n == name) else {
        let msg = format!("unknown preset `{name}`; expected one of {}", list(&known));
        let help = did_you_mean(name, &known).map(|s| format!("did you mean `{s}`?"));
        match asker {
            Asker::Source(src, span) => diags.at_help(src, &span, msg, help),
            Asker::Option => diags.plain("--preset", msg, help),
        }
        return;
    };
    if order.iter().any(|p| p.name == *pname) {
        return;
    }
    if stack.contains(pname) {
        let chain: Vec<&str> = stack.iter().copied().chain([*pname]).collect();
        let msg = format!(
            "preset cycle: {}; expected presets to extend each other without a loop",
            chain.join(" → ")
        );
        match asker {
            Asker::Source(src, span) => diags.at(src, &span, msg),
            Asker::Option => diags.plain("--preset", msg, None),
        }
        return;
    }
    let source_name = presets::source_name(pname);
    let src = SourceRef {
        name: &source_name,
        text,
    };
    let raw = raw::parse(src, diags);
    stack.push(pname);
    for ext in &raw.extends {
        add_preset(
            catalog,
            &ext.value,
            Asker::Source(src, ext.span.clone()),
            stack,
            order,
            diags,
        );
    }
    stack.pop();
    order.push(PresetSource {
        name: pname,
        text,
        raw,
    });
}

/// The command-line options as the last, highest-precedence source.
/// Relative paths are taken relative to `cwd`.
pub fn cli_layer(o: &Overrides, cwd: &Path, ctx: &mut PathCtx<'_>, diags: &mut Diags) -> Layer {
    let mut layer = Layer::empty(SourceInfo {
        name: "command line".into(),
        digest: String::new(),
    });
    let origin = Origin::command_line;
    for (opt, list, access) in [
        ("--allow-read", &o.allow_read, Access::Read),
        ("--allow-write", &o.allow_write, Access::Write),
        ("--deny", &o.deny, Access::Deny),
    ] {
        for p in list {
            if let Some(pattern) = ctx.pattern(p, Some(cwd)) {
                layer.globs.push(FsRule {
                    path: pattern,
                    access,
                    origin: origin(opt, p),
                });
            }
            match ctx.resolve(p, Some(cwd)) {
                Ok(paths) => layer.fs.extend(paths.into_iter().map(|path| FsRule {
                    path,
                    access,
                    origin: origin(opt, p),
                })),
                Err((msg, help)) => diags.plain(opt, format!("{p}: {msg}"), help),
            }
        }
    }
    for h in &o.allow_domain {
        match validate::parse_allow(h) {
            Ok(validate::Allowed::Host(host, port)) => {
                let o = origin("--allow-domain", h);
                layer.ips.extend(validate::localhost_rules(&host, port, &o));
                layer.allow.push(HostPattern {
                    host,
                    port,
                    origin: o,
                });
            }
            Ok(validate::Allowed::Ip(net, prefix, port)) => layer.ips.push(IpRule {
                net,
                prefix,
                port,
                origin: origin("--allow-domain", h),
            }),
            Err((msg, help)) => diags.plain("--allow-domain", msg, help),
        }
    }
    for r in &o.resolve {
        match validate::parse_resolve(r) {
            Ok((host, addr)) => layer.resolve.push(PinnedHost {
                host,
                addr,
                origin: origin("--resolve", r),
            }),
            Err(e) => diags.plain("--resolve", e, None),
        }
    }
    for s in &o.publish {
        match validate::parse_publish(s) {
            Ok((host, port)) => layer.publish.push(super::Publish {
                host,
                port,
                origin: origin("--publish", s),
            }),
            Err(e) => diags.plain("--publish", e, None),
        }
    }
    for s in &o.secrets {
        match validate::parse_secret(s) {
            Ok((name, hosts)) => {
                let hosts: Vec<HostPattern> = hosts
                    .into_iter()
                    .map(|(host, port)| HostPattern {
                        host,
                        port,
                        origin: origin("--secret", s),
                    })
                    .collect();
                layer.allow.extend(hosts.iter().cloned());
                layer.secrets.push(super::SecretRule {
                    name,
                    hosts,
                    origin: origin("--secret", s),
                });
            }
            Err((msg, help)) => diags.plain("--secret", msg, help),
        }
    }
    for r in &o.rules {
        match validate::parse_request_rule(r, origin("--rule", r)) {
            Ok(rule) => {
                layer.allow.push(rule.host.clone());
                layer.request_rules.push(rule);
            }
            Err((msg, help)) => diags.plain("--rule", msg, help),
        }
    }
    for u in &o.allow_unix {
        match ctx.resolve(u, Some(cwd)) {
            Ok(paths) => layer.unix.extend(paths.into_iter().map(|path| UnixSocket {
                path,
                origin: origin("--allow-unix", u),
            })),
            Err((msg, help)) => diags.plain("--allow-unix", format!("{u}: {msg}"), help),
        }
    }
    layer.mode = match o.net.as_deref().map(validate::parse_mode) {
        Some(Ok(m)) if m != NetMode::Allow && !o.allow_domain.is_empty() => {
            diags.plain(
                "--net",
                format!(
                    "--net {} contradicts --allow-domain; expected one of them",
                    o.net.as_deref().unwrap_or_default()
                ),
                None,
            );
            None
        }
        Some(Ok(m)) if m != NetMode::Allow && !(o.secrets.is_empty() && o.rules.is_empty()) => {
            diags.plain(
                "--net",
                format!(
                    "--net {} contradicts --secret and --rule: vetto's proxy reads the job's requests for them, so the network must be filtered; expected one of them",
                    o.net.as_deref().unwrap_or_default()
                ),
                None,
            );
            None
        }
        Some(Ok(m)) => Some(m),
        Some(Err(e)) => {
            diags.plain("--net", e, None);
            None
        }
        None if !o.allow_domain.is_empty() || !o.secrets.is_empty() || !o.rules.is_empty() => {
            Some(NetMode::Allow)
        }
        None => None,
    };
    if let Some(t) = &o.timeout {
        match validate::parse_duration(t) {
            Ok(d) => layer.timeout = Some(d),
            Err(e) => diags.plain("--timeout", e, None),
        }
    }
    if let Some(c) = &o.check_creations {
        match c.parse() {
            Ok(check) => layer.check_creations = Some(check),
            Err(e) => diags.plain("--check-creations", e, None),
        }
    }
    match o.max_procs {
        Some(0) => diags.plain("--max-procs", "0 processes; expected at least 1", None),
        n => layer.max_procs = n,
    }
    if let Some(m) = &o.max_memory {
        match validate::parse_size(m) {
            Ok(b) => layer.max_memory = Some(b),
            Err(e) => diags.plain("--max-memory", e, None),
        }
    }
    for name in &o.env_pass {
        match validate::env_name(name, true) {
            Ok(()) => layer.env.pass_exact.push(name.clone()),
            Err(e) => diags.plain("--env-pass", e, None),
        }
    }
    layer
}

fn push_unique<T: PartialEq>(out: &mut Vec<T>, items: impl IntoIterator<Item = T>) {
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
}

/// Fold the layers, lowest precedence first, into a policy (rules 2–4).
pub fn fold(layers: Vec<Layer>, project: PathBuf, session_tmp: PathBuf) -> Policy {
    let mut p = Policy {
        project,
        session_tmp,
        policy_file: None,
        sources: Vec::new(),
        fs: Vec::new(),
        globs: Vec::new(),
        outputs: Vec::new(),
        net: NetPolicy::Off,
        unix: Vec::new(),
        publish: Vec::new(),
        secrets: Vec::new(),
        request_rules: Vec::new(),
        discover: Vec::new(),
        caches: Vec::new(),
        limits: Limits::default(),
        env: Default::default(),
        min_tier: None,
        check_creations: Default::default(),
        expected_denials: Vec::new(),
        expected_daemons: Vec::new(),
        keep_changes: Vec::new(),
        expected_hosts: Vec::new(),
        provenance: Default::default(),
    };
    let mut mode = NetMode::Off;
    let (mut hosts, mut pins) = (Vec::new(), Vec::new());
    let (mut deny, mut ips) = (Vec::new(), Vec::new());
    for l in layers {
        p.sources.push(l.source);
        p.fs.extend(l.fs);
        p.globs.extend(l.globs);
        push_unique(&mut p.outputs, l.outputs);
        mode = l.mode.unwrap_or(mode);
        hosts.extend(l.allow);
        deny.extend(l.deny);
        ips.extend(l.ips);
        pins.extend(l.resolve);
        for d in l.discover {
            if !p.discover.iter().any(|k| k.registry == d.registry) {
                p.discover.push(d);
            }
        }
        for c in l.caches {
            if !p.caches.iter().any(|k| k.cache == c.cache) {
                p.caches.push(c);
            }
        }
        for u in l.unix {
            if !p.unix.iter().any(|k| k.path == u.path) {
                p.unix.push(u);
            }
        }
        // One listener per host address: a later source's rule for the
        // same address replaces the earlier one.
        for pb in l.publish {
            p.publish.retain(|k| k.host != pb.host);
            p.publish.push(pb);
        }
        p.request_rules.extend(l.request_rules);
        // A later source's rule for the same variable replaces the earlier.
        for s in l.secrets {
            p.secrets.retain(|k| k.name != s.name);
            p.secrets.push(s);
        }
        p.limits.timeout = l.timeout.or(p.limits.timeout);
        p.limits.max_procs = l.max_procs.or(p.limits.max_procs);
        p.limits.max_memory = l.max_memory.or(p.limits.max_memory);
        p.min_tier = l.min_tier.or(p.min_tier);
        p.check_creations = l.check_creations.unwrap_or(p.check_creations);
        p.expected_hosts.extend(l.expected_hosts);
        for k in l.keep_changes {
            if !p.keep_changes.iter().any(|x| x.pattern == k.pattern) {
                p.keep_changes.push(k);
            }
        }
        for d in l.expected_daemons {
            if !p.expected_daemons.iter().any(|k| k.pattern == d.pattern) {
                p.expected_daemons.push(d);
            }
        }
        for e in l.expected_denials {
            if !p.expected_denials.iter().any(|k| k.class == e.class) {
                p.expected_denials.push(e);
            }
        }
        push_unique(&mut p.env.pass, l.env.pass);
        push_unique(&mut p.env.withhold, l.env.withhold);
        push_unique(&mut p.env.pass_exact, l.env.pass_exact);
        for (k, v) in l.env.set {
            p.env.set.retain(|(n, _)| *n != k);
            p.env.set.push((k, v));
        }
    }
    p.net = match mode {
        NetMode::Off => NetPolicy::Off,
        NetMode::Host => NetPolicy::Host,
        NetMode::Allow => NetPolicy::Allow {
            hosts,
            deny,
            ips,
            resolve: pins,
        },
    };
    p
}

/// A directory vetto keeps for itself: masked when a rule would let the
/// job see or change it (it, a parent or anything beneath it). A rule
/// beneath it outranks the mask; the caller checks the outcome with
/// [`super::paths::decide_rule`] before trusting the directory.
pub fn mask_own_dir(p: &mut Policy, dir: &Path, why: &str) {
    let covered = super::paths::decide_rule(&p.fs, dir).is_some()
        || p.fs.iter().any(|r| super::paths::beneath(&r.path, dir));
    if covered {
        p.fs.push(FsRule {
            path: dir.to_path_buf(),
            access: Access::Deny,
            origin: Origin {
                source: BUILT_IN.into(),
                line: 0,
                col: 0,
                written: why.into(),
            },
        });
    }
}

/// Rule 6: the built-in rules.
pub fn add_built_ins(
    p: &mut Policy,
    policy_files: &[Option<&Path>],
    report_dir: Option<&Path>,
    env: &[(String, String)],
    cwd: &Path,
) {
    let built_in = |written: String| Origin {
        source: BUILT_IN.into(),
        line: 0,
        col: 0,
        written,
    };
    let files = policy_files.iter().map(|f| (*f, "the policy file"));
    for (path, why) in files.chain([(report_dir, "the report directory")]) {
        let Some(path) = path else { continue };
        let path = super::paths::normalise_abs(&cwd.join(path));
        let writable =
            super::paths::decide_rule(&p.fs, &path).is_some_and(|r| r.access == Access::Write);
        let already = p
            .fs
            .iter()
            .any(|r| r.path == path && r.access == Access::Protect && r.origin.source == BUILT_IN);
        if writable && !already {
            p.fs.push(FsRule {
                path,
                access: Access::Protect,
                origin: built_in(format!("{why} is read-only for the job")),
            });
        }
    }
    for var in CI_CONTROL_VARS {
        if let Some((_, value)) = env.iter().find(|(k, v)| k == var && !v.is_empty()) {
            p.fs.push(FsRule {
                path: super::paths::normalise_abs(&cwd.join(value)),
                access: Access::Deny,
                origin: built_in(format!("${var} is a CI control file")),
            });
        }
        if !p.env.withhold.iter().any(|w| w == var) {
            p.env.withhold.push((*var).to_string());
        }
        // Not even `--env-pass` or `pass_secret` hands these to the job.
        p.env.pass_exact.retain(|n| n != var);
    }
}
