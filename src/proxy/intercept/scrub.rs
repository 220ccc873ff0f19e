//! The value never reaches the job (issue P15): every response head the
//! proxy passes from a secret's host (HTTP/1.1 and HTTP/2, `1xx`, and
//! trailers) is read, and each secret's value — raw, percent-encoded (either
//! hex case), base64 and base64url (at each of the three alignments it can
//! have inside a longer encoded string) — is replaced by the matching form
//! of its placeholder. A server that reflects what it was sent (a redirect
//! keeping the query, CORS echoing `Origin`, a cookie made of a header)
//! then hands back the placeholder, which is worthless.

use base64::Engine;

/// One form of a secret's value and the same form of its placeholder.
struct Form {
    value: Vec<u8>,
    placeholder: Vec<u8>,
    /// The secret's index in the interceptor's list.
    secret: usize,
}

/// The forms of every secret's value, made once per session.
pub(super) struct Scrubber {
    forms: Vec<Form>,
}

/// Shortest form replaced: shorter runs of an encoding could stand for
/// other text (a value is at least 8 letters or digits long, so its
/// forms are longer than this).
const MIN_FORM: usize = 6;

impl Scrubber {
    /// `secrets`: each value and its placeholder.
    pub(super) fn new<'a>(secrets: impl Iterator<Item = (&'a str, &'a str)>) -> Scrubber {
        let mut forms: Vec<Form> = Vec::new();
        for (secret, (value, placeholder)) in secrets.enumerate() {
            for (v, p) in encodings(value.as_bytes(), placeholder.as_bytes()) {
                if v.len() >= MIN_FORM && !forms.iter().any(|f| f.value == v) {
                    forms.push(Form {
                        value: v,
                        placeholder: p,
                        secret,
                    });
                }
            }
        }
        // Longest first: a raw value inside its own percent form is the
        // same bytes, and the longer form is the one to replace whole.
        forms.sort_by_key(|f| std::cmp::Reverse(f.value.len()));
        Scrubber { forms }
    }

    /// `bytes` with every form of a value replaced by its placeholder's,
    /// and the indices of the secrets found (`None`: nothing was found).
    pub(super) fn scrub(&self, bytes: &[u8]) -> Option<(Vec<u8>, Vec<usize>)> {
        let mut out: Option<Vec<u8>> = None;
        let mut found = Vec::new();
        for form in &self.forms {
            let current = out.as_deref().unwrap_or(bytes);
            if let Some(replaced) = replace_all(current, &form.value, &form.placeholder) {
                out = Some(replaced);
                if !found.contains(&form.secret) {
                    found.push(form.secret);
                }
            }
        }
        out.map(|o| (o, found))
    }
}

/// `haystack` with every `from` replaced by `to`; `None` where there is none.
fn replace_all(haystack: &[u8], from: &[u8], to: &[u8]) -> Option<Vec<u8>> {
    if from.is_empty() || haystack.len() < from.len() {
        return None;
    }
    let mut out = Vec::with_capacity(haystack.len());
    let mut at = 0;
    let mut hit = false;
    while at < haystack.len() {
        if haystack[at..].starts_with(from) {
            out.extend_from_slice(to);
            at += from.len();
            hit = true;
        } else {
            out.push(haystack[at]);
            at += 1;
        }
    }
    hit.then_some(out)
}

/// The forms a server would write the value in, each paired with the
/// placeholder's same form.
fn encodings(value: &[u8], placeholder: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = vec![(value.to_vec(), placeholder.to_vec())];
    for upper in [true, false] {
        out.push((percent(value, upper), percent(placeholder, upper)));
    }
    for engine in [
        &base64::engine::general_purpose::STANDARD_NO_PAD,
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ] {
        for lead in 0..3 {
            out.push((
                base64_inside(engine, value, lead),
                base64_inside(engine, placeholder, lead),
            ));
        }
    }
    out
}

/// Every byte outside RFC 3986's unreserved set as `%XX`.
fn percent(bytes: &[u8], upper: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() * 3);
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b);
        } else {
            let hex = if upper {
                format!("%{b:02X}")
            } else {
                format!("%{b:02x}")
            };
            out.extend_from_slice(hex.as_bytes());
        }
    }
    out
}

/// The characters of the base64 of `bytes`, placed `lead` bytes into a
/// longer input, that depend on `bytes` alone (so they appear whatever
/// comes before and after it, as in `Basic base64(user:value)`).
fn base64_inside(engine: &base64::engine::GeneralPurpose, bytes: &[u8], lead: usize) -> Vec<u8> {
    let mut input = vec![0u8; lead];
    input.extend_from_slice(bytes);
    let encoded = engine.encode(&input).into_bytes();
    // Character i covers input bits 6i..6i+6.
    let first = (lead * 8).div_ceil(6);
    let last = ((lead + bytes.len()) * 8) / 6;
    encoded
        .get(first..last)
        .map(<[u8]>::to_vec)
        .unwrap_or_default()
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    const VALUE: &str = "npm_VALUEvalue0123456789+/x";
    const PLACEHOLDER: &str = "npm_PLACEplace9876543210+/y";

    fn scrubbed(text: &str) -> Option<String> {
        let s = Scrubber::new([(VALUE, PLACEHOLDER)].into_iter());
        s.scrub(text.as_bytes()).map(|(b, found)| {
            assert_eq!(found, [0]);
            String::from_utf8(b).unwrap()
        })
    }

    #[test]
    fn the_value_in_any_form_a_server_writes_becomes_the_placeholder() {
        assert_eq!(
            scrubbed(&format!("Location: /dir/?t={VALUE}\r\n")).unwrap(),
            format!("Location: /dir/?t={PLACEHOLDER}\r\n")
        );
        for upper in [true, false] {
            let encoded = String::from_utf8(percent(VALUE.as_bytes(), upper)).unwrap();
            assert!(encoded.contains('%'));
            let out = scrubbed(&format!("Location: /x?t={encoded}&y=1")).unwrap();
            let expected = String::from_utf8(percent(PLACEHOLDER.as_bytes(), upper)).unwrap();
            assert_eq!(out, format!("Location: /x?t={expected}&y=1"));
        }
        // Base64 and base64url inside a longer encoded string, at every
        // alignment (a cookie of `user:value`, a JWT-like blob).
        for prefix in ["", "u:", "us:", "use:"] {
            for engine in [
                &base64::engine::general_purpose::STANDARD,
                &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            ] {
                let blob = engine.encode(format!("{prefix}{VALUE};tail"));
                let out = scrubbed(&format!("Set-Cookie: s={blob}")).unwrap();
                assert!(!out.contains(&blob), "{prefix}: {out}");
                let decoded = engine
                    .decode(out.trim_start_matches("Set-Cookie: s="))
                    .unwrap();
                let decoded = String::from_utf8_lossy(&decoded).to_string();
                assert!(!decoded.contains(&VALUE[2..VALUE.len() - 2]), "{decoded}");
            }
        }
        assert_eq!(
            scrubbed("Access-Control-Allow-Origin: https://ok.test"),
            None
        );
    }
}
