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

/// The largest private key file read (a PEM RSA-8192 key is about 6.5 KB).
const MAX_KEY_FILE: u64 = 1 << 20;

/// Reads a private key file, refusing one that is not a regular file, that others may read
/// or write, or that its group may write (mode & 0o027): the group may read it, as in the
/// `root:ssl-cert 0640` convention. The mode is read from the opened file, so the file
/// checked is the file read.
pub fn read_private_key(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    let mode = meta.permissions().mode();
    if mode & 0o027 != 0 {
        return Err(format!(
            "{} is a private key that others can read or its group can write (mode {:o}); \
             run chmod 600 (or 640) on it",
            path.display(),
            mode & 0o777
        ));
    }
    if meta.len() > MAX_KEY_FILE {
        return Err(format!("{} is too large for a private key", path.display()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_KEY_FILE)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(bytes)
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

    /// Private key files: the owner's and its group's reading are allowed; anyone else's
    /// access, the group's writing, a directory, a device, a missing file and an oversize
    /// file are refused, through symlinks too (the target's mode counts).
    #[test]
    fn a_private_key_file_is_read_only_when_others_cannot_reach_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("a2a-edge-keymode-{}", random_token()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
        for (mode, ok) in [
            (0o600, true),
            (0o400, true),
            (0o640, true),
            (0o440, true),
            (0o700, true),
            (0o644, false),
            (0o604, false),
            (0o602, false),
            (0o601, false),
            (0o660, false),
            (0o620, false),
            (0o666, false),
            (0o777, false),
        ] {
            let path = dir.join(format!("k{mode:o}.pem"));
            std::fs::write(&path, key).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let got = read_private_key(&path);
            assert_eq!(got.is_ok(), ok, "mode {mode:o}: {got:?}");
            match got {
                Ok(bytes) => assert_eq!(bytes, key),
                Err(e) => assert!(e.contains("chmod 600") && !e.contains("AAAA"), "{e}"),
            }
            // Through a symlink the target's mode decides, whatever the link's.
            let link = dir.join(format!("l{mode:o}.pem"));
            std::os::unix::fs::symlink(&path, &link).unwrap();
            assert_eq!(read_private_key(&link).is_ok(), ok, "link to {mode:o}");
        }
        let big = dir.join("big.pem");
        std::fs::write(&big, vec![b'A'; (MAX_KEY_FILE + 1) as usize]).unwrap();
        std::fs::set_permissions(&big, std::fs::Permissions::from_mode(0o600)).unwrap();
        for (path, want) in [
            (big.clone(), "too large"),
            (dir.clone(), "not a regular file"),
            (std::path::PathBuf::from("/dev/null"), "not a regular file"),
            (dir.join("missing.pem"), "cannot read"),
        ] {
            let e = read_private_key(&path).unwrap_err();
            assert!(e.contains(want), "{}: {e}", path.display());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
