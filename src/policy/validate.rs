//! `RawPolicy` → `Layer`: one validated source (preset, file or command
//! line) with variables expanded, paths normalised and globs matched.
//! Every problem is pushed to `Diags`; validation never stops early.

use std::net::IpAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::diag::{Diags, LineIndex, SourceRef};
use super::paths::{self, GlobWalker, PathError};
use super::raw::{RawPolicy, SizeValue};
use super::tools::{CacheRule, DiscoverRule};
use super::vars::Vars;
use super::{
    Access, EnvPolicy, FsRule, HostPattern, IpRule, Origin, PinnedHost, Publish, RequestRule,
    SecretRule, SourceInfo, UnixSocket,
};
use crate::tier::Tier;

/// `[network] mode`, as one source says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetMode {
    Off,
    Host,
    Allow,
}

/// One validated source; `merge` folds these in precedence order.
#[derive(Debug, Clone)]
pub struct Layer {
    pub source: SourceInfo,
    pub min_tier: Option<Tier>,
    /// `[filesystem] check_creations`, `--check-creations`.
    pub check_creations: Option<super::CheckCreations>,
    pub fs: Vec<FsRule>,
    /// The glob rules, unexpanded ([`super::Policy::globs`]).
    pub globs: Vec<FsRule>,
    pub outputs: Vec<String>,
    /// Explicit, or `Allow` implied by a non-empty `allow`.
    pub mode: Option<NetMode>,
    pub allow: Vec<HostPattern>,
    /// `[network] deny`: refused even where `allow` would allow.
    pub deny: Vec<HostPattern>,
    /// Address ranges in `allow`.
    pub ips: Vec<IpRule>,
    pub resolve: Vec<PinnedHost>,
    /// `[network] unix`.
    pub unix: Vec<UnixSocket>,
    /// `[network] publish`.
    pub publish: Vec<Publish>,
    /// `[secrets]`, `--secret`.
    pub secrets: Vec<SecretRule>,
    /// `[network] rules`, `--rule`.
    pub request_rules: Vec<RequestRule>,
    /// `[network] discover`.
    pub discover: Vec<DiscoverRule>,
    /// `[filesystem] caches`.
    pub caches: Vec<CacheRule>,
    pub timeout: Option<Duration>,
    pub max_procs: Option<u32>,
    pub max_memory: Option<u64>,
    pub env: EnvPolicy,
    /// `[syscalls] expected`.
    pub expected_denials: Vec<super::ExpectedDenial>,
    /// `[network] expected`.
    pub expected_hosts: Vec<HostPattern>,
    /// `[process] daemons`.
    pub expected_daemons: Vec<super::ExpectedDaemon>,
    /// `[persistence] keep`.
    pub keep_changes: Vec<super::KeepChange>,
}

impl Layer {
    pub fn empty(source: SourceInfo) -> Self {
        Layer {
            source,
            min_tier: None,
            check_creations: None,
            fs: Vec::new(),
            globs: Vec::new(),
            outputs: Vec::new(),
            mode: None,
            allow: Vec::new(),
            deny: Vec::new(),
            ips: Vec::new(),
            resolve: Vec::new(),
            unix: Vec::new(),
            publish: Vec::new(),
            secrets: Vec::new(),
            request_rules: Vec::new(),
            discover: Vec::new(),
            caches: Vec::new(),
            timeout: None,
            max_procs: None,
            max_memory: None,
            env: EnvPolicy::default(),
            expected_denials: Vec::new(),
            expected_daemons: Vec::new(),
            expected_hosts: Vec::new(),
            keep_changes: Vec::new(),
        }
    }
}

/// What validating paths needs: variables and the shared glob walker.
pub struct PathCtx<'a> {
    pub vars: Vars<'a>,
    pub walker: GlobWalker,
}

