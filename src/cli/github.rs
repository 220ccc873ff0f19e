//! `vetto github comment` and `vetto github upload-sarif`: options and the
//! GitHub Actions environment -> a request for [`crate::github`]; the
//! answer printed; exit 0, 1 (GitHub refused or could not be reached) or 2
//! (usage: something to pass or fix before calling GitHub at all).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use octocrab::secrecy::SecretString;

use super::{GithubApiArgs, GithubCommand, GithubCommentArgs, GithubSarifArgs};
use crate::exit;
use crate::github::{self, Api, CommentOutcome, CommentRequest, Repo, Retry};
use crate::sys::safe_fs::{self, Dir, Parents};
use crate::text;

/// The largest `summary.md` read (vetto writes at most 1 MiB).
const MAX_SUMMARY: u64 = 2 * 1024 * 1024;
/// The largest SARIF file read (GitHub takes 10 MB compressed).
const MAX_SARIF: u64 = 256 * 1024 * 1024;
/// The largest event payload read (`$GITHUB_EVENT_PATH`).
const MAX_EVENT: u64 = 64 * 1024 * 1024;
/// The author of comments made with Actions' own `GITHUB_TOKEN`.
const ACTIONS_BOT: &str = "github-actions[bot]";

/// Why a command failed, which decides its exit status.
enum Failure {
    Usage(anyhow::Error),
    Api(github::GithubError),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Usage(e)
    }
}

impl From<github::GithubError> for Failure {
    fn from(e: github::GithubError) -> Self {
        Failure::Api(e)
    }
}

pub fn github(cmd: GithubCommand) -> anyhow::Result<ExitCode> {
    let env = Env::from_process();
    let result = match cmd {
        GithubCommand::Comment(args) => comment(&args, &env),
        GithubCommand::UploadSarif(args) => upload_sarif(&args, &env),
    };
    Ok(match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(e)) => {
            eprintln!("vetto: error: {}", text::escape_lines(&format!("{e:#}")));
            ExitCode::from(exit::USAGE)
        }
        Err(Failure::Api(e)) => {
            eprintln!(
                "vetto: error: {}",
                text::escape_lines(&crate::report::error_chain(&e))
            );
            ExitCode::from(exit::GITHUB)
        }
    })
}

fn comment(args: &GithubCommentArgs, env: &Env) -> Result<(), Failure> {
    let repo = repo(&args.api, env)?;
    let pr = match args.pr {
        Some(n) => n,
        None => pull_request(env)?,
    };
    let summary = read_summary(&args.report_dir)?;
    let author = match args.author.as_deref() {
        Some("*") => None,
        Some(login) => Some(login.to_owned()),
        None if env.get("GITHUB_ACTIONS") == Some("true") => Some(ACTIONS_BOT.to_owned()),
        None => None,
    };
    let api = api(&args.api, env)?;
    let req = CommentRequest {
        repo,
        pr,
        body: github::comment_body(&summary),
        author,
    };
    let (verb, url) = match api.comment(&req)? {
        CommentOutcome::Created { url, .. } => ("created", url),
        CommentOutcome::Updated { url, .. } => ("updated", url),
    };
    println!(
        "vetto: {verb} the comment on pull request #{pr} of {}{}",
        req.repo,
        url.map(|u| format!(": {}", text::escape(&u)))
            .unwrap_or_default()
    );
    Ok(())
}

