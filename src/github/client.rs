//! One request to the API, with the retries and the errors that name what
//! to fix. Paths are relative (`/repos/…`): octocrab joins them to the base
//! URI and sends the token only there.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::HeaderMap;
use http_body_util::BodyExt;
use octocrab::Octocrab;
use octocrab::secrecy::ExposeSecret;

use super::{Api, GithubError, Operation};

/// The largest answer read (a page of 100 comments of 64 Ki characters
/// each, with room for the JSON around them).
pub(super) const MAX_RESPONSE: usize = 32 * 1024 * 1024;
/// GitHub's own advice when a secondary rate limit says nothing else.
const SECONDARY_WAIT: Duration = Duration::from_secs(60);
/// The most of GitHub's `message` an error quotes.
const MESSAGE_CHARS: usize = 300;

#[derive(Debug, Clone, Copy)]
pub(super) enum Method {
    Get,
    Post,
    Patch,
}

/// A request: what it is for (the 403 and 404 texts) and where it goes.
pub(super) struct Request<'a> {
    pub op: Operation,
    pub method: Method,
    pub path: String,
    pub body: Option<&'a serde_json::Value>,
    /// What a 404 did not find (`pull request #7 in o/r`).
    pub what: String,
}

/// A successful answer.
#[derive(Debug)]
pub(super) struct Reply {
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

pub(super) struct Client<'a> {
    api: &'a Api,
    octo: Octocrab,
}

impl<'a> Client<'a> {
    pub fn new(api: &'a Api) -> Result<Self, GithubError> {
        let client_err = |source| GithubError::Client {
            api_url: api.url.clone(),
            source,
        };
        let octo = Octocrab::builder()
            .base_uri(api.url.as_str())
            .map_err(client_err)?
            .personal_token(api.token.expose_secret().to_owned())
            .add_header(http::header::ACCEPT, "application/vnd.github+json".into())
            .add_header(
                http::header::USER_AGENT,
                concat!("vetto/", env!("CARGO_PKG_VERSION")).into(),
            )
            // Hang guards; a healthy API answers in well under these.
            .set_connect_timeout(Some(Duration::from_secs(30)))
            .set_read_timeout(Some(Duration::from_secs(120)))
            .set_write_timeout(Some(Duration::from_secs(120)))
            .build()
            .map_err(client_err)?;
        Ok(Client { api, octo })
    }

    /// Send `req`, retrying as [`super::Retry`] says.
    pub async fn send(&self, req: &Request<'_>) -> Result<Reply, GithubError> {
        let retry = self.api.retry;
        let attempts = retry.attempts.max(1);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (wait, why) = match self.once(req).await? {
                Err(source) if attempt >= attempts => {
                    return Err(GithubError::Transport {
                        api_url: self.api.url.clone(),
                        attempts: attempt,
                        source,
                    });
                }
                Err(e) => (
                    retry.backoff(attempt),
                    format!("the request failed ({})", crate::report::error_chain(&e)),
                ),
                Ok((status, headers, body)) => match classify(status, &headers, &body, now()) {
                    Class::Success => return Ok(Reply { headers, body }),
                    Class::Final => return Err(final_error(req, status, &body)),
                    Class::Again { wait, why } => {
                        let wait = wait.unwrap_or_else(|| retry.backoff(attempt));
                        if wait > retry.max_wait {
                            return Err(GithubError::WaitTooLong {
                                wait,
                                max_wait: retry.max_wait,
                            });
                        }
                        if attempt >= attempts {
                            return Err(GithubError::GaveUp {
                                status,
                                attempts: attempt,
                                message: message(&body),
                            });
                        }
                        (wait, why)
                    }
                },
            };
            eprintln!(
                "vetto: github: {}; retrying in {} (attempt {} of {attempts})",
                crate::text::escape(&why),
                show_wait(wait),
                attempt + 1,
            );
            tokio::time::sleep(wait).await;
        }
    }

    /// One try: the answer, or the transport's failure (the inner error,
    /// retried; the outer one ends the call).
    async fn once(
        &self,
        req: &Request<'_>,
    ) -> Result<Result<(u16, HeaderMap, Vec<u8>), octocrab::Error>, GithubError> {
        let path = req.path.as_str();
        let sent = match req.method {
            Method::Get => self.octo._get(path).await,
            Method::Post => self.octo._post(path, req.body).await,
            Method::Patch => self.octo._patch(path, req.body).await,
        };
        let resp = match sent {
            Ok(resp) => resp,
            Err(e) => return Ok(Err(e)),
        };
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let mut body = resp.into_body();
        let mut bytes = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = match frame {
                Ok(frame) => frame,
                Err(e) => return Ok(Err(e)),
            };
            if let Ok(data) = frame.into_data() {
                if bytes.len() + data.len() > MAX_RESPONSE {
                    return Err(GithubError::TooLarge {
                        what: req.what.clone(),
                        max: MAX_RESPONSE,
                    });
                }
                bytes.extend_from_slice(&data);
            }
        }
        Ok(Ok((status, headers, bytes)))
    }
}

/// What an answer means for the caller.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Class {
    Success,
    /// Try again, after `wait` when GitHub said how long.
    Again {
        wait: Option<Duration>,
        why: String,
    },
    /// An answer that another try would not change.
    Final,
}

