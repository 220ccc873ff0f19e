//! The HTTP/1.x request head the explicit proxy reads: parsed strictly (CRLF
//! line ends, token header names, no NUL or bare CR/LF, no obsolete line
//! folding, no conflicting message framing), bounded by the caller's buffer.
//! Only the head is parsed; a body is streamed, never buffered.

use super::wire::split_host_port;

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Head {
    pub method: String,
    pub target: String,
    /// `HTTP/1.0` or `HTTP/1.1`.
    pub version: &'static str,
    pub headers: Vec<(String, String)>,
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Parse `head` (everything up to and including the blank line).
pub(crate) fn parse_head(head: &[u8]) -> Result<Head, &'static str> {
    let text = std::str::from_utf8(head).map_err(|_| "request head is not UTF-8")?;
    let text = text
        .strip_suffix("\r\n\r\n")
        .ok_or("request head does not end in CRLF CRLF")?;
    let mut lines = text.split("\r\n");
    let request_line = lines.next().ok_or("empty request")?;
    if text
        .bytes()
        .any(|b| b == 0 || (b < 0x20 && b != b'\t' && b != b'\r' && b != b'\n') || b == 0x7f)
    {
        return Err("control character in request head");
    }
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("request line is not METHOD SP TARGET SP VERSION");
    };
    if method.is_empty() || !method.bytes().all(is_tchar) {
        return Err("bad method");
    }
    if target.is_empty() || target.bytes().any(|b| b <= b' ') {
        return Err("bad request target");
    }
    let version = match version {
        "HTTP/1.1" => "HTTP/1.1",
        "HTTP/1.0" => "HTTP/1.0",
        _ => return Err("unsupported HTTP version"),
    };
    let mut headers = Vec::new();
    for line in lines {
        if line.contains('\r') || line.contains('\n') {
            return Err("bare CR or LF in request head");
        }
        if line.starts_with([' ', '\t']) {
            return Err("obsolete header line folding");
        }
        let (name, value) = line.split_once(':').ok_or("header line without a colon")?;
        if name.is_empty() || !name.bytes().all(is_tchar) {
            return Err("bad header name");
        }
        headers.push((
            name.to_string(),
            value.trim_matches([' ', '\t']).to_string(),
        ));
    }
    check_framing(&headers)?;
    Ok(Head {
        method: method.to_string(),
        target: target.to_string(),
        version,
        headers,
    })
}

/// A response head, as far as the intercepting proxy reads it.
pub(crate) struct ResponseHead {
    pub status: u16,
    /// Where its body ends; `None`: at the connection's end (no length,
    /// or a transfer coding other than chunked last).
    pub framing: Option<Body>,
}

/// Parse a response head (everything up to and including the blank line).
pub(crate) fn parse_response_head(head: &[u8]) -> Result<ResponseHead, &'static str> {
    let text = std::str::from_utf8(head).map_err(|_| "response head is not UTF-8")?;
    let text = text
        .strip_suffix("\r\n\r\n")
        .ok_or("response head does not end in CRLF CRLF")?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().ok_or("empty response")?;
    let mut parts = status_line.splitn(3, ' ');
    let (Some(version), Some(code)) = (parts.next(), parts.next()) else {
        return Err("status line is not VERSION SP STATUS");
    };
    if !matches!(version, "HTTP/1.1" | "HTTP/1.0") {
        return Err("unsupported HTTP version");
    }
    let status = code
        .parse::<u16>()
        .ok()
        .filter(|s| (100..1000).contains(s) && code.len() == 3)
        .ok_or("bad status code")?;
    let mut length: Option<u64> = None;
    let mut chunked = None;
    for line in lines {
        let (name, value) = line.split_once(':').ok_or("header line without a colon")?;
        let value = value.trim_matches([' ', '\t']);
        if name.eq_ignore_ascii_case("content-length") {
            let n = value.parse::<u64>().map_err(|_| "bad Content-Length")?;
            if length.is_some_and(|l| l != n) {
                return Err("conflicting Content-Length headers");
            }
            length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            let last = value.rsplit(',').next().unwrap_or_default().trim();
            chunked = Some(last.eq_ignore_ascii_case("chunked"));
        }
    }
    // RFC 9112 6.3: a transfer coding overrides the length; one that does
    // not end in chunked runs to the connection's end.
    let framing = match (chunked, length) {
        (Some(true), _) => Some(Body::Chunked(NEW_SIZE)),
        (Some(false), _) => None,
        (None, Some(0)) => Some(Body::Done),
        (None, Some(n)) => Some(Body::Length(n)),
        (None, None) => None,
    };
    Ok(ResponseHead { status, framing })
}

