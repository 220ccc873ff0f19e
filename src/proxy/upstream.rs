//! vetto's own upstream proxy (a corporate `HTTPS_PROXY`), parsed from the
//! URL in vetto's environment. Connections to names are chained through it
//! with `CONNECT`.

use std::fmt;

/// `http://[user:pass@]host:port` — the proxy vetto itself must use.
#[derive(Clone, PartialEq, Eq)]
pub struct Upstream {
    pub host: String,
    pub port: u16,
    /// `Basic …` for `Proxy-Authorization`, when the URL had credentials.
    pub authorization: Option<String>,
}

impl fmt::Debug for Upstream {
    // The credentials are not for logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upstream")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("authorization", &self.authorization.as_ref().map(|_| "…"))
            .finish()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the upstream proxy `{0}` is not http://[USER:PASS@]HOST[:PORT] (https:// and socks upstreams are not supported)"
)]
pub struct UpstreamParseError(pub String);

impl Upstream {
    /// Parse a proxy URL as found in `HTTPS_PROXY`. A bare `host:port`
    /// means `http://`. The port defaults to 80... as curl's does: 1080 is
    /// SOCKS, so an HTTP proxy without a port uses 80.
    pub fn parse(url: &str) -> Result<Upstream, UpstreamParseError> {
        let bad = || UpstreamParseError(redact(url));
        let rest = match url.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
            Some(_) => return Err(bad()),
            None => url,
        };
        let authority = rest.split('/').next().unwrap_or("");
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let (host, port) = super::wire::split_host_port(hostport).ok_or_else(bad)?;
        let port = port.unwrap_or(80);
        if host.is_empty() || port == 0 {
            return Err(bad());
        }
        let authorization = userinfo.map(|u| {
            let decoded = percent_decode(u);
            format!("Basic {}", super::wire::base64(&decoded))
        });
        Ok(Upstream {
            host: host.to_string(),
            port,
            authorization,
        })
    }

    /// The first of `HTTPS_PROXY`, `https_proxy`, `HTTP_PROXY`,
    /// `http_proxy` that is set and not empty, from `get` (the environment).
    pub fn from_env(
        get: impl Fn(&str) -> Option<String>,
    ) -> Option<Result<Upstream, UpstreamParseError>> {
        ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"]
            .iter()
            .find_map(|k| get(k).filter(|v| !v.trim().is_empty()))
            .map(|v| Upstream::parse(v.trim()))
    }
}

/// Open a tunnel to `name:port` through the upstream proxy (`CONNECT`),
/// reading its response head bounded by the proxy's header limit.
pub(crate) async fn connect(
    shared: &super::Shared,
    up: &Upstream,
    name: &str,
    port: u16,
) -> std::io::Result<tokio::net::TcpStream> {
    use std::io::{Error, ErrorKind};
    use tokio::io::AsyncWriteExt;
    let limits = &shared.limits;
    let mut s = tokio::time::timeout(
        limits.connect_timeout,
        tokio::net::TcpStream::connect((up.host.as_str(), up.port)),
    )
    .await
    .map_err(|_| Error::new(ErrorKind::TimedOut, "connect timed out"))??;
    let _ = s.set_nodelay(true);
    let mut req = format!("CONNECT {name}:{port} HTTP/1.1\r\nHost: {name}:{port}\r\n");
    if let Some(auth) = &up.authorization {
        req.push_str(&format!("Proxy-Authorization: {auth}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await?;
    // Read byte by byte up to the blank line, so nothing of the tunnel is
    // consumed; the head is small and this happens once per connection.
    let mut head = Vec::new();
    while super::wire::head_end(&head).is_none() {
        if head.len() >= limits.max_header_bytes {
            return Err(Error::other("upstream response head too large"));
        }
        let mut byte = [0u8; 1];
        let n = tokio::time::timeout(
            limits.idle_timeout,
            tokio::io::AsyncReadExt::read(&mut s, &mut byte),
        )
        .await
        .map_err(|_| Error::new(ErrorKind::TimedOut, "upstream idle"))??;
        if n == 0 {
            return Err(Error::other("upstream closed during CONNECT"));
        }
        head.push(byte[0]);
    }
    let status = head
        .split(|&b| b == b' ')
        .nth(1)
        .and_then(|c| std::str::from_utf8(c).ok())
        .and_then(|c| c.parse::<u16>().ok());
    match status {
        Some(200..=299) => Ok(s),
        Some(code) => Err(Error::other(format!("upstream answered {code} to CONNECT"))),
        None => Err(Error::other("upstream answered with no status")),
    }
}

fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// The URL without its userinfo, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}…@{}", &url[..s + 3], &url[at + 1..]),
        (None, Some(at)) => format!("…@{}", &url[at + 1..]),
        _ => url.to_string(),
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn parses_proxy_urls_and_hides_credentials() {
        let u = Upstream::parse("http://alice:p%40ss@proxy.corp:3128/").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("proxy.corp", 3128));
        assert_eq!(
            u.authorization.as_deref(),
            Some(format!("Basic {}", crate::proxy::wire::base64(b"alice:p@ss")).as_str())
        );
        assert!(!format!("{u:?}").contains("alice"));
        assert_eq!(Upstream::parse("proxy:8080").unwrap().port, 8080);
        assert_eq!(Upstream::parse("http://[::1]:8080").unwrap().host, "::1");
        assert_eq!(Upstream::parse("http://proxy").unwrap().port, 80);
        let e = Upstream::parse("socks5://bob:secret@proxy:1080").unwrap_err();
        assert!(!e.to_string().contains("secret"), "{e}");
        assert!(Upstream::parse("http://:8080").is_err());
        assert!(Upstream::parse("http://proxy:notaport").is_err());
    }

    #[test]
    fn from_env_prefers_https_proxy() {
        let env = |k: &str| match k {
            "HTTPS_PROXY" => Some("http://a:1".to_string()),
            "HTTP_PROXY" => Some("http://b:2".to_string()),
            _ => None,
        };
        assert_eq!(Upstream::from_env(env).unwrap().unwrap().host, "a");
        assert!(Upstream::from_env(|_| None).is_none());
    }
}
