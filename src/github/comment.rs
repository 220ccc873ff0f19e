//! The one pull-request comment vetto keeps: found again by [`MARKER`]
//! on the pull request's (issue) comments, page by page, then updated; or
//! created when there is none.

use super::client::{Client, Method, Reply, Request};
use super::{CommentRequest, GithubError, Operation};

/// The hidden first line of vetto's comment, by which it is found again.
pub const MARKER: &str = "<!-- vetto:report -->";
/// GitHub refuses a comment body over 65536 characters.
pub const MAX_BODY_CHARS: usize = 65536;
const PER_PAGE: usize = 100;
/// 10 000 comments: past this, something else is going on.
const MAX_PAGES: usize = 100;
const CUT_NOTE: &str = "\n\n---\n*vetto: the summary was cut here to fit GitHub's comment limit; the full report is `report.html` in the job's report directory (the workflow's artifact).*\n";

/// What `vetto github comment` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommentOutcome {
    Created { id: u64, url: Option<String> },
    Updated { id: u64, url: Option<String> },
}

/// The comment body for `summary` (a `summary.md`): the marker, then the
/// summary, cut at a line under GitHub's limit with a note saying so.
pub fn body(summary: &str) -> String {
    let head = format!("{MARKER}\n");
    let summary = summary.trim_end();
    let total = head.chars().count() + summary.chars().count() + 1;
    if total <= MAX_BODY_CHARS {
        return format!("{head}{summary}\n");
    }
    let budget = MAX_BODY_CHARS - head.chars().count() - CUT_NOTE.chars().count();
    let cut = summary
        .char_indices()
        .nth(budget)
        .map_or(summary.len(), |(at, _)| at);
    let kept = &summary[..cut];
    // Whole lines only: a cut table row or code span would garble the rest.
    let kept = kept.rfind('\n').map_or(kept, |at| &kept[..at]);
    format!("{head}{kept}{CUT_NOTE}")
}

#[derive(serde::Deserialize)]
struct Comment {
    id: u64,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    user: Option<User>,
    #[serde(default)]
    html_url: Option<String>,
}

#[derive(serde::Deserialize)]
struct User {
    login: String,
}

pub(super) async fn upsert(
    c: &Client<'_>,
    req: &CommentRequest,
) -> Result<CommentOutcome, GithubError> {
    let repo = &req.repo;
    let what = format!("pull request #{} in {repo}", req.pr);
    let payload = serde_json::json!({ "body": req.body });
    let (method, path, verb) = match find(c, req, &what).await? {
        Some(id) => (
            Method::Patch,
            format!("/repos/{repo}/issues/comments/{id}"),
            "update the comment",
        ),
        None => (
            Method::Post,
            format!("/repos/{repo}/issues/{}/comments", req.pr),
            "create the comment",
        ),
    };
    let reply = c
        .send(&Request {
            op: Operation::Comment,
            method,
            path,
            body: Some(&payload),
            what: what.clone(),
        })
        .await?;
    let made: Comment = parse(&reply, verb)?;
    Ok(match method {
        Method::Patch => CommentOutcome::Updated {
            id: made.id,
            url: made.html_url,
        },
        _ => CommentOutcome::Created {
            id: made.id,
            url: made.html_url,
        },
    })
}

/// The first comment that starts with the marker (by `req.author`, when
/// given), looking through every page.
async fn find(
    c: &Client<'_>,
    req: &CommentRequest,
    what: &str,
) -> Result<Option<u64>, GithubError> {
    for page in 1..=MAX_PAGES {
        let reply = c
            .send(&Request {
                op: Operation::Comment,
                method: Method::Get,
                path: format!(
                    "/repos/{}/issues/{}/comments?per_page={PER_PAGE}&page={page}",
                    req.repo, req.pr
                ),
                body: None,
                what: what.to_owned(),
            })
            .await?;
        let comments: Vec<Comment> = parse(&reply, "list the comments")?;
        let ours = comments.iter().find(|k| {
            k.body.as_deref().is_some_and(|b| b.starts_with(MARKER))
                && req.author.as_deref().is_none_or(|a| {
                    k.user
                        .as_ref()
                        .is_some_and(|u| u.login.eq_ignore_ascii_case(a))
                })
        });
        if let Some(k) = ours {
            return Ok(Some(k.id));
        }
        if !has_next(&reply, comments.len()) {
            return Ok(None);
        }
    }
    Err(GithubError::TooManyComments {
        max: PER_PAGE * MAX_PAGES,
    })
}

/// Another page follows: the `Link` header says `rel="next"`, or, without
/// a `Link` header, this page was full.
fn has_next(reply: &Reply, len: usize) -> bool {
    match reply.headers.get("link").and_then(|v| v.to_str().ok()) {
        Some(link) => link
            .split(',')
            .any(|part| part.split(';').skip(1).any(|p| p.trim() == "rel=\"next\"")),
        None => len >= PER_PAGE,
    }
}

fn parse<T: serde::de::DeserializeOwned>(reply: &Reply, what: &str) -> Result<T, GithubError> {
    serde_json::from_slice(&reply.body).map_err(|source| GithubError::Response {
        what: what.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_starts_with_the_marker() {
        let b = body("### vetto: clean\n\n| a | b |\n");
        assert_eq!(b, format!("{MARKER}\n### vetto: clean\n\n| a | b |\n"));
    }

    #[test]
    fn a_long_summary_is_cut_at_a_line_under_githubs_limit() {
        // Multi-byte characters: GitHub counts characters, not bytes.
        let line = format!("| `{}` |\n", "é".repeat(97));
        let summary = line.repeat(2000);
        let b = body(&summary);
        assert!(b.chars().count() <= MAX_BODY_CHARS, "{}", b.chars().count());
        assert!(b.starts_with(MARKER));
        assert!(b.ends_with(CUT_NOTE));
        let kept = &b[MARKER.len() + 1..b.len() - CUT_NOTE.len()];
        assert!(kept.lines().all(|l| l == line.trim_end()), "a line was cut");
        assert!(kept.lines().count() > 600);
    }
}