impl PathCtx<'_> {
    /// A program or file path as a pattern matched later (`*` and `?`
    /// within a component), not against the filesystem now: expanded and
    /// normalised (`[process] daemons`, `[persistence] keep`).
    pub fn path_pattern(&self, written: &str) -> Result<PathBuf, String> {
        self.pattern(written, None).map(Ok).unwrap_or_else(|| {
            self.vars
                .expand(written)
                .map_err(|e| e.to_string())
                .and_then(|p| paths::normalise(&p).map_err(|e| e.to_string()))
        })
    }

    /// The pattern of a glob rule, expanded and normalised as [`Self::resolve`]
    /// does before it walks; `None` for a plain path (or one that does not
    /// resolve: `resolve` reports that).
    pub fn pattern(&self, written: &str, base: Option<&Path>) -> Option<PathBuf> {
        let expanded = self.vars.expand(written).ok()?;
        if !paths::is_glob(&expanded) {
            return None;
        }
        let expanded = match base {
            Some(b) if !Path::new(&expanded).is_absolute() => b.join(&expanded),
            _ => PathBuf::from(expanded),
        };
        paths::normalise(&expanded.to_string_lossy()).ok()
    }

    /// Expand, normalise and glob-match one written path. `base` makes
    /// relative paths absolute (command-line options); in files they are
    /// an error.
    pub fn resolve(
        &mut self,
        written: &str,
        base: Option<&Path>,
    ) -> Result<Vec<PathBuf>, (String, Option<String>)> {
        let expanded = self
            .vars
            .expand(written)
            .map_err(|e| (e.to_string(), None))?;
        let expanded = match base {
            Some(b) if !expanded.is_empty() && !Path::new(&expanded).is_absolute() => {
                b.join(&expanded).to_string_lossy().into_owned()
            }
            _ => expanded,
        };
        let path = paths::normalise(&expanded).map_err(|e| match e {
            PathError::Relative(p) => (
                format!("relative path `{p}`; expected an absolute path"),
                Some(format!(
                    "write `${{PROJECT}}/{}` for a path in the project",
                    p.trim_start_matches("./")
                )),
            ),
            other => (other.to_string(), None),
        })?;
        if paths::is_glob(&expanded) {
            self.walker.expand(&path).map_err(|e| {
                let help = matches!(e, paths::GlobError::TooLarge { .. }).then(|| {
                    "narrow the pattern, or list large generated directories in \
                     [filesystem] outputs: `**` does not enter them"
                        .to_string()
                });
                (e.to_string(), help)
            })
        } else {
            Ok(vec![path])
        }
    }
}

/// Check the `outputs` names of a source (done first: `**` skips them).
pub fn outputs(raw: &RawPolicy, src: SourceRef<'_>, diags: &mut Diags) -> Vec<String> {
    let mut out = Vec::new();
    for o in &raw.filesystem.outputs {
        match output_name(&o.value) {
            Ok(()) => out.push(o.value.clone()),
            Err((msg, help)) => diags.at_help(src, &o.span, msg, help),
        }
    }
    out
}

fn output_name(name: &str) -> Result<(), (String, Option<String>)> {
    if name.is_empty()
        || name == "."
        || name == ".."
        || name.contains(['/', '\0', '$', '~', '*', '?'])
    {
        let help = name
            .strip_prefix("${PROJECT}/")
            .filter(|n| !n.contains('/'))
            .map(|n| format!("write just the name: \"{n}\""));
        return Err((
            format!(
                "invalid output directory `{name}`; expected the name of a directory at the top of the project (e.g. \"target\")"
            ),
            help,
        ));
    }
    if name.eq_ignore_ascii_case(".git") {
        return Err((
            "`.git` cannot be an output directory; expected a build output such as \"target\""
                .into(),
            None,
        ));
    }
    Ok(())
}

