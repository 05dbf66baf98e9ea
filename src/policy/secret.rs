//! Secrets named by a policy: environment variables, files (0600) and SHA-256 digests.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::GeneratedToken;

pub use crate::crypto::{random_token, sha256, write_private};

pub fn parse_sha256_hex(hex: &str) -> Result<[u8; 32], String> {
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("must be 64 hexadecimal characters (the SHA-256 of the secret)".into());
    }
    let mut out = [0u8; 32];
    for (i, chunk) in hex.as_bytes().chunks(2).enumerate() {
        let s = std::str::from_utf8(chunk).map_err(|_| "not hexadecimal".to_string())?;
        out[i] = u8::from_str_radix(s, 16).map_err(|_| "not hexadecimal".to_string())?;
    }
    Ok(out)
}

pub fn from_env(var: &str) -> Result<String, String> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Ok(v),
        Ok(_) => Err(format!("environment variable {var} is empty")),
        Err(std::env::VarError::NotPresent) => {
            Err(format!("environment variable {var} is not set"))
        }
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(format!("environment variable {var} is not UTF-8"))
        }
    }
}

/// Reads a token file. When it is missing and `generate` is set, `create` writes a fresh
/// random token (0600, parent directories 0700); without `create` (a dry run) it returns None.
pub fn from_file(
    path: &Path,
    generate: bool,
    create: bool,
) -> Result<Option<GeneratedToken>, String> {
    match std::fs::metadata(path) {
        Ok(meta) => {
            if !meta.is_file() {
                return Err(format!("{} is not a regular file", path.display()));
            }
            if meta.permissions().mode() & 0o077 != 0 {
                return Err(format!(
                    "{} is readable or writable by others; run chmod 600 on it",
                    path.display()
                ));
            }
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            // The secret is the file's first line; a line after it would be taken for part
            // of the secret by some readers and dropped by others: refused.
            let mut lines = text.lines();
            let token = lines.next().unwrap_or_default().to_string();
            if token.is_empty() {
                return Err(format!("{} is empty", path.display()));
            }
            if lines.any(|l| !l.trim().is_empty()) {
                return Err(format!(
                    "{} holds more than one line; the secret is its only line",
                    path.display()
                ));
            }
            Ok(Some(GeneratedToken {
                token,
                file: path.to_path_buf(),
                created: false,
            }))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && generate => {
            if !create {
                return Ok(None);
            }
            let token = random_token();
            write_private(path, format!("{token}\n").as_bytes())?;
            Ok(Some(GeneratedToken {
                token,
                file: path.to_path_buf(),
                created: true,
            }))
        }
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}
