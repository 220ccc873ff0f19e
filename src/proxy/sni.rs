//! The server name in a TLS ClientHello, read without terminating TLS.
//!
//! A small bounded parser of its own rather than `tls-parser`: vetto needs
//! one field of one message, and `tls-parser` brings `nom`, `rusticata-macros`
//! and parsers for every TLS message; ~100 lines here are easier to audit
//! and to bound (the handshake may span records, but at most
//! [`MAX_HELLO`] bytes are ever gathered). Every length is checked before
//! it is used; a malformed hello is an error, never a panic.

/// The largest ClientHello the proxy gathers (a post-quantum key share makes
/// a hello about 1.8 KiB; 16 KiB is the TLS record limit).
pub(crate) const MAX_HELLO: usize = 16 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Hello {
    /// More bytes are needed.
    Incomplete,
    /// A complete ClientHello; its `server_name` (host_name), if any.
    Complete(Option<String>),
    /// Starts like TLS but is not a well-formed ClientHello (or is too big).
    Invalid,
}

/// Whether a stream starting with `first` is a TLS handshake.
pub(crate) fn looks_like_tls(first: u8) -> bool {
    first == 0x16
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<usize> {
        self.take(1).map(|b| usize::from(b[0]))
    }
    fn u16(&mut self) -> Option<usize> {
        self.take(2)
            .map(|b| usize::from(b[0]) << 8 | usize::from(b[1]))
    }
    fn u24(&mut self) -> Option<usize> {
        self.take(3)
            .map(|b| usize::from(b[0]) << 16 | usize::from(b[1]) << 8 | usize::from(b[2]))
    }
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.take(n)
    }
    fn vec16(&mut self) -> Option<Reader<'a>> {
        let n = self.u16()?;
        self.take(n).map(Reader)
    }
}

/// Parse the records at the start of `buf`.
pub(crate) fn client_hello(buf: &[u8]) -> Hello {
    // Gather the handshake message from consecutive handshake records.
    let mut handshake: Vec<u8> = Vec::new();
    let mut rest = Reader(buf);
    loop {
        let Some(header) = rest.take(5) else {
            return Hello::Incomplete;
        };
        if header[0] != 0x16 || header[1] != 3 {
            return Hello::Invalid;
        }
        let len = usize::from(header[3]) << 8 | usize::from(header[4]);
        if len == 0 || len > MAX_HELLO + 2048 {
            return Hello::Invalid;
        }
        let Some(fragment) = rest.take(len) else {
            return Hello::Incomplete;
        };
        handshake.extend_from_slice(fragment);
        if handshake.len() >= 4 {
            let mut h = Reader(&handshake);
            let (Some(kind), Some(body_len)) = (h.u8(), h.u24()) else {
                return Hello::Invalid;
            };
            if kind != 1 || body_len > MAX_HELLO {
                return Hello::Invalid;
            }
            if handshake.len() >= 4 + body_len {
                return match server_name(&handshake[4..4 + body_len]) {
                    Some(name) => Hello::Complete(name),
                    None => Hello::Invalid,
                };
            }
        }
        if handshake.len() > MAX_HELLO + 4 {
            return Hello::Invalid;
        }
    }
}

/// The SNI host_name in a ClientHello body: `Some(None)` when it has none,
/// `None` when the body is malformed.
fn server_name(body: &[u8]) -> Option<Option<String>> {
    let mut r = Reader(body);
    r.take(2)?; // legacy_version
    r.take(32)?; // random
    r.vec8()?; // legacy_session_id
    r.vec16()?; // cipher_suites
    r.vec8()?; // legacy_compression_methods
    if r.0.is_empty() {
        return Some(None); // no extensions at all
    }
    let mut exts = r.vec16()?;
    let mut found = None;
    while !exts.0.is_empty() {
        let kind = exts.u16()?;
        let mut data = exts.vec16()?;
        if kind != 0 {
            continue;
        }
        if found.is_some() {
            return None; // two server_name extensions
        }
        let mut list = data.vec16()?;
        while !list.0.is_empty() {
            let name_type = list.u8()?;
            let name = list.vec16()?.0;
            if name_type == 0 {
                if found.is_some() || name.is_empty() || !name.is_ascii() {
                    return None;
                }
                found = Some(String::from_utf8_lossy(name).into_owned());
            }
        }
        data.0.is_empty().then_some(())?;
    }
    Some(found)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal ClientHello record naming `sni` (or none).
    pub(crate) fn hello(sni: Option<&str>) -> Vec<u8> {
        let mut body = vec![3, 3];
        body.extend([7u8; 32]);
        body.push(0); // session id
        body.extend([0, 2, 0x13, 0x01]); // one cipher suite
        body.extend([1, 0]); // null compression
        let mut exts = Vec::new();
        if let Some(name) = sni {
            let n = name.len();
            let mut ext = Vec::new();
            ext.extend(((n + 3) as u16).to_be_bytes());
            ext.push(0);
            ext.extend((n as u16).to_be_bytes());
            ext.extend(name.as_bytes());
            exts.extend([0, 0]);
            exts.extend((ext.len() as u16).to_be_bytes());
            exts.extend(ext);
        }
        exts.extend([0, 0x2b, 0, 3, 2, 3, 4]); // supported_versions
        body.extend((exts.len() as u16).to_be_bytes());
        body.extend(exts);
        let mut hs = vec![1];
        hs.extend(&(body.len() as u32).to_be_bytes()[1..]);
        hs.extend(body);
        let mut rec = vec![0x16, 3, 1];
        rec.extend((hs.len() as u16).to_be_bytes());
        rec.extend(hs);
        rec
    }

    #[test]
    fn reads_the_server_name() {
        assert_eq!(
            client_hello(&hello(Some("allowed.test"))),
            Hello::Complete(Some("allowed.test".into()))
        );
        assert_eq!(client_hello(&hello(None)), Hello::Complete(None));
    }

    #[test]
    fn every_prefix_is_incomplete_never_a_panic() {
        let h = hello(Some("allowed.test"));
        for n in 0..h.len() {
            assert_eq!(client_hello(&h[..n]), Hello::Incomplete, "{n}");
        }
    }

    #[test]
    fn a_hello_split_over_two_records_is_gathered() {
        let h = hello(Some("allowed.test"));
        let hs = &h[5..];
        let (a, b) = hs.split_at(20);
        let mut two = Vec::new();
        for part in [a, b] {
            two.extend([0x16, 3, 1]);
            two.extend((part.len() as u16).to_be_bytes());
            two.extend(part);
        }
        assert_eq!(
            client_hello(&two),
            Hello::Complete(Some("allowed.test".into()))
        );
    }

    #[test]
    fn corrupted_hellos_are_invalid_or_incomplete_never_a_panic() {
        let h = hello(Some("allowed.test"));
        for i in 0..h.len() {
            for v in [0u8, 1, 0x7f, 0xff] {
                let mut c = h.clone();
                c[i] = v;
                let _ = client_hello(&c);
            }
        }
        assert_eq!(client_hello(b"\x17\x03\x03\x00\x01x"), Hello::Invalid);
        assert_eq!(client_hello(b"\x16\x03\x01\xff\xff"), Hello::Invalid);
        // A handshake announcing a huge hello is refused before gathering it.
        assert_eq!(
            client_hello(b"\x16\x03\x01\x00\x04\x01\xff\xff\xff"),
            Hello::Invalid
        );
        assert!(looks_like_tls(h[0]));
        assert!(!looks_like_tls(b'S'));
    }
}
