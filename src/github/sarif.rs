//! `POST /repos/{owner}/{repo}/code-scanning/sarifs`: the SARIF checked,
//! its category set, gzip-compressed and base64-encoded, as the API asks.

use std::io::Write;

use base64::Engine;

use super::client::{Client, Method, Request};
use super::{GithubError, Operation, Repo, SarifReceipt};

/// GitHub refuses an upload whose gzip-compressed SARIF exceeds 10 MB.
pub const MAX_GZIPPED: usize = 10 * 1024 * 1024;

/// The request body, ready to send.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SarifUpload {
    pub commit_sha: String,
    #[serde(rename = "ref")]
    pub git_ref: String,
    /// gzip, then base64.
    pub sarif: String,
    pub tool_name: String,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SarifError {
    #[error("the SARIF file is not JSON")]
    NotJson(#[source] serde_json::Error),
    #[error("the file is not SARIF 2.1.0: {0}")]
    NotSarif(&'static str),
    #[error(
        "`{0}` is not a commit SHA: expected 40 (or 64) hexadecimal digits; pass --sha or set GITHUB_SHA"
    )]
    BadSha(String),
    #[error(
        "`{0}` is not a full git ref: expected refs/heads/BRANCH, refs/tags/TAG or refs/pull/N/merge; pass --ref or set GITHUB_REF"
    )]
    BadRef(String),
    #[error(
        "`{0}` is not a category: use letters, digits and `-_./:` (at most 200), e.g. vetto/tests"
    )]
    BadCategory(String),
    #[error(
        "the SARIF is {size} bytes compressed, more than the {max} GitHub accepts; upload fewer results"
    )]
    TooLarge { size: usize, max: usize },
    #[error("cannot compress the SARIF")]
    Gzip(#[source] std::io::Error),
}

/// Check `sarif`, set its category, and encode it for upload at
/// `commit_sha` on `git_ref`.
///
/// The REST API has no category field: code scanning reads it from each
/// run's `automationDetails.id` (everything up to its last `/`). Given a
/// `category`, every run's id becomes `CATEGORY/`, replacing what the file
/// says (vetto's own SARIF says `vetto/<job>/`); without one, the file's
/// bytes are uploaded exactly as they are.
pub fn prepare(
    sarif: &[u8],
    commit_sha: &str,
    git_ref: &str,
    category: Option<&str>,
    tool_name: &str,
) -> Result<SarifUpload, SarifError> {
    let sha = commit_sha.trim().to_ascii_lowercase();
    if !matches!(sha.len(), 40 | 64) || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(SarifError::BadSha(crate::text::name(commit_sha)));
    }
    let git_ref = git_ref.trim();
    let ref_ok = git_ref.strip_prefix("refs/").is_some_and(|rest| {
        !rest.is_empty() && git_ref.len() <= 1024 && git_ref.chars().all(|c| c.is_ascii_graphic())
    });
    if !ref_ok {
        return Err(SarifError::BadRef(crate::text::name(git_ref)));
    }
    let mut doc: serde_json::Value = serde_json::from_slice(sarif).map_err(SarifError::NotJson)?;
    if doc.get("version").and_then(|v| v.as_str()) != Some("2.1.0") {
        return Err(SarifError::NotSarif("`version` is not \"2.1.0\""));
    }
    let runs = doc
        .get_mut("runs")
        .and_then(|r| r.as_array_mut())
        .ok_or(SarifError::NotSarif("no `runs` array"))?;
    let bytes = match category {
        None => sarif.to_vec(),
        Some(cat) => {
            let ok = !cat.is_empty()
                && cat.len() <= 200
                && cat
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:".contains(c));
            if !ok {
                return Err(SarifError::BadCategory(crate::text::name(cat)));
            }
            let id = if cat.ends_with('/') {
                cat.to_owned()
            } else {
                format!("{cat}/")
            };
            for run in runs.iter_mut() {
                let run = run
                    .as_object_mut()
                    .ok_or(SarifError::NotSarif("a run is not an object"))?;
                run.insert(
                    "automationDetails".into(),
                    serde_json::json!({ "id": id.as_str() }),
                );
            }
            serde_json::to_vec(&doc).map_err(SarifError::NotJson)?
        }
    };
    Ok(SarifUpload {
        commit_sha: sha,
        git_ref: git_ref.to_owned(),
        sarif: gzip_base64(&bytes, MAX_GZIPPED)?,
        tool_name: tool_name.to_owned(),
    })
}