/// Validate one parsed source.
pub fn validate(
    raw: &RawPolicy,
    src: SourceRef<'_>,
    source: SourceInfo,
    ctx: &mut PathCtx<'_>,
    diags: &mut Diags,
) -> Layer {
    let mut layer = Layer::empty(source);
    let lines = LineIndex::new(src.text);
    let origin = |span: &Range<usize>, written: &str| {
        let (line, col) = lines.line_col(span);
        Origin {
            source: src.name.to_string(),
            line,
            col,
            written: written.to_string(),
        }
    };

    let fs = &raw.filesystem;
    for (list, access) in [
        (&fs.read, Access::Read),
        (&fs.write, Access::Write),
        (&fs.deny, Access::Deny),
        (&fs.protect, Access::Protect),
    ] {
        for p in list {
            if let Some(pattern) = ctx.pattern(&p.value, None) {
                layer.globs.push(FsRule {
                    path: pattern,
                    access,
                    origin: origin(&p.span, &p.value),
                });
            }
            match ctx.resolve(&p.value, None) {
                Ok(paths) => layer.fs.extend(paths.into_iter().map(|path| FsRule {
                    path,
                    access,
                    origin: origin(&p.span, &p.value),
                })),
                Err((msg, help)) => diags.at_help(src, &p.span, msg, help),
            }
        }
    }

    for c in &fs.caches {
        match c.value.parse() {
            Ok(cache) => layer.caches.push(CacheRule {
                cache,
                origin: origin(&c.span, &c.value),
            }),
            Err(e) => diags.at(src, &c.span, e),
        }
    }

    if let Some(t) = &raw.min_tier {
        match t.value.parse::<Tier>() {
            Ok(tier) => layer.min_tier = Some(tier),
            Err(e) => diags.at(src, &t.span, e),
        }
    }
    if let Some(c) = &raw.filesystem.check_creations {
        match c.value.parse() {
            Ok(check) => layer.check_creations = Some(check),
            Err(e) => diags.at(src, &c.span, e),
        }
    }

    let net = &raw.network;
    let mode = net.mode.as_ref().and_then(|m| match parse_mode(&m.value) {
        Ok(mode) => Some((mode, m)),
        Err(e) => {
            diags.at(src, &m.span, e);
            None
        }
    });
    for h in &net.allow {
        match parse_allow(&h.value) {
            Ok(Allowed::Host(host, port)) => {
                let o = origin(&h.span, &h.value);
                layer.ips.extend(localhost_rules(&host, port, &o));
                layer.allow.push(HostPattern {
                    host,
                    port,
                    origin: o,
                });
            }
            Ok(Allowed::Ip(net, prefix, port)) => layer.ips.push(IpRule {
                net,
                prefix,
                port,
                origin: origin(&h.span, &h.value),
            }),
            Err((msg, help)) => diags.at_help(src, &h.span, msg, help),
        }
    }
    // `expected` names hosts the way `deny` does: a name is what is
    // refused (as expected).
    for (key, written, out) in [
        ("deny", &net.deny, &mut layer.deny),
        ("expected", &net.expected, &mut layer.expected_hosts),
    ] {
        for h in written {
            match parse_deny(&h.value, key) {
                Ok((host, port)) => out.push(HostPattern {
                    host,
                    port,
                    origin: origin(&h.span, &h.value),
                }),
                Err((msg, help)) => diags.at_help(src, &h.span, msg, help),
            }
        }
    }
    for r in &net.resolve {
        match parse_resolve(&r.value) {
            Ok((host, addr)) => layer.resolve.push(PinnedHost {
                host,
                addr,
                origin: origin(&r.span, &r.value),
            }),
            Err(e) => diags.at(src, &r.span, e),
        }
    }
    for r in &net.discover {
        match r.value.parse() {
            Ok(registry) => layer.discover.push(DiscoverRule {
                registry,
                origin: origin(&r.span, &r.value),
            }),
            Err(e) => diags.at(src, &r.span, e),
        }
    }
    for r in &net.publish {
        match parse_publish(&r.value) {
            Ok((host, port)) => layer.publish.push(Publish {
                host,
                port,
                origin: origin(&r.span, &r.value),
            }),
            Err(e) => diags.at(src, &r.span, e),
        }
    }
    for r in &net.rules {
        match parse_request_rule(&r.value, origin(&r.span, &r.value)) {
            Ok(rule) => {
                layer.allow.push(rule.host.clone());
                layer.request_rules.push(rule);
            }
            Err((msg, help)) => diags.at_help(src, &r.span, msg, help),
        }
    }
    for u in &net.unix {
        match ctx.resolve(&u.value, None) {
            Ok(paths) => layer.unix.extend(paths.into_iter().map(|path| UnixSocket {
                path,
                origin: origin(&u.span, &u.value),
            })),
            Err((msg, help)) => diags.at_help(src, &u.span, msg, help),
        }
    }
    for (name, hosts) in &raw.secrets {
        let written = format!(
            "{} = [{}]",
            name.value,
            hosts
                .iter()
                .map(|h| format!("\"{}\"", h.value))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if let Err(e) = check_secret_name(&name.value) {
            diags.at(src, &name.span, e);
            continue;
        }
        if hosts.is_empty() {
            diags.at(
                src,
                &name.span,
                format!("secret `{}` names no host; expected a list of the hosts its value may go to, e.g. [\"registry.npmjs.org\"]", name.value),
            );
            continue;
        }
        let mut rule = SecretRule {
            name: name.value.clone(),
            hosts: Vec::new(),
            origin: origin(&name.span, &written),
        };
        for h in hosts {
            match parse_host(&h.value) {
                Ok((host, port)) => rule.hosts.push(HostPattern {
                    host,
                    port,
                    origin: origin(&h.span, &h.value),
                }),
                Err((msg, help)) => diags.at_help(src, &h.span, msg, help),
            }
        }
        layer.allow.extend(rule.hosts.iter().cloned());
        layer.secrets.push(rule);
    }
    if let Some((m, sp)) = mode
        && m != NetMode::Allow
        && !raw.secrets.is_empty()
    {
        diags.at_help(
            src,
            &sp.span,
            format!(
                "network mode `{}` contradicts [secrets]: vetto's proxy puts a secret in the job's requests, so the network must be filtered; expected mode \"allow\"",
                sp.value
            ),
            Some("remove `mode`: [secrets] implies mode \"allow\" for the secrets' hosts"),
        );
    }
    let listed = !(net.allow.is_empty()
        && net.deny.is_empty()
        && net.discover.is_empty()
        && net.rules.is_empty());
    layer.mode = match mode {
        Some((m, sp)) if m != NetMode::Allow && listed => {
            diags.at_help(
                src,
                &sp.span,
                format!(
                    "network mode `{}` contradicts the `allow`/`deny`/`discover`/`rules` lists of the same table; expected mode \"allow\"",
                    sp.value
                ),
                Some("remove `mode`: a non-empty `allow`, `deny` or `discover` implies mode \"allow\""),
            );
            None
        }
        Some((m, _)) => Some(m),
        None if listed || !raw.secrets.is_empty() => Some(NetMode::Allow),
        None => None,
    };

    let lim = &raw.limits;
    if let Some(t) = &lim.timeout {
        match parse_duration(&t.value) {
            Ok(d) => layer.timeout = Some(d),
            Err(e) => diags.at(src, &t.span, e),
        }
    }
    if let Some(n) = &lim.max_procs {
        match u32::try_from(n.value) {
            Ok(v) if v > 0 => layer.max_procs = Some(v),
            _ => diags.at(
                src,
                &n.span,
                format!(
                    "invalid max_procs {}; expected a number from 1 to {}",
                    n.value,
                    u32::MAX
                ),
            ),
        }
    }
    if let Some(m) = &lim.max_memory {
        let parsed = match &m.value {
            SizeValue::Text(s) => parse_size(s),
            SizeValue::Bytes(b) => u64::try_from(*b).ok().filter(|b| *b > 0).ok_or_else(|| {
                format!("invalid max_memory {b}; expected a positive size such as \"4GiB\"")
            }),
        };
        match parsed {
            Ok(b) => layer.max_memory = Some(b),
            Err(e) => diags.at(src, &m.span, e),
        }
    }

    for e in &raw.expected_denials {
        match super::DenialClass::parse(&e.value) {
            Some(class) => layer.expected_denials.push(super::ExpectedDenial {
                class,
                origin: origin(&e.span, &e.value),
            }),
            None => diags.at_help(
                src,
                &e.span,
                format!(
                    "unknown refusal class `{}`; expected one of {}",
                    e.value,
                    super::diag::list(super::DenialClass::NAMES)
                ),
                super::diag::did_you_mean(&e.value, super::DenialClass::NAMES)
                    .map(|s| format!("did you mean `{s}`?")),
            ),
        }
    }

    for d in &raw.daemons {
        match ctx.path_pattern(&d.value) {
            Ok(pattern) => layer.expected_daemons.push(super::ExpectedDaemon {
                pattern,
                origin: origin(&d.span, &d.value),
            }),
            Err(why) => diags.at(src, &d.span, format!("invalid program path: {why}")),
        }
    }

    for k in &raw.keep {
        match ctx.path_pattern(&k.value) {
            Ok(pattern) => layer.keep_changes.push(super::KeepChange {
                pattern,
                origin: origin(&k.span, &k.value),
            }),
            Err(why) => diags.at_help(
                src,
                &k.span,
                format!("invalid path to keep: {why}"),
                Some(
                    "write `${PROJECT}/.githooks/pre-commit` for a path in the project".to_string(),
                ),
            ),
        }
    }

    let env = &raw.env;
    for (list, out, exact) in [
        (&env.pass, &mut layer.env.pass, false),
        (&env.withhold, &mut layer.env.withhold, false),
        (&env.pass_secret, &mut layer.env.pass_exact, true),
    ] {
        for name in list {
            match env_name(&name.value, exact) {
                Ok(()) => out.push(name.value.clone()),
                Err(e) => diags.at(src, &name.span, e),
            }
        }
    }
    for (k, v) in &env.set {
        if let Err(e) = env_name(&k.value, true) {
            diags.at(src, &k.span, e);
        } else if v.value.contains('\0') {
            diags.at(src, &v.span, "value contains a NUL byte");
        } else {
            layer.env.set.push((k.value.clone(), v.value.clone()));
        }
    }
    layer
}

pub fn parse_mode(s: &str) -> Result<NetMode, String> {
    match s {
        "off" => Ok(NetMode::Off),
        "host" => Ok(NetMode::Host),
        "allow" => Ok(NetMode::Allow),
        other => {
            let meant = mode_meant(other)
                .map(|m| format!(" (did you mean `{m}`?)"))
                .unwrap_or_default();
            Err(format!(
                "unknown network mode `{other}`{meant}; expected one of `off`, `host`, `allow`"
            ))
        }
    }
}

/// The mode a mistaken one most likely meant: a typo of a mode, or a word
/// other tools use for it (`filtered`, `proxy`, `none`, `open` …).
fn mode_meant(got: &str) -> Option<&'static str> {
    let lower = got.trim().to_ascii_lowercase();
    let synonyms: &[(&[&str], &str)] = &[
        (
            &[
                "filtered",
                "filter",
                "proxy",
                "proxied",
                "allowlist",
                "allow-list",
                "whitelist",
                "domains",
                "restricted",
                "limited",
                "allowed",
            ],
            "allow",
        ),
        (
            &[
                "none", "no", "disabled", "deny", "denied", "false", "isolated", "blocked",
            ],
            "off",
        ),
        (
            &[
                "open",
                "on",
                "all",
                "full",
                "unrestricted",
                "true",
                "any",
                "yes",
            ],
            "host",
        ),
    ];
    synonyms
        .iter()
        .find(|(words, _)| words.contains(&lower.as_str()))
        .map(|(_, mode)| *mode)
        .or_else(|| super::diag::did_you_mean(&lower, &["off", "host", "allow"]))
}