/// Refuse heads whose body length two parsers could read differently.
fn check_framing(headers: &[(String, String)]) -> Result<(), &'static str> {
    let mut length: Option<&str> = None;
    let mut chunked = false;
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("content-length") {
            if value.is_empty() || value.len() > 19 || !value.bytes().all(|b| b.is_ascii_digit()) {
                return Err("bad Content-Length");
            }
            if length.is_some_and(|l| l != value) {
                return Err("conflicting Content-Length headers");
            }
            length = Some(value);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            // The one coding whose end the proxy can find (`Body`); a
            // request with another is refused by servers anyway (RFC 9112
            // 6.3), and two readings of it are how requests are smuggled.
            if !value.eq_ignore_ascii_case("chunked") || chunked {
                return Err("a Transfer-Encoding other than one chunked");
            }
            chunked = true;
        }
    }
    if chunked && length.is_some() {
        return Err("both Content-Length and Transfer-Encoding");
    }
    Ok(())
}

/// Where one request's body ends on the connection, as its head frames
/// it: the proxy forwards one request per plain-HTTP connection (it sends
/// `Connection: close`), so that a second request pipelined behind the
/// first — with another `Host`, to whatever else answers at that server's
/// address — never reaches the server unchecked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Body {
    /// This many bytes still to come.
    Length(u64),
    Chunked(Chunk),
    Done,
}

/// Where a chunked body is (RFC 9112 7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Chunk {
    /// Reading a size line: the size so far, its digits, whether past a
    /// `;` extension, whether its CR was seen.
    Size {
        size: u64,
        digits: u8,
        ext: bool,
        cr: bool,
    },
    /// This many data bytes still to come.
    Data(u64),
    /// The CRLF after the data (`true`: CR seen).
    DataEnd(bool),
    /// The trailer section: bytes of the current line so far, CR seen.
    Trailer { line: usize, cr: bool },
    /// Past the empty line that ends the body.
    End,
}

const NEW_SIZE: Chunk = Chunk::Size {
    size: 0,
    digits: 0,
    ext: false,
    cr: false,
};

/// The body `head` announces.
pub(crate) fn body_of(head: &Head) -> Body {
    if head.header("transfer-encoding").is_some() {
        return Body::Chunked(NEW_SIZE);
    }
    match head.header("content-length").map(str::parse::<u64>) {
        Some(Ok(0)) | None => Body::Done,
        Some(Ok(n)) => Body::Length(n),
        // `check_framing` refused every other value.
        Some(Err(_)) => Body::Done,
    }
}

impl Body {
    /// Of `bytes`, which follow on the connection, how many belong to this
    /// request. Anything past its end, and a chunked body that breaks the
    /// grammar, is not forwarded ([`Body::Done`]).
    pub(crate) fn take(&mut self, bytes: &[u8]) -> usize {
        self.take_to(bytes, false)
    }

    /// [`Body::take`], stopping where a chunked body's trailer section
    /// starts ([`Body::in_trailer`]), so it can be read whole.
    pub(crate) fn take_to_trailer(&mut self, bytes: &[u8]) -> usize {
        self.take_to(bytes, true)
    }

    /// Whether the body is at (or in) its trailer section.
    pub(crate) fn in_trailer(&self) -> bool {
        matches!(self, Body::Chunked(Chunk::Trailer { .. }))
    }

    fn take_to(&mut self, bytes: &[u8], stop_at_trailer: bool) -> usize {
        match self {
            Body::Done => 0,
            Body::Length(left) => {
                let n = (*left).min(bytes.len() as u64);
                *left -= n;
                if *left == 0 {
                    *self = Body::Done;
                }
                n as usize
            }
            Body::Chunked(state) => {
                let mut state = *state;
                let mut used = 0;
                while used < bytes.len()
                    && state != Chunk::End
                    && !(stop_at_trailer && matches!(state, Chunk::Trailer { .. }))
                {
                    let Some((next, n)) = step(state, &bytes[used..]) else {
                        *self = Body::Done;
                        return used;
                    };
                    used += n;
                    state = next;
                }
                *self = if state == Chunk::End {
                    Body::Done
                } else {
                    Body::Chunked(state)
                };
                used
            }
        }
    }

