//! Hashing, random tokens and secret files that every module shares (authentication, the
//! card, the registry's keys, request ids, the policy's secrets, the dev certificates). A
//! leaf: it imports nothing of the crate.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use base64::Engine as _;
use ring::rand::SecureRandom;

/// SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// 32 random bytes from the system generator, base64url without padding (43 characters).
/// Panics only if the operating system has no random source, which makes running unsafe.
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    #[allow(clippy::expect_used)]
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system random number generator is unavailable");
    b64url(&bytes)
}

/// Base64url without padding (RFC 4648 §5; what JWS, JWK and the tokens use, RFC 7515 §2).
pub fn b64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Creates `path` with mode 0600 (failing if it exists), making parent directories 0700.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), String> {
    if let Some(parent) = path.parent() {
        if !parent.as_os_str().is_empty() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    f.write_all(bytes)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn b64url_is_rfc4648_base64url_without_padding() {
        // RFC 4648 §10's vectors without their padding, and the two characters that set the
        // URL alphabet apart from the standard one ('-' for '+', '_' for '/').
        for (bytes, want) in [
            (&b""[..], ""),
            (b"f", "Zg"),
            (b"fo", "Zm8"),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg"),
            (b"fooba", "Zm9vYmE"),
            (b"foobar", "Zm9vYmFy"),
            (&[0xfb, 0xff][..], "-_8"),
        ] {
            assert_eq!(b64url(bytes), want, "{bytes:?}");
        }
    }

    #[test]
    fn random_tokens_are_43_url_safe_characters_and_differ() {
        let (a, b) = (random_token(), random_token());
        assert_eq!(a.len(), 43);
        assert!(a
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
        assert_ne!(a, b);
    }
}