/// `90s`, `10m`, `1h30m`: runs of digits each followed by `s`, `m` or `h`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = |why: &str| {
        format!(
            "invalid duration `{s}`: {why}; expected a number with a unit s, m or h, e.g. \"90s\", \"10m\", \"1h30m\""
        )
    };
    let mut total: u64 = 0;
    let mut digits = String::new();
    let mut seen = false;
    for c in s.trim().chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit: u64 = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            _ => return Err(bad(&format!("unexpected `{c}`"))),
        };
        if digits.is_empty() {
            return Err(bad(&format!("`{c}` without a number")));
        }
        let n: u64 = digits.parse().map_err(|_| bad("number too large"))?;
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| bad("too long"))?;
        digits.clear();
        seen = true;
    }
    if !digits.is_empty() {
        return Err(bad("missing unit"));
    }
    if !seen {
        return Err(bad("empty"));
    }
    if total == 0 {
        return Err(bad("must be longer than zero"));
    }
    Ok(Duration::from_secs(total))
}

/// `4GiB`, `512 MiB`, `2GB`, `1048576`: bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let bad = |why: &str| {
        format!(
            "invalid size `{s}`: {why}; expected a number with a unit KiB, MiB, GiB, TiB, KB, MB, GB, TB or B, e.g. \"4GiB\""
        )
    };
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(bad("no number"));
    }
    let n: u64 = num.parse().map_err(|_| bad("number too large"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        other => return Err(bad(&format!("unknown unit `{other}`"))),
    };
    match n.checked_mul(mult) {
        Some(0) => Err(bad("must be larger than zero")),
        Some(b) => Ok(b),
        None => Err(bad("too large")),
    }
}

