//! Hashing and random tokens that every module shares (authentication, the card, the
//! registry's keys, request ids, the policy's secrets). A leaf: it imports nothing of the crate.

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
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}
