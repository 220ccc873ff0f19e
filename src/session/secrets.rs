//! `--secret NAME@HOST` (issue P13): the job holds a placeholder, vetto's
//! proxy holds the value. The value is read from vetto's own environment
//! here, checked, and handed to the proxy only; the job's environment gets
//! a random string of the same shape (a known token prefix kept, every
//! letter and digit drawn again), so a tool that checks a token's form
//! still accepts it. A placeholder is worthless anywhere: sent to another
//! host it authenticates nothing.

use crate::policy::{Policy, SecretRule};
use crate::proxy::Secret;

/// Prefixes that name a token's kind (GitHub, npm, GitLab, Anthropic,
/// OpenAI, PyPI, Slack, Hugging Face, AWS key ids): kept in the
/// placeholder, so the job's tools see the kind of token they expect.
/// Longest first.
const KNOWN_PREFIXES: &[&str] = &[
    "sk-ant-api03-",
    "github_pat_",
    "sk-proj-",
    "sk-ant-",
    "glpat-",
    "pypi-",
    "xoxb-",
    "xoxp-",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "npm_",
    "AKIA",
    "ASIA",
    "sk-",
    "hf_",
];

/// Letters and digits a placeholder must draw at least (after the kept
/// prefix): fewer, and it could stand for other text in a request.
const MIN_RANDOM: usize = 8;

