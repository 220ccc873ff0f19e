//! `RawPolicy`: the TOML document as written, every value with its span.
//!
//! The document is parsed with `toml`'s span-preserving `DeTable` and walked
//! by hand rather than through serde, so that every unknown key and every
//! wrongly typed value is reported (serde stops at the first error).

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::diag::{Diags, SourceRef, did_you_mean, list};

/// A value and the byte range it was written at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sp<T> {
    pub value: T,
    pub span: Range<usize>,
}

/// `max_memory` may be written as a string with a unit or as bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SizeValue {
    Text(String),
    Bytes(i64),
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawPolicy {
    pub extends: Vec<Sp<String>>,
    /// Where `extends` was written (the key), when it was: a file without
    /// it extends `default`; `extends = []` is the blank slate.
    pub extends_at: Option<Range<usize>>,
    pub min_tier: Option<Sp<String>>,
    /// `auto_preset = false`: no preset is chosen from the command.
    pub auto_preset: Option<Sp<bool>>,
    pub filesystem: RawFilesystem,
    pub network: RawNetwork,
    pub limits: RawLimits,
    pub env: RawEnv,
    /// `[secrets]`: each variable's name and the hosts its value may go to.
    pub secrets: Vec<(Sp<String>, Vec<Sp<String>>)>,
    /// `[syscalls] expected`: classes of refused calls that are no finding.
    pub expected_denials: Vec<Sp<String>>,
    /// `[process] daemons`: programs expected to outlive the command.
    pub daemons: Vec<Sp<String>>,
    /// `[persistence] keep`: changes where a tool runs them later that
    /// the session may leave.
    pub keep: Vec<Sp<String>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawFilesystem {
    pub read: Vec<Sp<String>>,
    pub write: Vec<Sp<String>>,
    pub deny: Vec<Sp<String>>,
    pub protect: Vec<Sp<String>>,
    pub outputs: Vec<Sp<String>>,
    /// vetto-owned caches by tool name (`policy::tools::Cache`).
    pub caches: Vec<Sp<String>>,
    pub check_creations: Option<Sp<String>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawNetwork {
    pub mode: Option<Sp<String>>,
    pub allow: Vec<Sp<String>>,
    pub deny: Vec<Sp<String>>,
    pub resolve: Vec<Sp<String>>,
    /// Pathname unix sockets the job may connect to.
    pub unix: Vec<Sp<String>>,
    /// Registry sources by name (`policy::tools::Registry`).
    pub discover: Vec<Sp<String>>,
    /// The job's loopback ports made reachable on the host's.
    pub publish: Vec<Sp<String>>,
    /// Method and path rules (`GET api.example.com/repos/*`).
    pub rules: Vec<Sp<String>>,
    /// Names refused as expected (no finding).
    pub expected: Vec<Sp<String>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawLimits {
    pub timeout: Option<Sp<String>>,
    pub max_procs: Option<Sp<i64>>,
    pub max_memory: Option<Sp<SizeValue>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawEnv {
    pub pass: Vec<Sp<String>>,
    pub withhold: Vec<Sp<String>>,
    pub pass_secret: Vec<Sp<String>>,
    pub set: Vec<(Sp<String>, Sp<String>)>,
}

const TOP: &[&str] = &[
    "extends",
    "min_tier",
    "auto_preset",
    "filesystem",
    "network",
    "limits",
    "env",
    "secrets",
    "syscalls",
    "process",
    "persistence",
];
const FILESYSTEM: &[&str] = &[
    "read",
    "write",
    "deny",
    "protect",
    "outputs",
    "caches",
    "check_creations",
];
const NETWORK: &[&str] = &[
    "mode", "allow", "deny", "resolve", "unix", "discover", "publish", "rules", "expected",
];
const LIMITS: &[&str] = &["timeout", "max_procs", "max_memory"];
const ENV: &[&str] = &["pass", "withhold", "pass_secret", "set"];
const SYSCALLS: &[&str] = &["expected"];
const PROCESS: &[&str] = &["daemons"];
const PERSISTENCE: &[&str] = &["keep"];

/// The section a misplaced key belongs to, for a better hint.
fn home_of(key: &str) -> Option<&'static str> {
    [
        ("filesystem", FILESYSTEM),
        ("network", NETWORK),
        ("limits", LIMITS),
        ("env", ENV),
        ("syscalls", SYSCALLS),
        ("process", PROCESS),
        ("persistence", PERSISTENCE),
    ]
    .into_iter()
    .find(|(_, keys)| keys.contains(&key))
    .map(|(section, _)| section)
}

/// Parse `text`; syntax errors and structural problems go to `diags`.
/// The result holds everything that could be read, even when there were errors.
pub fn parse(src: SourceRef<'_>, diags: &mut Diags) -> RawPolicy {
    let (doc, errors) = DeTable::parse_recoverable(src.text);
    let had_syntax_errors = !errors.is_empty();
    // Only the first: the parser's recovery turns one missing `]` into a
    // cascade of follow-on errors that would bury the real one.
    for e in errors.into_iter().take(1) {
        let span = e.span().unwrap_or(0..0);
        diags.at(
            src,
            &span,
            format!("invalid TOML: {}", e.message().trim_end()),
        );
    }
    let mut raw = RawPolicy::default();
    if had_syntax_errors {
        // Recovery can leave a half-built document; reporting type errors
        // on it would only add noise to the syntax error.
        return raw;
    }
    let mut w = Walker { src, diags };
    let table = doc.get_ref();
    w.unknown_keys(table, None, TOP);
    for (key, value) in table.iter() {
        match key.get_ref().as_ref() {
            "extends" => {
                raw.extends_at = Some(key.span());
                raw.extends = w.string_list(value, "a list of preset names");
            }
            "min_tier" => {
                raw.min_tier = w.string(value, "a tier name (`full`, `fs-only` or `seccomp`)")
            }
            "auto_preset" => raw.auto_preset = w.boolean(value, "`true` or `false`"),
            "filesystem" => {
                if let Some(t) = w.table(value, "filesystem") {
                    w.unknown_keys(t, Some("filesystem"), FILESYSTEM);
                    let fs = &mut raw.filesystem;
                    for (k, v) in t.iter() {
                        let slot = match k.get_ref().as_ref() {
                            "read" => &mut fs.read,
                            "write" => &mut fs.write,
                            "deny" => &mut fs.deny,
                            "protect" => &mut fs.protect,
                            "outputs" => {
                                fs.outputs = w.string_list(v, "a list of directory names");
                                continue;
                            }
                            "caches" => {
                                fs.caches = w.string_list(v, "a list of cache names");
                                continue;
                            }
                            "check_creations" => {
                                fs.check_creations = w.string(v, "`live` or `after`");
                                continue;
                            }
                            _ => continue,
                        };
                        *slot = w.string_list(v, "a list of paths");
                    }
                }
            }
            "network" => {
                if let Some(t) = w.table(value, "network") {
                    w.unknown_keys(t, Some("network"), NETWORK);
                    for (k, v) in t.iter() {
                        match k.get_ref().as_ref() {
                            "mode" => {
                                raw.network.mode =
                                    w.string(v, "a network mode (`off`, `host` or `allow`)")
                            }
                            "allow" => {
                                raw.network.allow =
                                    w.string_list(v, "a list of host names or address ranges")
                            }
                            "deny" => raw.network.deny = w.string_list(v, "a list of host names"),
                            "resolve" => {
                                raw.network.resolve = w.string_list(v, "a list of `HOST:IP` pins")
                            }
                            "unix" => {
                                raw.network.unix = w.string_list(v, "a list of unix socket paths")
                            }
                            "discover" => {
                                raw.network.discover =
                                    w.string_list(v, "a list of registry sources")
                            }
                            "rules" => {
                                raw.network.rules = w.string_list(
                                    v,
                                    "a list of request rules (`METHOD[,METHOD…] HOST/PATH`)",
                                )
                            }
                            "expected" => {
                                raw.network.expected = w.string_list(v, "a list of host names")
                            }
                            "publish" => {
                                raw.network.publish = w.string_list(
                                    v,
                                    "a list of ports (`PORT`, `HOST_PORT:PORT` or `ADDR:HOST_PORT:PORT`)",
                                )
                            }
                            _ => {}
                        }
                    }
                }
            }
            "limits" => {
                if let Some(t) = w.table(value, "limits") {
                    w.unknown_keys(t, Some("limits"), LIMITS);
                    for (k, v) in t.iter() {
                        match k.get_ref().as_ref() {
                            "timeout" => {
                                raw.limits.timeout = w.string(v, "a duration such as \"10m\"")
                            }
                            "max_procs" => {
                                raw.limits.max_procs = w.integer(v, "a number of processes")
                            }
                            "max_memory" => raw.limits.max_memory = w.size(v),
                            _ => {}
                        }
                    }
                }
            }
            "secrets" => {
                if let Some(t) = w.table(value, "secrets") {
                    for (k, v) in t.iter() {
                        let hosts = w.string_list(v, "a list of host names the value may go to");
                        raw.secrets.push((
                            Sp {
                                value: k.get_ref().to_string(),
                                span: k.span(),
                            },
                            hosts,
                        ));
                    }
                }
            }
            "syscalls" => {
                if let Some(t) = w.table(value, "syscalls") {
                    w.unknown_keys(t, Some("syscalls"), SYSCALLS);
                    if let Some(v) = t.get("expected") {
                        raw.expected_denials =
                            w.string_list(v, "a list of refusal classes (`namespaces`)");
                    }
                }
            }
            "persistence" => {
                if let Some(t) = w.table(value, "persistence") {
                    w.unknown_keys(t, Some("persistence"), PERSISTENCE);
                    if let Some(v) = t.get("keep") {
                        raw.keep = w.string_list(v, "a list of paths or patterns");
                    }
                }
            }
            "process" => {
                if let Some(t) = w.table(value, "process") {
                    w.unknown_keys(t, Some("process"), PROCESS);
                    if let Some(v) = t.get("daemons") {
                        raw.daemons = w.string_list(v, "a list of program paths or patterns");
                    }
                }
            }
            "env" => {
                if let Some(t) = w.table(value, "env") {
                    w.unknown_keys(t, Some("env"), ENV);
                    for (k, v) in t.iter() {
                        match k.get_ref().as_ref() {
                            "pass" => raw.env.pass = w.string_list(v, "a list of variable names"),
                            "withhold" => {
                                raw.env.withhold = w.string_list(v, "a list of variable names")
                            }
                            "pass_secret" => {
                                raw.env.pass_secret = w.string_list(v, "a list of variable names")
                            }
                            "set" => raw.env.set = w.string_map(v),
                            _ => {}
                        }
                    }
                }
            }
            _ => {}
        }
    }
    raw
}

struct Walker<'s, 'd> {
    src: SourceRef<'s>,
    diags: &'d mut Diags,
}

fn kind(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date-time",
        DeValue::Array(_) => "a list",
        DeValue::Table(_) => "a table",
    }
}

impl Walker<'_, '_> {
    fn unknown_keys(&mut self, table: &DeTable<'_>, section: Option<&str>, expected: &[&str]) {
        for key in table.keys() {
            let name: &str = key.get_ref();
            if expected.contains(&name) {
                continue;
            }
            let place = section.map_or("at the top level".to_string(), |s| format!("in [{s}]"));
            let help = if let Some(s) = did_you_mean(name, expected) {
                Some(format!("did you mean `{s}`?"))
            } else if let Some(home) = home_of(name).filter(|h| section != Some(*h)) {
                Some(format!("`{name}` belongs in the [{home}] table"))
            } else if let (Some(sec), Some(top)) = (section, did_you_mean(name, TOP)) {
                Some(format!("`{top}` is a top-level key, not part of [{sec}]"))
            } else {
                None
            };
            self.diags.at_help(
                self.src,
                &key.span(),
                format!(
                    "unknown key `{name}` {place}; expected one of {}",
                    list(expected)
                ),
                help,
            );
        }
    }

    fn mismatch(&mut self, v: &Spanned<DeValue<'_>>, expected: &str, help: Option<String>) {
        self.diags.at_help(
            self.src,
            &v.span(),
            format!("expected {expected}, found {}", kind(v.get_ref())),
            help,
        );
    }

    fn table<'v, 'i>(
        &mut self,
        v: &'v Spanned<DeValue<'i>>,
        name: &str,
    ) -> Option<&'v DeTable<'i>> {
        match v.get_ref() {
            DeValue::Table(t) => Some(t),
            _ => {
                self.mismatch(v, &format!("a table `[{name}]`"), None);
                None
            }
        }
    }

    fn string(&mut self, v: &Spanned<DeValue<'_>>, expected: &str) -> Option<Sp<String>> {
        match v.get_ref() {
            DeValue::String(s) => Some(Sp {
                value: s.to_string(),
                span: v.span(),
            }),
            _ => {
                self.mismatch(v, expected, None);
                None
            }
        }
    }

    fn string_list(&mut self, v: &Spanned<DeValue<'_>>, expected: &str) -> Vec<Sp<String>> {
        match v.get_ref() {
            DeValue::Array(items) => {
                let mut out = Vec::new();
                for item in items.iter() {
                    match item.get_ref() {
                        DeValue::String(s) => out.push(Sp {
                            value: s.to_string(),
                            span: item.span(),
                        }),
                        _ => self.mismatch(item, &format!("a string in {expected}"), None),
                    }
                }
                out
            }
            DeValue::String(s) => {
                let help = Some(format!("write a list: [{:?}]", s.as_ref()));
                self.mismatch(v, expected, help);
                Vec::new()
            }
            _ => {
                self.mismatch(v, expected, None);
                Vec::new()
            }
        }
    }

    fn boolean(&mut self, v: &Spanned<DeValue<'_>>, expected: &str) -> Option<Sp<bool>> {
        match v.get_ref() {
            DeValue::Boolean(b) => Some(Sp {
                value: *b,
                span: v.span(),
            }),
            DeValue::String(s) if matches!(s.as_ref(), "true" | "false") => {
                let help = Some(format!("write it without quotes: {s}"));
                self.mismatch(v, expected, help);
                None
            }
            _ => {
                self.mismatch(v, expected, None);
                None
            }
        }
    }

    fn integer(&mut self, v: &Spanned<DeValue<'_>>, expected: &str) -> Option<Sp<i64>> {
        match v.get_ref() {
            DeValue::Integer(i) => {
                match i64::from_str_radix(&i.as_str().replace('_', ""), i.radix()) {
                    Ok(n) => Some(Sp {
                        value: n,
                        span: v.span(),
                    }),
                    Err(_) => {
                        self.diags
                            .at(self.src, &v.span(), format!("{expected} out of range"));
                        None
                    }
                }
            }
            DeValue::String(s) => {
                let help = s
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .map(|n| format!("write it without quotes: {n}"));
                self.mismatch(v, &format!("an integer ({expected})"), help);
                None
            }
            _ => {
                self.mismatch(v, &format!("an integer ({expected})"), None);
                None
            }
        }
    }

    fn size(&mut self, v: &Spanned<DeValue<'_>>) -> Option<Sp<SizeValue>> {
        match v.get_ref() {
            DeValue::String(s) => Some(Sp {
                value: SizeValue::Text(s.to_string()),
                span: v.span(),
            }),
            DeValue::Integer(_) => self.integer(v, "a size in bytes").map(|n| Sp {
                value: SizeValue::Bytes(n.value),
                span: n.span,
            }),
            _ => {
                self.mismatch(v, "a size such as \"4GiB\"", None);
                None
            }
        }
    }

    fn string_map(&mut self, v: &Spanned<DeValue<'_>>) -> Vec<(Sp<String>, Sp<String>)> {
        let DeValue::Table(t) = v.get_ref() else {
            self.mismatch(
                v,
                "a table of variable names to values, e.g. { CI = \"true\" }",
                None,
            );
            return Vec::new();
        };
        let mut out = Vec::new();
        for (k, val) in t.iter() {
            if let Some(value) = self.string(val, "a string value") {
                out.push((
                    Sp {
                        value: k.get_ref().to_string(),
                        span: k.span(),
                    },
                    value,
                ));
            }
        }
        out
    }
}
