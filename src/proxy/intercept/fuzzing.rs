//! The properties the fuzz targets check (`fuzz/fuzz_targets/`), each a
//! function that panics where the property fails, so the same checks run
//! under libFuzzer and in the unit tests below.
//!
//! - [`request_head`]: a request head the proxy lets through to a
//!   secret's host reaches the server as the same request (method,
//!   target, one `Host`), allowed by the rules read again from what is
//!   sent, with the value in a credential header only; and no response
//!   head the job is passed holds the value.
//! - [`rule_target`]: a target a rule lets through is one every server
//!   reads as the path the rule matched: decoded, it has no dot segment,
//!   no `;`, no `\`, and as many segments as the rule saw.

use std::sync::OnceLock;

use super::{CREDENTIAL_HEADERS, Interceptor, Secret, addressed_to, http, unambiguous_path};
use crate::policy::{HostPattern, Origin};

const HOST: &str = "registry.test";
const VALUE: &str = "npm_VALUEvalue0123456789abcdef";
const PLACEHOLDER: &str = "npm_PLACEplace9876543210fedcba";

/// One interceptor for every input (making its authority is slow).
fn interceptor() -> Option<&'static Interceptor> {
    static ICP: OnceLock<Option<Interceptor>> = OnceLock::new();
    ICP.get_or_init(|| {
        let origin = Origin::command_line("--rule", "");
        let rule = crate::policy::validate::parse_request_rule(
            &format!("GET,HEAD {HOST}/api/allowed/*"),
            origin.clone(),
        )
        .ok()?;
        Interceptor::new(
            vec![Secret {
                name: "NPM_TOKEN".into(),
                placeholder: PLACEHOLDER.into(),
                value: VALUE.into(),
                hosts: vec![HostPattern {
                    host: HOST.into(),
                    port: None,
                    origin,
                }],
            }],
            vec![rule],
        )
        .ok()
    })
    .as_ref()
}

/// See the module's documentation. `data`: a request head and what
/// follows it; its first byte also places the value in a response head.
pub fn request_head(data: &[u8]) {
    let Some(icp) = interceptor() else {
        return;
    };
    // A response head holding the value somewhere reaches the job without it.
    let at = usize::from(data.first().copied().unwrap_or(0)) % (data.len() + 1);
    let mut response = data[..at].to_vec();
    response.extend_from_slice(VALUE.as_bytes());
    response.extend_from_slice(&data[at..]);
    let (clean, found) = icp.scrub(&response).unwrap_or_default();
    assert!(!found.is_empty(), "the value was not found");
    assert!(
        !clean.windows(VALUE.len()).any(|w| w == VALUE.as_bytes()),
        "a response head kept the value"
    );

    // The job never holds the value: an input that does is no request it
    // could send.
    if data.windows(VALUE.len()).any(|w| w == VALUE.as_bytes()) {
        return;
    }
    let end = crate::proxy::wire::head_end(data).unwrap_or(data.len());
    let Ok(head) = http::parse_head(&data[..end]) else {
        return;
    };
    let mut body = http::body_of(&head);
    assert!(body.take(&data[end..]) <= data.len() - end);
    if addressed_to(&head, HOST, 443).is_err() || icp.permits(&head, HOST, 443).is_err() {
        return;
    }
    let (bytes, _) = icp.inject(&head, HOST, 443);
    let sent = match http::parse_head(&bytes) {
        Ok(sent) => sent,
        Err(why) => panic!("what the proxy sends does not parse: {why}"),
    };
    assert_eq!(
        (&sent.method, &sent.target, sent.version),
        (&head.method, &head.target, head.version)
    );
    assert!(
        addressed_to(&sent, HOST, 443).is_ok(),
        "the sent Host differs"
    );
    assert!(
        icp.permits(&sent, HOST, 443).is_ok(),
        "the sent request is refused"
    );
    assert!(!sent.target.contains(VALUE), "the value is in the target");
    for (name, value) in &sent.headers {
        let credential = CREDENTIAL_HEADERS
            .iter()
            .any(|c| name.eq_ignore_ascii_case(c));
        assert!(
            credential || !value.contains(VALUE),
            "the value is in the header {name}"
        );
    }
}