/// A secret's name: a variable name as a shell writes one.
pub fn check_secret_name(name: &str) -> Result<(), String> {
    let ok = name
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid secret name `{name}`: expected the name of an environment variable, such as NPM_TOKEN"
        ))
    }
}

/// `--secret NAME@HOST[,HOST…]`: the variable and the hosts its value may
/// go to.
pub fn parse_secret(s: &str) -> Result<(String, Vec<HostPort>), (String, Option<String>)> {
    let Some((name, hosts)) = s.split_once('@') else {
        check_secret_name(s).map_err(|e| (e, None))?;
        let Some((_, hosts)) = SECRET_RECIPES.iter().find(|(n, _)| *n == s) else {
            let known: Vec<&str> = SECRET_RECIPES.iter().map(|(n, _)| *n).collect();
            return Err((
                format!(
                    "invalid secret `{s}`: no `@` and no recipe for {s}; expected NAME@HOST[,HOST…], e.g. NPM_TOKEN@registry.npmjs.org"
                ),
                Some(format!(
                    "recipes name their hosts themselves: {}",
                    known.join(", ")
                )),
            ));
        };
        return Ok((
            s.to_string(),
            hosts.iter().map(|h| (h.to_string(), None)).collect(),
        ));
    };
    check_secret_name(name).map_err(|e| (e, None))?;
    let hosts = hosts
        .split(',')
        .map(str::trim)
        .map(parse_host)
        .collect::<Result<Vec<_>, _>>()?;
    Ok((name.to_string(), hosts))
}

/// A host pattern and its optional port.
pub type HostPort = (String, Option<u16>);

/// `--secret NAME` alone: the hosts of the well-known tokens that are not
/// a registry's (a registry's host is the user's choice, or learnt from
/// the tool: `--secret NPM_TOKEN@registry.npmjs.org`). GitHub's API,
/// git over HTTPS and release uploads; the agent presets' model APIs at
/// their vendors' default hosts (a base-URL override names its own:
/// `NAME@HOST`).
/// The hosts the recipe for `name` names, if there is one.
pub fn secret_recipe(name: &str) -> Option<&'static [&'static str]> {
    SECRET_RECIPES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, hosts)| *hosts)
}

