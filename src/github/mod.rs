//! `vetto github`: the pull-request comment and the code-scanning upload,
//! through GitHub's REST API (octocrab over rustls).
//!
//! This is vetto's third async island, after the supervisor and the proxy:
//! octocrab is a tokio client. It runs here, outside any sandbox, in a
//! process that restricts nothing, on a current-thread runtime that lives
//! for one call of the small synchronous facade below ([`Api::comment`],
//! [`Api::upload_sarif`]); the CLI never sees a future.
//!
//! The token is read by the CLI from vetto's own environment and held as a
//! [`secrecy::SecretString`]: it goes into the `Authorization` header and
//! nowhere else (no error, notice or debug output carries it). The job
//! never sees it: the default policy withholds `*TOKEN` from the sandbox.
//!
//! Every request is retried, a bounded number of times with deterministic
//! exponential delays ([`Retry`]), on a 5xx, a broken connection and a
//! rate limit (403/429 with `retry-after` or `x-ratelimit-remaining: 0`),
//! waiting what GitHub asks when it says. A 401, 403 or 404 is an error
//! that names what to fix ([`GithubError`]).

mod client;
mod comment;
mod sarif;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

pub use comment::{CommentOutcome, MARKER, MAX_BODY_CHARS, body as comment_body};
use octocrab::secrecy::SecretString;
pub use sarif::{MAX_GZIPPED, SarifError, SarifUpload, prepare as prepare_sarif};

/// `OWNER/NAME`, as GitHub spells repositories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    pub owner: String,
    pub name: String,
}

impl FromStr for Repo {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let ok = |p: &str| {
            !p.is_empty()
                && p != "."
                && p != ".."
                && p.len() <= 100
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        match s.split_once('/') {
            Some((owner, name)) if ok(owner) && ok(name) => Ok(Repo {
                owner: owner.to_owned(),
                name: name.to_owned(),
            }),
            _ => Err(format!(
                "`{}` is not a repository: expected OWNER/NAME (letters, digits, `-`, `_`, `.`)",
                crate::text::name(s)
            )),
        }
    }
}

impl fmt::Display for Repo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.owner, self.name)
    }
}

/// How failed requests are tried again: `attempts` in all, the n-th retry
/// after `base × 2ⁿ⁻¹` (no jitter: one client, and tests see the same
/// delays every run), or after what GitHub asks for (`retry-after`,
/// `x-ratelimit-reset`), as long as no single wait exceeds `max_wait`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    pub attempts: u32,
    pub base: Duration,
    pub max_wait: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            attempts: 5,
            base: Duration::from_secs(1),
            max_wait: Duration::from_secs(300),
        }
    }
}

impl Retry {
    /// The backoff before retry number `n` (1-based), capped at `max_wait`.
    pub fn backoff(&self, n: u32) -> Duration {
        let factor = 1u32.checked_shl(n.saturating_sub(1)).unwrap_or(u32::MAX);
        self.base
            .checked_mul(factor)
            .unwrap_or(self.max_wait)
            .min(self.max_wait)
    }
}

/// What a request is for: it names the token permission a 403 lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Comment,
    UploadSarif,
}

impl Operation {
    pub fn permission(self) -> &'static str {
        match self {
            Operation::Comment => {
                "`pull-requests: write` (or `issues: write`); a classic personal access token needs the `repo` scope (`public_repo` for a public repository)"
            }
            Operation::UploadSarif => {
                "`security-events: write`; a classic personal access token needs the `security_events` scope (`public_repo` for a public repository)"
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GithubError {
    #[error(
        "GitHub rejected the token (401: {message}): set GITHUB_TOKEN or GH_TOKEN to a token that is valid and not expired"
    )]
    BadToken { message: String },
    #[error("GitHub refused the request (403: {message}): the token needs {permission}")]
    Forbidden {
        message: String,
        permission: &'static str,
    },
    #[error(
        "GitHub found no {what} (404: {message}): check the name, and that the token can see the repository (GitHub answers 404 to a token without access)"
    )]
    NotFound { what: String, message: String },
    #[error("GitHub asks to wait {}s before the next request (rate limit), longer than the {}s vetto waits; try again later", wait.as_secs(), max_wait.as_secs())]
    WaitTooLong { wait: Duration, max_wait: Duration },
    #[error("GitHub answered {status} {attempts} time(s): {message}")]
    GaveUp {
        status: u16,
        attempts: u32,
        message: String,
    },
    #[error("GitHub answered {status}: {message}")]
    Status { status: u16, message: String },
    #[error("cannot reach the GitHub API at {api_url} ({attempts} attempt(s))")]
    Transport {
        api_url: String,
        attempts: u32,
        #[source]
        source: octocrab::Error,
    },
    #[error("GitHub's answer to {what} is larger than {max} bytes")]
    TooLarge { what: String, max: usize },
    #[error("GitHub's answer to {what} is not what the API documents")]
    Response {
        what: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("the pull request has more than {max} comments; vetto stops looking for its own")]
    TooManyComments { max: usize },
    #[error(
        "cannot set up the GitHub client for {api_url} (it trusts the system's CA certificates: install ca-certificates, or point SSL_CERT_FILE at a bundle)"
    )]
    Client {
        api_url: String,
        #[source]
        source: octocrab::Error,
    },
    #[error("cannot start the GitHub client's runtime")]
    Runtime(#[source] std::io::Error),
}