/// See the module's documentation. `data`: a request target.
pub fn rule_target(data: &[u8]) {
    let Ok(target) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(path) = unambiguous_path(target) else {
        return;
    };
    assert!(!path.contains(['#', ';', '\\', '?']), "{path}");
    let Some(decoded) = percent_decode(path) else {
        panic!("an accepted path does not decode: {path}");
    };
    assert_eq!(
        decoded.split(|b| *b == b'/').count(),
        path.split('/').count(),
        "decoding made segments"
    );
    assert!(
        !decoded
            .split(|b| *b == b'/')
            .any(|s| s == b"." || s == b".." || s.contains(&0) || s.contains(&b'\\')),
        "{path}"
    );
}

fn percent_decode(path: &str) -> Option<Vec<u8>> {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fuzz targets' properties over the inputs the attack tests use.
    #[test]
    fn the_fuzz_properties_hold_for_known_attacks() {
        assert!(
            interceptor().is_some(),
            "no interceptor: the checks would not run"
        );
        for head in [
            "GET /api/allowed/x HTTP/1.1\r\nHost: registry.test\r\nAuthorization: Bearer npm_PLACEplace9876543210fedcba\r\n\r\n",
            "GET /api/allowed/x?t=npm_PLACEplace9876543210fedcba HTTP/1.1\r\nHost: registry.test\r\nOrigin: https://npm_PLACEplace9876543210fedcba\r\n\r\n",
            "GET /api/allowed/..;/forbidden HTTP/1.1\r\nHost: registry.test\r\n\r\n",
            "POST /api/allowed/x HTTP/1.1\r\nHost: registry.test\r\nContent-Length: 3\r\n\r\nabc",
            "GET /api/allowed/x HTTP/1.1\r\nHost: registry.test\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            "\u{7}GET / HTTP/1.1\r\n\r\n",
        ] {
            request_head(head.as_bytes());
        }
        for target in [
            "/api/allowed/x",
            "/api/allowed/%2e%2e/x",
            "/a/%41%42",
            "/a/..;/b",
            "/a/%",
            "/a%2fb",
        ] {
            rule_target(target.as_bytes());
        }
    }

    /// The fuzz targets' properties over inputs mutated from the known
    /// attacks, on the stable toolchain the test suite runs (libFuzzer
    /// needs nightly, which CI cannot fetch): a fixed-seed generator, so a
    /// failure reproduces, bounded in count (a few seconds in a debug
    /// build). Mutations: a byte flipped, a byte dropped, a token that
    /// parsers disagree on spliced in.
    #[test]
    fn the_fuzz_properties_hold_for_mutated_attacks() {
        const ROUNDS: usize = 40_000;
        const TOKENS: [&str; 16] = [
            "%2e",
            "%2E%2e",
            "..",
            ";",
            "\\",
            "#",
            "%00",
            "%2f",
            "%5c",
            "?",
            "\r\n",
            "\r\nHost: other.test",
            "\r\nTransfer-Encoding: chunked",
            "\r\nConnection: upgrade",
            " ",
            PLACEHOLDER,
        ];
        let heads: [&[u8]; 3] = [
            b"GET /api/allowed/x HTTP/1.1\r\nHost: registry.test\r\nAuthorization: Bearer npm_PLACEplace9876543210fedcba\r\n\r\n",
            b"POST /api/allowed/x HTTP/1.1\r\nHost: registry.test\r\nContent-Length: 3\r\n\r\nabc",
            b"GET /api/allowed/..;/x HTTP/1.1\r\nHost: registry.test\r\n\r\n",
        ];
        let targets: [&[u8]; 2] = [b"/api/allowed/x", b"/api/allowed/a/b"];
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mutate = |seed: &[u8], next: &mut dyn FnMut() -> u64| {
            let mut v = seed.to_vec();
            for _ in 0..(1 + next() % 3) {
                let at = (next() as usize) % (v.len() + 1);
                match next() % 3 {
                    0 if at < v.len() => v[at] ^= 1 << (next() % 8),
                    1 if at < v.len() => {
                        v.remove(at);
                    }
                    _ => {
                        let t = TOKENS[(next() as usize) % TOKENS.len()];
                        v.splice(at..at, t.bytes());
                    }
                }
            }
            v
        };
        for i in 0..ROUNDS {
            let head = mutate(heads[i % heads.len()], &mut next);
            request_head(&head);
            let target = mutate(targets[i % targets.len()], &mut next);
            rule_target(&target);
        }
    }
}