pub const SECRET_RECIPES: &[(&str, &[&str])] = &[
    (
        "GITHUB_TOKEN",
        &["api.github.com", "github.com", "uploads.github.com"],
    ),
    (
        "GH_TOKEN",
        &["api.github.com", "github.com", "uploads.github.com"],
    ),
    ("ANTHROPIC_API_KEY", &["api.anthropic.com"]),
    ("OPENAI_API_KEY", &["api.openai.com"]),
    ("GEMINI_API_KEY", &["generativelanguage.googleapis.com"]),
    ("GOOGLE_API_KEY", &["generativelanguage.googleapis.com"]),
];

/// A request rule, `METHOD[,METHOD…] HOST[:PORT]/PATH`: `GET
/// api.github.com/repos/acme/app/*`, `GET,HEAD registry.npmjs.org/*`,
/// `* uploads.example.com:8443/v1/*`. Methods are upper-cased (`*` is
/// any); the port is 443 unless named (rules are for HTTPS, which the
/// proxy can read); the path starts at `/` and `*` in it is any run of
/// characters.
pub fn parse_request_rule(
    s: &str,
    origin: Origin,
) -> Result<RequestRule, (String, Option<String>)> {
    let expected =
        "expected METHOD[,METHOD…] HOST/PATH, e.g. \"GET api.github.com/repos/acme/app/*\"";
    let Some((methods, rest)) = s.trim().split_once(' ') else {
        return Err((
            format!(
                "invalid request rule `{s}`: no space between the methods and HOST/PATH; {expected}"
            ),
            None,
        ));
    };
    let methods: Vec<String> = methods
        .split(',')
        .map(|m| m.trim().to_ascii_uppercase())
        .collect();
    if let Some(bad) = methods
        .iter()
        .find(|m| m.is_empty() || !(m.as_str() == "*" || m.bytes().all(|b| b.is_ascii_uppercase())))
    {
        return Err((
            format!("invalid request rule `{s}`: `{bad}` is not a method; {expected}"),
            None,
        ));
    }
    let rest = rest.trim();
    if rest.contains("://") {
        return Err((
            format!("invalid request rule `{s}`: a URL; {expected}"),
            Some("write the host and path without a scheme: rules are for HTTPS".into()),
        ));
    }
    let Some(slash) = rest.find('/') else {
        return Err((
            format!("invalid request rule `{s}`: no path; {expected} (`/*` for every path)"),
            None,
        ));
    };
    let (host, path) = rest.split_at(slash);
    let (host, port) = parse_host(host)?;
    if path
        .bytes()
        .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        return Err((
            format!("invalid request rule `{s}`: a space in the path; {expected}"),
            None,
        ));
    }
    Ok(RequestRule {
        methods,
        host: HostPattern {
            host,
            port: Some(port.unwrap_or(443)),
            origin: origin.clone(),
        },
        path: path.to_string(),
        origin,
    })
}

pub use super::host_name::parse_host;

/// One entry of `[network] allow` (or `--allow-domain`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allowed {
    /// A host pattern and its optional port.
    Host(String, Option<u16>),
    /// An address range: network, prefix length, optional port.
    Ip(IpAddr, u8, Option<u16>),
}

/// A host pattern, or an address range (`10.1.2.0/24:5432`, `192.0.2.7`,
/// `[2001:db8::/32]:443`, `2001:db8::1`).
/// `localhost[:PORT]` stands for the host's loopback addresses too: a
/// client that ignores the proxy variables (psql, a JDBC or Go driver)
/// resolves it itself and connects to `127.0.0.1` or `::1` by address.
pub fn localhost_rules(host: &str, port: Option<u16>, origin: &Origin) -> Vec<IpRule> {
    if host != "localhost" {
        return Vec::new();
    }
    [
        (std::net::IpAddr::from(std::net::Ipv4Addr::LOCALHOST), 32),
        (std::net::IpAddr::from(std::net::Ipv6Addr::LOCALHOST), 128),
    ]
    .into_iter()
    .map(|(net, prefix)| IpRule {
        net,
        prefix,
        port,
        origin: origin.clone(),
    })
    .collect()
}

pub fn parse_allow(s: &str) -> Result<Allowed, (String, Option<String>)> {
    match parse_ip_rule(s) {
        Some(rule) => rule
            .map(|(net, prefix, port)| Allowed::Ip(net, prefix, port))
            .map_err(|e| (e, None)),
        None => parse_host(s).map(|(h, p)| Allowed::Host(h, p)),
    }
}