/// Sort an answer. `now` is the Unix time, for `x-ratelimit-reset`.
pub(super) fn classify(status: u16, headers: &HeaderMap, body: &[u8], now: u64) -> Class {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let retry_after = header("retry-after")
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_secs);
    match status {
        200..=299 => Class::Success,
        403 | 429 => {
            if let Some(wait) = retry_after {
                return Class::Again {
                    wait: Some(wait),
                    why: format!("rate limited ({status}, retry-after {}s)", wait.as_secs()),
                };
            }
            if header("x-ratelimit-remaining") == Some("0") {
                let wait = header("x-ratelimit-reset")
                    .and_then(|v| v.parse::<u64>().ok())
                    .map(|reset| Duration::from_secs(reset.saturating_sub(now).max(1)));
                return Class::Again {
                    wait,
                    why: format!("rate limit used up ({status}, x-ratelimit-remaining: 0)"),
                };
            }
            if status == 429 {
                return Class::Again {
                    wait: None,
                    why: "rate limited (429)".into(),
                };
            }
            if message(body).to_ascii_lowercase().contains("rate limit") {
                return Class::Again {
                    wait: Some(SECONDARY_WAIT),
                    why: "secondary rate limit (403)".into(),
                };
            }
            Class::Final
        }
        500..=599 => Class::Again {
            wait: retry_after,
            why: format!("GitHub answered {status}"),
        },
        _ => Class::Final,
    }
}

fn final_error(req: &Request<'_>, status: u16, body: &[u8]) -> GithubError {
    let message = message(body);
    match status {
        401 => GithubError::BadToken { message },
        403 => GithubError::Forbidden {
            message,
            permission: req.op.permission(),
        },
        404 => GithubError::NotFound {
            what: req.what.clone(),
            message,
        },
        _ => GithubError::Status { status, message },
    }
}

/// GitHub's `message` (and the first error's), clipped; the caller's
/// printing escapes it.
pub(super) fn message(body: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct Answer {
        message: Option<String>,
        #[serde(default)]
        errors: Vec<serde_json::Value>,
    }
    let text = match serde_json::from_slice::<Answer>(body) {
        Ok(a) => {
            let first = a.errors.first().map(|e| match e {
                serde_json::Value::String(s) => s.clone(),
                other => other
                    .get("message")
                    .and_then(|m| m.as_str())
                    .map_or_else(|| other.to_string(), str::to_owned),
            });
            match (a.message, first) {
                (Some(m), Some(f)) => format!("{m}: {f}"),
                (Some(m), None) => m,
                (None, Some(f)) => f,
                (None, None) => "no message".into(),
            }
        }
        Err(_) if body.is_empty() => "no message".into(),
        Err(_) => String::from_utf8_lossy(body).into_owned(),
    };
    crate::text::clip(text.trim(), MESSAGE_CHARS).into_owned()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn show_wait(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn server_errors_are_retried_with_backoff() {
        for s in [500, 502, 503, 504] {
            assert_eq!(
                classify(s, &HeaderMap::new(), b"", 0),
                Class::Again {
                    wait: None,
                    why: format!("GitHub answered {s}")
                }
            );
        }
    }

    #[test]
    fn secondary_rate_limits_wait_what_github_asks() {
        let c = classify(403, &headers(&[("retry-after", "7")]), b"", 0);
        assert!(matches!(c, Class::Again { wait: Some(w), .. } if w == Duration::from_secs(7)));
        let c = classify(
            403,
            &headers(&[
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset", "1030"),
            ]),
            b"",
            1000,
        );
        assert!(matches!(c, Class::Again { wait: Some(w), .. } if w == Duration::from_secs(30)));
        // A reset in the past still waits a moment.
        let c = classify(
            429,
            &headers(&[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "5")]),
            b"",
            1000,
        );
        assert!(matches!(c, Class::Again { wait: Some(w), .. } if w == Duration::from_secs(1)));
        let body =
            br#"{"message":"You have exceeded a secondary rate limit. Please wait a few minutes"}"#;
        let c = classify(403, &HeaderMap::new(), body, 0);
        assert!(matches!(c, Class::Again { wait: Some(w), .. } if w == SECONDARY_WAIT));
    }

    #[test]
    fn permission_and_client_errors_are_final() {
        let forbidden = br#"{"message":"Resource not accessible by integration"}"#;
        for (s, body) in [
            (401, &b""[..]),
            (403, &forbidden[..]),
            (404, b""),
            (422, b""),
        ] {
            assert_eq!(classify(s, &HeaderMap::new(), body, 0), Class::Final, "{s}");
        }
        assert_eq!(classify(201, &HeaderMap::new(), b"", 0), Class::Success);
    }

    #[test]
    fn githubs_message_is_quoted_clipped() {
        assert_eq!(
            message(
                br#"{"message":"Validation Failed","errors":[{"message":"body is too long"}]}"#
            ),
            "Validation Failed: body is too long"
        );
        assert_eq!(message(b""), "no message");
        assert_eq!(
            message(b"<html>bad gateway</html>"),
            "<html>bad gateway</html>"
        );
        let long = format!(r#"{{"message":"{}"}}"#, "x".repeat(1000));
        assert_eq!(message(long.as_bytes()).chars().count(), MESSAGE_CHARS);
    }
}