/// gzip, refused over `max` compressed bytes, then base64.
fn gzip_base64(bytes: &[u8], max: usize) -> Result<String, SarifError> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(bytes).map_err(SarifError::Gzip)?;
    let gzipped = gz.finish().map_err(SarifError::Gzip)?;
    if gzipped.len() > max {
        return Err(SarifError::TooLarge {
            size: gzipped.len(),
            max,
        });
    }
    Ok(base64::engine::general_purpose::STANDARD.encode(gzipped))
}

pub(super) async fn upload(
    c: &Client<'_>,
    repo: &Repo,
    upload: &SarifUpload,
) -> Result<SarifReceipt, GithubError> {
    let payload = serde_json::to_value(upload).map_err(|source| GithubError::Response {
        what: "the upload".into(),
        source,
    })?;
    let reply = c
        .send(&Request {
            op: Operation::UploadSarif,
            method: Method::Post,
            path: format!("/repos/{repo}/code-scanning/sarifs"),
            body: Some(&payload),
            what: format!(
                "repository {repo} (or code scanning is not available for it: a private repository needs GitHub Advanced Security)"
            ),
        })
        .await?;
    serde_json::from_slice(&reply.body).map_err(|source| GithubError::Response {
        what: "the upload".into(),
        source,
    })
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use std::io::Read;

    use super::*;

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";
    const SARIF: &str = r#"{"version":"2.1.0","runs":[{"tool":{"driver":{"name":"vetto"}},"results":[],"automationDetails":{"id":"vetto/job/"}}]}"#;

    fn decode(upload: &SarifUpload) -> Vec<u8> {
        let gz = base64::engine::general_purpose::STANDARD
            .decode(&upload.sarif)
            .unwrap();
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    #[test]
    fn without_a_category_the_files_bytes_are_uploaded_as_they_are() {
        let u = prepare(SARIF.as_bytes(), SHA, "refs/heads/main", None, "vetto").unwrap();
        assert_eq!(decode(&u), SARIF.as_bytes());
        assert_eq!(u.commit_sha, SHA);
        let json = serde_json::to_value(&u).unwrap();
        assert_eq!(json["ref"], "refs/heads/main");
        assert_eq!(json["tool_name"], "vetto");
    }

    #[test]
    fn a_category_becomes_every_runs_automation_id() {
        let two = SARIF.replace("}]}", "},{\"tool\":{\"driver\":{\"name\":\"x\"}}}]}");
        let u = prepare(
            two.as_bytes(),
            SHA,
            "refs/pull/7/merge",
            Some("vetto/unit"),
            "vetto",
        )
        .unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&decode(&u)).unwrap();
        for run in doc["runs"].as_array().unwrap() {
            assert_eq!(run["automationDetails"]["id"], "vetto/unit/");
        }
    }

    #[test]
    fn what_is_not_sarif_or_not_a_commit_is_refused() {
        let bad = |sarif: &str, sha: &str, r: &str, cat: Option<&str>| {
            prepare(sarif.as_bytes(), sha, r, cat, "vetto").unwrap_err()
        };
        assert!(matches!(
            bad("not json", SHA, "refs/heads/m", None),
            SarifError::NotJson(_)
        ));
        assert!(matches!(
            bad(
                r#"{"version":"2.0.0","runs":[]}"#,
                SHA,
                "refs/heads/m",
                None
            ),
            SarifError::NotSarif(_)
        ));
        assert!(matches!(
            bad(r#"{"version":"2.1.0"}"#, SHA, "refs/heads/m", None),
            SarifError::NotSarif(_)
        ));
        assert!(matches!(
            bad(SARIF, "abc", "refs/heads/m", None),
            SarifError::BadSha(_)
        ));
        assert!(matches!(
            bad(SARIF, SHA, "main", None),
            SarifError::BadRef(_)
        ));
        assert!(matches!(
            bad(SARIF, SHA, "refs/heads/a b", None),
            SarifError::BadRef(_)
        ));
        assert!(matches!(
            bad(SARIF, SHA, "refs/heads/m", Some("a b")),
            SarifError::BadCategory(_)
        ));
    }

    #[test]
    fn a_sarif_over_githubs_compressed_limit_is_refused() {
        let text = SARIF.repeat(4);
        assert!(gzip_base64(text.as_bytes(), 4096).is_ok());
        let e = gzip_base64(text.as_bytes(), 64).unwrap_err();
        assert!(matches!(e, SarifError::TooLarge { max: 64, .. }), "{e}");
    }
}