/// A `[network] deny` or `expected` entry (`key` says which): host
/// patterns only (an address is never reached unless allowed, so there is
/// nothing to deny, and nothing refused by name to expect).
pub fn parse_deny(s: &str, key: &str) -> Result<(String, Option<u16>), (String, Option<String>)> {
    if parse_ip_rule(s).is_some() {
        let help = if key == "deny" {
            "addresses are reached only when an `allow` range names them: remove it from `allow` instead"
        } else {
            "a refusal is expected by the name it was asked for: name the host"
        };
        return Err((
            format!("invalid {key} entry `{s}`: an address; expected a host name"),
            Some(help.into()),
        ));
    }
    parse_host(s)
}

/// An address range: network, prefix length, optional port.
pub type IpRange = (IpAddr, u8, Option<u16>);

/// `None`: not an address (a host name); else the range or why it is wrong.
pub fn parse_ip_rule(s: &str) -> Option<Result<IpRange, String>> {
    let bad = |why: &str| {
        format!(
            "invalid address range `{s}`: {why}; expected e.g. \"10.1.2.0/24:5432\", \"192.0.2.7\" or \"[2001:db8::/32]:443\""
        )
    };
    let (range, port) = if let Some(rest) = s.strip_prefix('[') {
        let Some((inner, after)) = rest.split_once(']') else {
            return Some(Err(bad("no closing `]`")));
        };
        let port = match after {
            "" => None,
            p => match p.strip_prefix(':').and_then(|p| p.parse::<u16>().ok()) {
                Some(p) if p > 0 => Some(p),
                _ => return Some(Err(bad("the port must follow `]:` and be from 1 to 65535"))),
            },
        };
        (inner, port)
    } else if s.matches(':').count() > 1 {
        (s, None)
    } else {
        match s.rsplit_once(':') {
            Some((head, p)) => {
                let addr = head.split('/').next().unwrap_or(head);
                if addr.parse::<std::net::Ipv4Addr>().is_err() {
                    return None;
                }
                match p.parse::<u16>() {
                    Ok(p) if p > 0 => (head, Some(p)),
                    _ => {
                        return Some(Err(bad(&format!(
                            "port `{p}` is not a number from 1 to 65535"
                        ))));
                    }
                }
            }
            None => (s, None),
        }
    };
    let (addr, prefix) = match range.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (range, None),
    };
    let ip: IpAddr = match addr.parse() {
        Ok(ip) => ip,
        // Dotted digits that are no address are a mistyped one, not a name.
        Err(_) if s.starts_with('[') || s.contains('/') || s.matches(':').count() > 1 => {
            return Some(Err(bad(&format!("`{addr}` is not an IP address"))));
        }
        Err(_) if !addr.is_empty() && addr.bytes().all(|b| b.is_ascii_digit() || b == b'.') => {
            return Some(Err(bad(&format!("`{addr}` is not an IP address"))));
        }
        Err(_) => return None,
    };
    let full: u8 = if ip.is_ipv4() { 32 } else { 128 };
    let prefix = match prefix.map(str::parse::<u8>) {
        None => full,
        Some(Ok(p)) if p <= full => p,
        Some(_) => {
            return Some(Err(bad(&format!(
                "the prefix length must be from 0 to {full}"
            ))));
        }
    };
    let masked = match ip {
        IpAddr::V4(v4) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4((u32::from(v4) & mask).into())
        }
        IpAddr::V6(v6) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6((u128::from(v6) & mask).into())
        }
    };
    if masked != ip {
        return Some(Err(bad(&format!(
            "bits are set beyond the /{prefix} prefix (the network is {masked}/{prefix})"
        ))));
    }
    if prefix == 0 {
        return Some(Err(bad(
            "a /0 range would allow every address; use [network] mode = \"host\" for unrestricted network",
        )));
    }
    if ip.is_unspecified() && prefix == full {
        return Some(Err(bad(
            "the unspecified address is no destination (a connect to it reaches this host's own services); name the service's own address or name",
        )));
    }
    Some(Ok((ip, prefix, port)))
}

/// `HOST:IP` (IPv6 addresses need no brackets: the host has no colon).
pub fn parse_resolve(s: &str) -> Result<(String, IpAddr), String> {
    let bad = |why: &str| {
        format!(
            "invalid pin `{s}`: {why}; expected `HOST:IP`, e.g. \"registry.npmjs.org:104.16.0.1\""
        )
    };
    let (host, addr) = s.split_once(':').ok_or_else(|| bad("no `:`"))?;
    let addr = addr.trim_start_matches('[').trim_end_matches(']');
    let addr: IpAddr = addr
        .parse()
        .map_err(|_| bad(&format!("`{addr}` is not an IP address")))?;
    let (host, port) = parse_host(host).map_err(|(m, _)| m)?;
    if host.starts_with("*.") || port.is_some() {
        return Err(bad("the host must be a plain name, without `*` or a port"));
    }
    Ok((host, addr))
}

