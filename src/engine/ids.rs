//! Identifiers: UUID version 4 strings, as the reference SDKs generate for tasks, contexts,
//! messages and artifacts.

use std::sync::atomic::{AtomicU64, Ordering};

use ring::rand::{SecureRandom, SystemRandom};

/// A random UUID v4 in its canonical lowercase form (`xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx`).
pub(crate) fn uuid_v4() -> String {
    let mut b = [0u8; 16];
    if SystemRandom::new().fill(&mut b).is_err() {
        b = fallback_bytes();
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let mut s = String::with_capacity(36);
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push(char::from(HEX[usize::from(byte >> 4)]));
        s.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    s
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Unique (not secret) bytes if the system generator ever fails: a hash of a process-wide
/// counter and the clock. Ids need uniqueness here, not unpredictability.
fn fallback_bytes() -> [u8; 16] {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = crate::time::now_micros();
    let mut input = [0u8; 16];
    input[..8].copy_from_slice(&n.to_le_bytes());
    input[8..].copy_from_slice(&t.to_le_bytes());
    let digest = ring::digest::digest(&ring::digest::SHA256, &input);
    let mut out = [0u8; 16];
    out.copy_from_slice(&digest.as_ref()[..16]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_v4_shape_and_uniqueness() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            let u = uuid_v4();
            assert_eq!(u.len(), 36);
            let b = u.as_bytes();
            for (i, c) in b.iter().enumerate() {
                if matches!(i, 8 | 13 | 18 | 23) {
                    assert_eq!(*c, b'-');
                } else {
                    assert!(c.is_ascii_hexdigit() && !c.is_ascii_uppercase(), "{u}");
                }
            }
            assert_eq!(b[14], b'4', "{u}");
            assert!(matches!(b[19], b'8' | b'9' | b'a' | b'b'), "{u}");
            assert!(seen.insert(u));
        }
        assert_ne!(fallback_bytes(), fallback_bytes());
    }
}
