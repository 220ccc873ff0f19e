//! Which environment variables reach the job. Values travel to the child in
//! the plan but are never printed or logged; only names are.

use serde::{Deserialize, Serialize};

use crate::policy::EnvPolicy;
use crate::policy::paths::wildcard_match;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvPlan {
    /// The job's complete environment.
    pub vars: Vec<(String, String)>,
    /// Names withheld because they look like credentials (reported to the user).
    pub withheld: Vec<String>,
}

impl EnvPlan {
    /// Set `vars` (the proxy variables), replacing any value of the same
    /// name the caller passed: the job's proxy is vetto's.
    pub fn set_all(&mut self, vars: Vec<(String, String)>) {
        self.vars.retain(|(n, _)| !vars.iter().any(|(m, _)| m == n));
        self.vars.extend(vars);
    }
}

/// `*` matches any run of characters; everything else is literal.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    wildcard_match(pattern.as_bytes(), name.as_bytes(), b'*', None)
}

/// A value that carries a credential in a URL: `scheme://user:password@host`,
/// or any user part for http(s) (`https://ghp_…@github.com`, the token as
/// the user name). Scans every URL of the value (`PIP_EXTRA_INDEX_URL` can
/// hold several).
pub fn has_url_credentials(value: &str) -> bool {
    let mut rest = value;
    while let Some(at) = rest.find("://") {
        let scheme = rest[..at]
            .rsplit(|c: char| !(c.is_ascii_alphanumeric() || "+-.".contains(c)))
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let after = &rest[at + 3..];
        let authority = after
            .split(|c: char| "/?# \t,;".contains(c))
            .next()
            .unwrap_or_default();
        if let Some((userinfo, _host)) = authority.rsplit_once('@')
            && !userinfo.is_empty()
            && (userinfo.contains(':') || scheme == "http" || scheme == "https")
        {
            return true;
        }
        rest = after;
    }
    false
}

/// Scrub `env` by the policy, then add the session's own variables. A
/// variable is withheld when its name matches a `withhold` pattern or its
/// value has credentials in a URL, unless it is passed by its exact name.
pub fn plan(policy: &EnvPolicy, env: &[(String, String)], session: &[(String, String)]) -> EnvPlan {
    let mut out = EnvPlan::default();
    for (name, value) in env {
        let withheld =
            policy.withhold.iter().any(|p| glob_match(p, name)) || has_url_credentials(value);
        let forced = policy.pass_exact.iter().any(|p| p == name);
        if withheld && !forced {
            out.withheld.push(name.clone());
            continue;
        }
        if forced || policy.pass.iter().any(|p| glob_match(p, name)) {
            out.vars.push((name.clone(), value.clone()));
        }
    }
    for (name, value) in policy.set.iter().chain(session) {
        out.vars.retain(|(n, _)| n != name);
        out.vars.push((name.clone(), value.clone()));
    }
    out.withheld.sort();
    out.withheld.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matches_credential_shapes() {
        assert!(glob_match("*TOKEN*", "GITHUB_TOKEN"));
        assert!(glob_match("*TOKEN*", "TOKEN"));
        assert!(glob_match("AWS_*", "AWS_SECRET_ACCESS_KEY"));
        assert!(glob_match("*_KEY", "OPENAI_API_KEY"));
        assert!(!glob_match("*_KEY", "KEYBOARD"));
        assert!(!glob_match("AWS_*", "XAWS_"));
        assert!(glob_match("PATH", "PATH"));
        assert!(!glob_match("PATH", "PATHX"));
    }

    #[test]
    fn urls_with_credentials_are_told_from_ordinary_urls() {
        for secret in [
            "https://user:hunter2@pypi.example.com/simple",
            "https://ghp_abc@github.com/o/r.git",
            "postgres://app:pw@db:5432/app",
            "https://pypi.org/simple https://u:p@private.example/simple",
        ] {
            assert!(has_url_credentials(secret), "{secret}");
        }
        for ordinary in [
            "https://registry.npmjs.org/",
            "https://proxy.golang.org,direct",
            "ssh://git@github.com/o/r.git",
            "/etc/ssl/certs/ca.pem",
            "git@github.com:o/r.git",
            "https://example.com/path@v1",
            "",
        ] {
            assert!(!has_url_credentials(ordinary), "{ordinary}");
        }
    }

    #[test]
    fn credential_withheld_unless_passed_by_name() {
        let policy = EnvPolicy {
            pass: vec!["PATH".into(), "GITHUB_*".into()],
            withhold: vec!["*TOKEN*".into()],
            pass_exact: vec!["NPM_TOKEN".into()],
            set: vec![],
        };
        let env = vec![
            ("PATH".into(), "/bin".into()),
            ("GITHUB_TOKEN".into(), "ghs_x".into()),
            ("NPM_TOKEN".into(), "npm_x".into()),
            ("RANDOM_THING".into(), "x".into()),
        ];
        let plan = plan(&policy, &env, &[("TMPDIR".into(), "/t".into())]);
        let names: Vec<_> = plan.vars.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["PATH", "NPM_TOKEN", "TMPDIR"]);
        assert_eq!(plan.withheld, ["GITHUB_TOKEN"]);
    }
}