/// A published port, `[HOST_ADDR:]HOST_PORT[:JOB_PORT]`: `3000` (the
/// host's `127.0.0.1:3000`, the job's 3000), `8080:3000`, `0.0.0.0:8080`,
/// `0.0.0.0:8080:3000`, `[::1]:8080:3000` (an IPv6 address in brackets).
/// `A:B` is an address and a port when `A` is an address, else two
/// ports. Ports are 1 to 65535.
pub fn parse_publish(s: &str) -> Result<(std::net::SocketAddr, u16), String> {
    let bad = |why: String| {
        format!(
            "invalid published port `{s}`: {why}; expected `[HOST_ADDR:]HOST_PORT[:JOB_PORT]`, e.g. \"3000\", \"8080:3000\" or \"0.0.0.0:8080:3000\""
        )
    };
    let port = |p: &str| -> Result<u16, String> {
        match p.parse::<u16>() {
            Ok(0) => Err(bad("port 0 names no port".into())),
            Ok(n) => Ok(n),
            Err(_) => Err(bad(format!("`{p}` is not a port number"))),
        }
    };
    let (addr, ports): (Option<IpAddr>, Vec<&str>) = match s.strip_prefix('[') {
        Some(v6) => {
            let (ip, rest) = v6.split_once("]:").ok_or_else(|| {
                bad("an IPv6 address in brackets must be followed by `:PORT`".into())
            })?;
            let ip: IpAddr = ip
                .parse()
                .map_err(|_| bad(format!("`{ip}` is not an IPv6 address")))?;
            (Some(ip), rest.split(':').collect())
        }
        None => {
            let parts: Vec<&str> = s.split(':').collect();
            match parts.as_slice() {
                [first, rest @ ..] if !rest.is_empty() && first.parse::<IpAddr>().is_ok() => {
                    (first.parse().ok(), rest.to_vec())
                }
                [a, _, _] => return Err(bad(format!("`{a}` is not an IP address"))),
                _ => (None, parts),
            }
        }
    };
    let (host_port, job_port) = match ports.as_slice() {
        [p] => (port(p)?, port(p)?),
        [h, j] => (port(h)?, port(j)?),
        _ => return Err(bad("too many `:` (an IPv6 address goes in brackets)".into())),
    };
    let ip = addr.unwrap_or(IpAddr::from(std::net::Ipv4Addr::LOCALHOST));
    Ok((std::net::SocketAddr::new(ip, host_port), job_port))
}

/// A variable name or (unless `exact`) a pattern with `*`.
pub fn env_name(s: &str, exact: bool) -> Result<(), String> {
    if s.is_empty() {
        return Err("empty variable name; expected a name such as \"PATH\"".into());
    }
    if s.contains(['=', '\0']) {
        return Err(format!(
            "invalid variable name `{s}`: `=` and NUL are not allowed; expected a name such as \"PATH\""
        ));
    }
    if exact && s.contains('*') {
        return Err(format!(
            "`{s}` is a pattern; expected an exact variable name (`pass_secret` and `set` take exact names)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unspecified_address_is_no_ip_rule_and_an_empty_host_no_pin() {
        for bad in ["0.0.0.0:8080", "0.0.0.0", "[::]:443"] {
            assert!(
                matches!(parse_ip_rule(bad), Some(Err(e)) if e.contains("no destination")),
                "{bad}"
            );
        }
        assert!(matches!(parse_ip_rule("0.0.0.0/8"), Some(Ok(_))));
        assert!(parse_resolve(":127.0.0.1").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        for bad in ["", "90", "m", "1x", "0s", "99999999999999999999h", "-1s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4GiB"), Ok(4 << 30));
        assert_eq!(parse_size("512 MiB"), Ok(512 << 20));
        assert_eq!(parse_size("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_size("100"), Ok(100));
        for bad in ["", "GiB", "4 parsecs", "0", "99999999999TiB", "-1"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hosts() {
        assert_eq!(
            parse_host("Registry.NPMjs.org"),
            Ok(("registry.npmjs.org".into(), None))
        );
        assert_eq!(
            parse_host("*.github.com:443"),
            Ok(("*.github.com".into(), Some(443)))
        );
        for bad in [
            "*",
            "",
            "a..b",
            "https://x.org/",
            "x.org:0",
            "x.org:http",
            "a*.b.com",
            "-a.com",
            "a b",
        ] {
            assert!(parse_host(bad).is_err(), "{bad}");
        }
        assert!(parse_resolve("registry.npmjs.org:104.16.0.1").is_ok());
        assert!(parse_resolve("h.example:2001:db8::1").is_ok());
        assert!(parse_resolve("*.x.org:1.2.3.4").is_err());
        assert!(parse_resolve("x.org").is_err());
    }
}