    pub(crate) fn done(&self) -> bool {
        *self == Body::Done
    }
}

/// Most hex digits of a chunk size (a `u64`'s).
const MAX_SIZE_DIGITS: u8 = 16;
/// Longest trailer line (the head's own bound is the caller's buffer).
const MAX_TRAILER_LINE: usize = 8192;

/// One step of a chunked body over `bytes` (not empty): the next state and
/// the bytes it used; `None` where the body breaks the grammar.
fn step(state: Chunk, bytes: &[u8]) -> Option<(Chunk, usize)> {
    let b = bytes[0];
    Some(match state {
        Chunk::Size { cr: true, size, .. } if b == b'\n' => {
            if size == 0 {
                (Chunk::Trailer { line: 0, cr: false }, 1)
            } else {
                (Chunk::Data(size), 1)
            }
        }
        Chunk::Size { cr: true, .. } => return None,
        Chunk::Size {
            size, digits, ext, ..
        } if b == b'\r' && digits > 0 => (
            Chunk::Size {
                size,
                digits,
                ext,
                cr: true,
            },
            1,
        ),
        Chunk::Size {
            size,
            digits,
            ext: true,
            cr,
        } => {
            if b == b'\n' || b == 0 {
                return None;
            }
            (
                Chunk::Size {
                    size,
                    digits,
                    ext: true,
                    cr,
                },
                1,
            )
        }
        Chunk::Size { size, digits, .. } if b == b';' && digits > 0 => (
            Chunk::Size {
                size,
                digits,
                ext: true,
                cr: false,
            },
            1,
        ),
        Chunk::Size { size, digits, .. } => {
            let d = (b as char).to_digit(16)?;
            if digits >= MAX_SIZE_DIGITS {
                return None;
            }
            let size = size.checked_mul(16)?.checked_add(u64::from(d))?;
            (
                Chunk::Size {
                    size,
                    digits: digits + 1,
                    ext: false,
                    cr: false,
                },
                1,
            )
        }
        Chunk::Data(left) => {
            let n = left.min(bytes.len() as u64);
            let next = if n == left {
                Chunk::DataEnd(false)
            } else {
                Chunk::Data(left - n)
            };
            (next, n as usize)
        }
        Chunk::DataEnd(false) if b == b'\r' => (Chunk::DataEnd(true), 1),
        Chunk::DataEnd(true) if b == b'\n' => (NEW_SIZE, 1),
        Chunk::DataEnd(_) | Chunk::End => return None,
        Chunk::Trailer { line, cr: true } if b == b'\n' => {
            if line == 0 {
                // The empty line: its LF is the body's last byte.
                (Chunk::End, 1)
            } else {
                (Chunk::Trailer { line: 0, cr: false }, 1)
            }
        }
        Chunk::Trailer { cr: true, .. } => return None,
        Chunk::Trailer { line, cr: false } if b == b'\r' => (Chunk::Trailer { line, cr: true }, 1),
        Chunk::Trailer { line, .. } => {
            if line >= MAX_TRAILER_LINE || b == b'\n' {
                return None;
            }
            (
                Chunk::Trailer {
                    line: line + 1,
                    cr: false,
                },
                1,
            )
        }
    })
}

impl Head {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether `Proxy-Authorization` is exactly `token` (compared without
    /// an early exit).
    pub(crate) fn has_credential(&self, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("proxy-authorization"))
            .any(|(_, v)| constant_time_eq(v.as_bytes(), token.as_bytes()))
    }
}

pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A `CONNECT host:port` target. The port is required.
pub(crate) fn authority(target: &str) -> Result<(String, u16), &'static str> {
    match split_host_port(target) {
        Some((host, Some(port))) if !host.is_empty() && port != 0 => Ok((host.to_string(), port)),
        _ => Err("CONNECT target is not HOST:PORT"),
    }
}