/// Why a secret cannot be used: the session is refused.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error(
        "{rule}: vetto's environment has no {name} (or it is empty), so the proxy has no value to put in the job's requests; set {name} where vetto runs (a workflow step's `env:`), or remove the secret"
    )]
    Missing { rule: String, name: String },
    #[error(
        "{rule}: the value of {name} holds a space or a control character; vetto puts only printable values in request heads"
    )]
    Unprintable { rule: String, name: String },
    #[error(
        "{rule}: the value of {name} has fewer than {MIN_RANDOM} letters or digits after its prefix, too few for a placeholder that stands for nothing else in a request"
    )]
    TooShort { rule: String, name: String },
    #[error(
        "a secret or a request rule needs vetto's proxy to read the job's requests, and the network is in mode \"{mode}\" (--net {mode}), which has no proxy; remove --net {mode} (or mode = \"{mode}\"), or the secret or rule"
    )]
    Unfiltered { mode: &'static str },
    #[error("cannot draw a placeholder from the kernel's random source: {0}")]
    Random(#[from] getrandom::Error),
}

/// For each of the policy's secrets: its value from `env` (vetto's own),
/// checked; a placeholder set for the job (`policy.env.set`, which wins
/// over any passed value of the same name).
pub fn prepare(policy: &mut Policy, env: &[(String, String)]) -> Result<Vec<Secret>, SecretError> {
    let mut out = Vec::with_capacity(policy.secrets.len());
    for rule in &policy.secrets {
        let value = env
            .iter()
            .find(|(k, v)| *k == rule.name && !v.is_empty())
            .map(|(_, v)| v.clone())
            .ok_or_else(|| SecretError::Missing {
                rule: described(rule),
                name: rule.name.clone(),
            })?;
        let placeholder = placeholder(&value, rule)?;
        out.push(Secret {
            name: rule.name.clone(),
            placeholder,
            value,
            hosts: rule.hosts.clone(),
        });
    }
    for s in &out {
        policy.env.set.retain(|(k, _)| *k != s.name);
        policy.env.set.push((s.name.clone(), s.placeholder.clone()));
    }
    Ok(out)
}

/// The terminal's line for the secrets.
pub fn line(secrets: &[Secret]) -> Option<String> {
    if secrets.is_empty() {
        return None;
    }
    let each: Vec<String> = secrets
        .iter()
        .map(|s| {
            let hosts: Vec<String> = s.hosts.iter().map(|h| h.written()).collect();
            format!("{} (to {})", s.name, hosts.join(", "))
        })
        .collect();
    Some(format!(
        "secrets: {} — the job holds placeholders; vetto's proxy puts each value in HTTPS requests to its hosts only (the job trusts the session's certificate authority for them)",
        each.join(", ")
    ))
}

/// Where the rule was written, for a message.
fn described(rule: &SecretRule) -> String {
    let o = &rule.origin;
    if o.line == 0 {
        format!("{} {}", o.source, o.written)
    } else {
        format!("{}:{}:{}", o.source, o.line, o.col)
    }
}

/// `value`'s shape with fresh letters and digits: a known prefix kept,
/// each digit, lower- and upper-case letter drawn again in its class, any
/// other printable character kept.
fn placeholder(value: &str, rule: &SecretRule) -> Result<String, SecretError> {
    let err = |e: fn(String, String) -> SecretError| e(described(rule), rule.name.clone());
    if !value.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(err(|rule, name| SecretError::Unprintable { rule, name }));
    }
    let keep = KNOWN_PREFIXES
        .iter()
        .find(|p| value.starts_with(*p))
        .map_or(0, |p| p.len());
    let drawn = value[keep..]
        .bytes()
        .filter(u8::is_ascii_alphanumeric)
        .count();
    if drawn < MIN_RANDOM {
        return Err(err(|rule, name| SecretError::TooShort { rule, name }));
    }
    loop {
        let mut random = vec![0u8; value.len()];
        getrandom::fill(&mut random)?;
        let out: String = value
            .bytes()
            .zip(random)
            .enumerate()
            .map(|(i, (b, r))| {
                let pick = |base: u8, n: u8| char::from(base + r % n);
                match b {
                    _ if i < keep => char::from(b),
                    b'0'..=b'9' => pick(b'0', 10),
                    b'a'..=b'z' => pick(b'a', 26),
                    b'A'..=b'Z' => pick(b'A', 26),
                    _ => char::from(b),
                }
            })
            .collect();
        // Never the value itself, nor text that holds it.
        if !out.contains(value) && !value.contains(&out) {
            return Ok(out);
        }
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;
    use crate::policy::{HostPattern, Origin};

    fn rule(name: &str) -> SecretRule {
        SecretRule {
            name: name.into(),
            hosts: vec![HostPattern {
                host: "registry.npmjs.org".into(),
                port: None,
                origin: Origin::command_line("--secret", ""),
            }],
            origin: Origin::command_line("--secret", &format!("{name}@registry.npmjs.org")),
        }
    }

    #[test]
    fn a_placeholder_has_the_tokens_shape_and_none_of_its_letters() {
        let value = "npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";
        let p = placeholder(value, &rule("NPM_TOKEN")).unwrap();
        assert_eq!(p.len(), value.len());
        assert!(p.starts_with("npm_"), "{p}");
        assert_ne!(p, value);
        for (a, b) in value.bytes().zip(p.bytes()).skip(4) {
            assert_eq!(
                (
                    a.is_ascii_digit(),
                    a.is_ascii_lowercase(),
                    a.is_ascii_uppercase()
                ),
                (
                    b.is_ascii_digit(),
                    b.is_ascii_lowercase(),
                    b.is_ascii_uppercase()
                )
            );
        }
        let p2 = placeholder(value, &rule("NPM_TOKEN")).unwrap();
        assert_ne!(p, p2, "each session draws its own");
        let dashed = placeholder("0f3a-91bc-77de-aa01", &rule("K")).unwrap();
        assert_eq!(dashed.matches('-').count(), 3);
    }

    #[test]
    fn a_value_a_placeholder_cannot_stand_for_is_refused() {
        for (value, why) in [
            ("npm_abc12", "fewer than 8"),
            ("short", "fewer than 8"),
            ("has space 12345678", "space or a control"),
            ("tab\t12345678", "space or a control"),
        ] {
            let e = placeholder(value, &rule("T")).unwrap_err().to_string();
            assert!(
                e.contains(why) && e.contains("--secret T@registry.npmjs.org"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_missing_variable_is_refused_by_name() {
        let mut p = Policy::empty("/p", "/t");
        p.secrets.push(rule("NPM_TOKEN"));
        let e = prepare(&mut p, &[("NPM_TOKEN".into(), String::new())])
            .unwrap_err()
            .to_string();
        assert!(e.contains("vetto's environment has no NPM_TOKEN"), "{e}");
        let ok = prepare(
            &mut p,
            &[("NPM_TOKEN".into(), "npm_0123456789abcdef".into())],
        )
        .unwrap();
        assert_eq!(ok.len(), 1);
        let set = p.env.set.iter().find(|(k, _)| k == "NPM_TOKEN").unwrap();
        assert_eq!(set.1, ok[0].placeholder);
        assert_ne!(set.1, "npm_0123456789abcdef");
    }
}