fn upload_sarif(args: &GithubSarifArgs, env: &Env) -> Result<(), Failure> {
    let repo = repo(&args.api, env)?;
    let sha = args
        .sha
        .clone()
        .or_else(|| env.get("GITHUB_SHA").map(str::to_owned))
        .ok_or_else(|| anyhow!("no commit: pass --sha SHA (GitHub Actions sets GITHUB_SHA)"))?;
    let git_ref = args
        .git_ref
        .clone()
        .or_else(|| env.get("GITHUB_REF").map(str::to_owned))
        .ok_or_else(|| {
            anyhow!("no git ref: pass --ref refs/heads/BRANCH (GitHub Actions sets GITHUB_REF)")
        })?;
    let sarif = read_in_dir(&args.file, MAX_SARIF)?;
    let upload = github::prepare_sarif(
        &sarif,
        &sha,
        &git_ref,
        args.category.as_deref(),
        &args.tool_name,
    )
    .with_context(|| format!("cannot upload {}", text::escape_path(&args.file)))?;
    let api = api(&args.api, env)?;
    let receipt = api.upload_sarif(&repo, &upload)?;
    println!(
        "vetto: uploaded {} to code scanning of {repo} at {} ({})",
        text::escape_path(&args.file),
        upload.commit_sha,
        text::escape(&upload.git_ref)
    );
    if let Some(id) = &receipt.id {
        println!("  id: {}", text::escape(id));
    }
    if let Some(url) = &receipt.url {
        println!("  status: {}", text::escape(url));
    }
    Ok(())
}

/// The variables `vetto github` reads (a snapshot, so tests can pass one).
struct Env(Vec<(String, String)>);

impl Env {
    fn from_process() -> Env {
        Env(std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect())
    }

    /// A variable that is set and not empty.
    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }
}

fn repo(args: &GithubApiArgs, env: &Env) -> anyhow::Result<Repo> {
    let named = args
        .repo
        .as_deref()
        .or_else(|| env.get("GITHUB_REPOSITORY"))
        .ok_or_else(|| {
            anyhow!("no repository: pass --repo OWNER/NAME (GitHub Actions sets GITHUB_REPOSITORY)")
        })?;
    named.parse().map_err(|e: String| anyhow!(e))
}

fn api(args: &GithubApiArgs, env: &Env) -> anyhow::Result<Api> {
    let url = args
        .api_url
        .as_deref()
        .or_else(|| env.get("GITHUB_API_URL"))
        .unwrap_or("https://api.github.com");
    Ok(Api {
        url: api_url(url)?,
        token: token(env)?,
        retry: Retry {
            attempts: args.attempts.max(1),
            base: Duration::from_millis(args.retry_delay_ms),
            ..Retry::default()
        },
    })
}

/// `https://…`, or `http://` to this machine only: the token travels in
/// the request's headers.
fn api_url(url: &str) -> anyhow::Result<String> {
    let uri: http::Uri = url
        .parse()
        .with_context(|| format!("`{}` is not a URL (--api-url)", text::name(url)))?;
    let host = uri.host().unwrap_or_default();
    let loopback = matches!(host, "localhost" | "127.0.0.1" | "[::1]" | "::1");
    match uri.scheme_str() {
        Some("https") if !host.is_empty() => {}
        Some("http") if loopback => {}
        Some("http") => bail!(
            "refusing to send the token in the clear to {}: the API URL must be https:// (plain http only to this machine)",
            text::name(host)
        ),
        _ => bail!("`{}` is not an http(s) URL (--api-url)", text::name(url)),
    }
    if uri.query().is_some() {
        bail!("the API URL must not have a query (--api-url)");
    }
    Ok(url.trim_end_matches('/').to_owned())
}

/// `GITHUB_TOKEN`, else `GH_TOKEN`. Only its name is ever printed.
fn token(env: &Env) -> anyhow::Result<SecretString> {
    let (name, value) = ["GITHUB_TOKEN", "GH_TOKEN"]
        .into_iter()
        .find_map(|n| env.get(n).map(|v| (n, v)))
        .ok_or_else(|| {
            anyhow!(
                "no token: set GITHUB_TOKEN (in GitHub Actions: `env: GITHUB_TOKEN: ${{{{ github.token }}}}`) or GH_TOKEN"
            )
        })?;
    let value = value.trim();
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_graphic()) {
        bail!("{name} holds characters no token has (spaces, control characters or non-ASCII)");
    }
    Ok(SecretString::from(value.to_owned()))
}