/// The API, the token and how to retry: everything a call needs.
pub struct Api {
    /// `https://api.github.com`, or a GitHub Enterprise Server's
    /// `https://HOST/api/v3`.
    pub url: String,
    pub token: SecretString,
    pub retry: Retry,
}

impl fmt::Debug for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Api")
            .field("url", &self.url)
            .field("token", &"<redacted>")
            .field("retry", &self.retry)
            .finish()
    }
}

/// A comment to create or update on pull request `pr`.
#[derive(Debug, Clone)]
pub struct CommentRequest {
    pub repo: Repo,
    pub pr: u64,
    /// The comment body, marker included ([`comment_body`]).
    pub body: String,
    /// Only a marked comment by this login is vetto's (in GitHub Actions,
    /// `github-actions[bot]`): anyone can post a comment that starts with
    /// the marker, and one vetto updated would then carry its report under
    /// someone else's name, who can edit it back.
    pub author: Option<String>,
}

/// What GitHub answered to a SARIF upload (`202 Accepted`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct SarifReceipt {
    pub id: Option<String>,
    pub url: Option<String>,
}

impl Api {
    /// Create the pull request's vetto comment, or update it when one
    /// with [`MARKER`] exists.
    pub fn comment(&self, req: &CommentRequest) -> Result<CommentOutcome, GithubError> {
        self.block_on(|c| async move { comment::upsert(&c, req).await })
    }

    /// Upload a prepared SARIF analysis ([`prepare_sarif`]).
    pub fn upload_sarif(
        &self,
        repo: &Repo,
        upload: &SarifUpload,
    ) -> Result<SarifReceipt, GithubError> {
        self.block_on(|c| async move { sarif::upload(&c, repo, upload).await })
    }

    fn block_on<'a, T, F>(
        &'a self,
        call: impl FnOnce(client::Client<'a>) -> F,
    ) -> Result<T, GithubError>
    where
        F: std::future::Future<Output = Result<T, GithubError>>,
    {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(GithubError::Runtime)?;
        rt.block_on(async {
            let c = client::Client::new(self)?;
            call(c).await
        })
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn repositories_are_owner_slash_name() {
        let r: Repo = "vetto-dev/vetto.rs".parse().unwrap();
        assert_eq!(
            (r.owner.as_str(), r.name.as_str()),
            ("vetto-dev", "vetto.rs")
        );
        for bad in [
            "vetto", "a/b/c", "/b", "a/", "a/..", "a b/c", "a/b?x=1", "a/b#",
        ] {
            assert!(bad.parse::<Repo>().is_err(), "{bad}");
        }
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let r = Retry {
            attempts: 10,
            base: Duration::from_millis(100),
            max_wait: Duration::from_secs(1),
        };
        let waits: Vec<_> = (1..=6).map(|n| r.backoff(n).as_millis()).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(r.backoff(100), Duration::from_secs(1));
    }

    #[test]
    fn the_token_never_shows_in_debug_output() {
        let api = Api {
            url: "https://api.github.com".into(),
            token: SecretString::from("ghs_CANARY".to_string()),
            retry: Retry::default(),
        };
        assert!(!format!("{api:?}").contains("CANARY"));
    }
}
