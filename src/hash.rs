//! SHA-256 as lowercase hex: policy digests, the session's policy digest,
//! SARIF fingerprints.

use std::fmt::Write;

use sha2::{Digest, Sha256};

/// The SHA-256 of `parts` fed in order, as 64 lowercase hex digits.
pub fn sha256_hex(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    let mut out = String::with_capacity(64);
    for b in h.finalize() {
        let _ = write!(out, "{b:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_answer() {
        assert_eq!(
            super::sha256_hex(&[b"a", b"bc"]),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