/// The pull request of this workflow run: the event payload's number, or
/// the `refs/pull/N/…` of `GITHUB_REF`.
fn pull_request(env: &Env) -> anyhow::Result<u64> {
    let none = || {
        anyhow!(
            "no pull request: pass --pr N (in GitHub Actions, the `pull_request` event's number is used)"
        )
    };
    if let Some(path) = env.get("GITHUB_EVENT_PATH") {
        let mut bytes = Vec::new();
        safe_fs::open_regular(Path::new(path))
            .map_err(anyhow::Error::from)
            .and_then(|f| Ok(f.take(MAX_EVENT).read_to_end(&mut bytes)?))
            .with_context(|| "cannot read GITHUB_EVENT_PATH".to_string())?;
        let event: serde_json::Value =
            serde_json::from_slice(&bytes).context("GITHUB_EVENT_PATH is not JSON")?;
        let number = event
            .pointer("/pull_request/number")
            .or_else(|| {
                // `issue_comment` on a pull request.
                event
                    .pointer("/issue/pull_request")
                    .and_then(|_| event.pointer("/issue/number"))
            })
            .and_then(serde_json::Value::as_u64);
        if let Some(n) = number {
            return Ok(n);
        }
    }
    env.get("GITHUB_REF")
        .and_then(|r| r.strip_prefix("refs/pull/"))
        .and_then(|r| r.split('/').next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(none)
}

fn read_summary(report_dir: &Path) -> anyhow::Result<String> {
    let bytes = read_in_dir(&report_dir.join("summary.md"), MAX_SUMMARY).with_context(|| {
        format!(
            "no summary to post: run `vetto ci --report-dir {}` first",
            text::escape_path(report_dir)
        )
    })?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// A file in a directory that may hold what a job planted (the report
/// directory in the working tree): the directory walked and checked, the
/// file read without following a link, at most `max` bytes.
fn read_in_dir(path: &Path, max: u64) -> anyhow::Result<Vec<u8>> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| anyhow!("`{}` names no file", text::escape_path(path)))?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok(Dir::open(&parent, Parents::Walk)?.read_file(name, max)?)
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        Env(pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect())
    }

    #[test]
    fn the_token_is_sent_only_over_https_or_to_this_machine() {
        assert_eq!(
            api_url("https://api.github.com/").unwrap(),
            "https://api.github.com"
        );
        assert!(api_url("https://ghe.example/api/v3").is_ok());
        assert!(api_url("http://127.0.0.1:8080").is_ok());
        assert!(api_url("http://[::1]:8080").is_ok());
        let e = api_url("http://api.github.com").unwrap_err();
        assert!(format!("{e}").contains("in the clear"), "{e}");
        assert!(api_url("ftp://x").is_err());
        assert!(api_url("https://x/?a=b").is_err());
    }

    #[test]
    fn the_pull_request_comes_from_the_event_or_the_ref() {
        let tmp = tempfile::tempdir().unwrap();
        let ev = tmp.path().join("event.json");
        std::fs::write(&ev, r#"{"pull_request":{"number":42}}"#).unwrap();
        let path = ev.to_str().unwrap();
        assert_eq!(
            pull_request(&env(&[("GITHUB_EVENT_PATH", path)])).unwrap(),
            42
        );
        std::fs::write(&ev, r#"{"issue":{"number":9,"pull_request":{}}}"#).unwrap();
        assert_eq!(
            pull_request(&env(&[("GITHUB_EVENT_PATH", path)])).unwrap(),
            9
        );
        std::fs::write(&ev, r#"{"push":{}}"#).unwrap();
        let e = env(&[
            ("GITHUB_EVENT_PATH", path),
            ("GITHUB_REF", "refs/pull/17/merge"),
        ]);
        assert_eq!(pull_request(&e).unwrap(), 17);
        assert!(pull_request(&env(&[("GITHUB_REF", "refs/heads/main")])).is_err());
    }

    #[test]
    fn a_token_is_read_but_never_quoted() {
        let e = env(&[("GH_TOKEN", "ghp_second"), ("GITHUB_TOKEN", "")]);
        assert!(token(&e).is_ok());
        let e = env(&[("GITHUB_TOKEN", "ghp_CANARY with space")]);
        let msg = format!("{:#}", token(&e).unwrap_err());
        assert!(
            msg.contains("GITHUB_TOKEN") && !msg.contains("CANARY"),
            "{msg}"
        );
        assert!(token(&env(&[])).is_err());
    }
}