/// An absolute-form `http://host[:port]/path?query` target: host, port
/// (default 80) and the origin-form path (`/` when empty).
pub(crate) fn absolute(target: &str) -> Result<(String, u16, String), &'static str> {
    let rest = match target.get(..7) {
        Some(scheme) if scheme.eq_ignore_ascii_case("http://") => &target[7..],
        _ => return Err("not an absolute http:// URL (use CONNECT for https)"),
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (auth, path) = rest.split_at(end);
    if auth.contains('@') {
        return Err("userinfo in the request URL");
    }
    let (host, port) = split_host_port(auth).ok_or("bad host in the request URL")?;
    let port = port.unwrap_or(80);
    if host.is_empty() || port == 0 {
        return Err("bad host in the request URL");
    }
    let path = path.split('#').next().unwrap_or("");
    let path = match path {
        "" => "/".to_string(),
        p if p.starts_with('?') => format!("/{p}"),
        p => p.to_string(),
    };
    Ok((host.to_string(), port, path))
}

/// The head as sent to the origin: origin-form target, `Host` set to the
/// destination, the `Proxy-*` and hop-by-hop headers dropped, and
/// `Connection: close` (one request per connection) unless the client asked
/// for an upgrade (WebSocket), which then passes through.
pub(crate) fn origin_request(head: &Head, host: &str, port: u16, path: &str) -> Vec<u8> {
    let connection = head.header("connection").unwrap_or("");
    let upgrade = is_upgrade(head);
    let named: Vec<String> = connection
        .split(',')
        .map(|t| t.trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty() && t != "upgrade" && t != "close" && t != "keep-alive")
        .collect();
    let mut out = format!("{} {path} {}\r\n", head.method, head.version);
    let host_value = match (host.contains(':'), port) {
        (true, 80) => format!("[{host}]"),
        (true, p) => format!("[{host}]:{p}"),
        (false, 80) => host.to_string(),
        (false, p) => format!("{host}:{p}"),
    };
    out.push_str(&format!("Host: {host_value}\r\n"));
    for (name, value) in &head.headers {
        let lower = name.to_ascii_lowercase();
        let hop = lower.starts_with("proxy-")
            || matches!(
                lower.as_str(),
                "host" | "connection" | "keep-alive" | "te" | "trailer"
            )
            || (lower == "upgrade" && !upgrade)
            || named.contains(&lower);
        if !hop {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    out.push_str(if upgrade {
        "Connection: upgrade\r\n\r\n"
    } else {
        "Connection: close\r\n\r\n"
    });
    out.into_bytes()
}

/// Whether the client asks for an upgrade (`Connection: upgrade`).
pub(crate) fn is_upgrade(head: &Head) -> bool {
    head.header("connection")
        .unwrap_or("")
        .split(',')
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
}

/// A minimal response the proxy writes itself.
pub(crate) fn response(status: u16, reason: &str, extra: &str) -> Vec<u8> {
    format!("HTTP/1.1 {status} {reason}\r\n{extra}Content-Length: 0\r\nConnection: close\r\n\r\n")
        .into_bytes()
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn parses_a_connect_request() {
        let h = parse_head(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\nProxy-Authorization: Basic abc\r\n\r\n").unwrap();
        assert_eq!(h.method, "CONNECT");
        assert_eq!(authority(&h.target).unwrap(), ("allowed.test".into(), 443));
        assert!(h.has_credential("Basic abc"));
        assert!(!h.has_credential("Basic abd"));
        assert!(!h.has_credential("Basic ab"));
        assert_eq!(authority("[::1]:8443").unwrap(), ("::1".into(), 8443));
    }

    #[test]
    fn hostile_heads_are_refused() {
        for bad in [
            &b"CONNECT allowed.test:443 HTTP/1.1\r\n\r\n\0"[..],
            b"CONNECT  allowed.test:443 HTTP/1.1\r\n\r\n",
            b"CONNECT allowed.test:443 HTTP/2\r\n\r\n",
            b"CONNECT allowed.test:443\r\n\r\n",
            b"CONNECT allowed.test:443 HTTP/1.1 x\r\n\r\n",
            b"GET http://a/ HTTP/1.1\r\nX: a\0b\r\n\r\n",
            b"GET http://a/ HTTP/1.1\r\nX: a\rb\r\n\r\n",
            b"GET http://a/ HTTP/1.1\r\nX: a\nY: b\r\n\r\n",
            b"GET http://a/ HTTP/1.1\r\nX: a\r\n folded\r\n\r\n",
            b"GET http://a/ HTTP/1.1\r\nBad Name: a\r\n\r\n",
            b"GET http://a/ HTTP/1.1\r\nno colon\r\n\r\n",
            b"GET http://a/ HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            b"GET http://a/ HTTP/1.1\r\nContent-Length: +5\r\n\r\n",
            b"GET http://a/ HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            b"GET http://a/ HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"\xff\xfe HTTP/1.1\r\n\r\n",
            b"\r\n\r\n",
        ] {
            assert!(
                parse_head(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        // A huge but well-formed Content-Length is fine: the body is streamed.
        assert!(
            parse_head(b"POST http://a/ HTTP/1.1\r\nContent-Length: 9999999999999999999\r\n\r\n")
                .is_ok()
        );
        for bad in [
            "allowed.test",
            "allowed.test:",
            "allowed.test:0",
            ":443",
            "a:b:c:443",
            "allowed.test:65536",
        ] {
            assert!(authority(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn absolute_form_becomes_origin_form_without_proxy_headers() {
        let h = parse_head(b"GET http://Allowed.test:8080/a/b?c=d HTTP/1.1\r\nHost: evil.test\r\nProxy-Authorization: Basic x\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive, X-Secret\r\nX-Secret: 1\r\nAccept: */*\r\n\r\n").unwrap();
        let (host, port, path) = absolute(&h.target).unwrap();
        assert_eq!(
            (host.as_str(), port, path.as_str()),
            ("Allowed.test", 8080, "/a/b?c=d")
        );
        let out = String::from_utf8(origin_request(&h, "allowed.test", port, &path)).unwrap();
        assert_eq!(
            out,
            "GET /a/b?c=d HTTP/1.1\r\nHost: allowed.test:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(absolute("http://a").unwrap(), ("a".into(), 80, "/".into()));
        assert_eq!(
            absolute("http://a?x").unwrap(),
            ("a".into(), 80, "/?x".into())
        );
        assert!(absolute("https://a/").is_err());
        assert!(absolute("http://user:pw@a/").is_err());
        assert!(absolute("/relative").is_err());
        assert!(absolute("http://:80/").is_err());
    }

    /// What of `rest` (the bytes after the head) is forwarded.
    fn forwarded(head: &str, rest: &[&[u8]]) -> (Vec<u8>, bool) {
        let h = parse_head(head.as_bytes()).unwrap();
        let mut body = body_of(&h);
        let mut out = Vec::new();
        for piece in rest {
            let n = body.take(piece);
            out.extend_from_slice(&piece[..n]);
        }
        (out, body.done())
    }

    #[test]
    fn a_second_request_pipelined_behind_the_first_is_not_forwarded() {
        let head = "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n";
        let second = b"GET / HTTP/1.1\r\nHost: other.test\r\n\r\n";
        assert_eq!(forwarded(head, &[second]), (Vec::new(), true));
        let post = "POST http://a.test/ HTTP/1.1\r\nContent-Length: 5\r\n\r\n";
        assert_eq!(
            forwarded(post, &[b"he", b"lloGET / HTTP/1.1\r\n"]),
            (b"hello".to_vec(), true)
        );
    }

    #[test]
    fn a_chunked_body_ends_where_its_last_chunk_and_trailer_end() {
        let head = "POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
        let body: &[u8] = b"5;x=y\r\nhello\r\n0\r\nX-T: 1\r\n\r\n";
        let mut input = body.to_vec();
        input.extend_from_slice(b"GET / HTTP/1.1\r\nHost: other.test\r\n\r\n");
        assert_eq!(forwarded(head, &[&input]), (body.to_vec(), true));
        // Byte by byte, the same.
        let pieces: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(forwarded(head, &pieces), (body.to_vec(), true));
        // Not yet complete.
        assert_eq!(
            forwarded(head, &[b"5\r\nhel"]),
            (b"5\r\nhel".to_vec(), false)
        );
    }

    #[test]
    fn a_chunked_body_that_breaks_the_grammar_ends_the_forwarding() {
        let head = "POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
        for bad in [
            &b"zz\r\n"[..],
            b"5\r\nhelloXX",
            b"\r\n",
            b"11111111111111111\r\n",
        ] {
            let (out, done) = forwarded(head, &[bad]);
            assert!(done && out.len() < bad.len(), "{bad:?}: {out:?}");
        }
    }

    #[test]
    fn transfer_codings_other_than_one_chunked_are_refused() {
        for te in [
            "gzip, chunked",
            "identity",
            "chunked\r\nTransfer-Encoding: chunked",
        ] {
            let head = format!("POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: {te}\r\n\r\n");
            assert!(parse_head(head.as_bytes()).is_err(), "{te}");
        }
    }
}
