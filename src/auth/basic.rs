//! HTTP Basic authentication (RFC 7617), with the real agent's strictness and without its crash.
//!
//! `credentials` (what follows `Basic `) must be strict base64 (standard alphabet, canonical
//! padding, no whitespace) of at most [`MAX_DECODED_BYTES`] bytes of valid UTF-8 without control
//! characters, split on the FIRST `:` into a non-empty user-id and a non-empty password (a
//! password may contain `:`). Anything else is `auth.malformed`.
//!
//! Non-ASCII: user-ids and passwords are UTF-8 (RFC 7617 `charset="UTF-8"`), so non-ASCII
//! characters are legitimate and may form valid credentials; they are compared as bytes, without
//! Unicode normalization. The real agent answers them with a 500; here they are simply matched or
//! refused. Invalid UTF-8 is `auth.malformed`.
//!
//! An unknown user and a wrong password are the same rejection (`auth.invalid`) after the same
//! work: the user-id is compared by SHA-256 digest against every configured user, and when no user
//! matches, the password is verified against a decoy hash with the cost of the most expensive
//! configured argon2id hash. When any user has an argon2id hash, every well-formed attempt costs
//! exactly one argon2id verification (users with a plain password included), so timing tells
//! neither whether the user exists nor how its password is stored.

use std::fmt;

use base64::Engine as _;
use subtle::ConstantTimeEq;

use super::hash::PasswordHash;
use super::{AuthRejection, Principal, Scheme};
use crate::crypto::sha256;
use crate::reason;

/// Upper bound on the decoded `user-id:password`.
pub const MAX_DECODED_BYTES: usize = 4096;
/// Upper bound on a configured username (bytes).
pub const MAX_USERNAME_BYTES: usize = 128;
/// Longest base64 text that can decode to [`MAX_DECODED_BYTES`] (padded, 4 per 3 bytes).
const MAX_ENCODED_BYTES: usize = MAX_DECODED_BYTES.div_ceil(3) * 4;

const MALFORMED: AuthRejection = AuthRejection {
    reason: reason::AUTH_MALFORMED,
};
const INVALID: AuthRejection = AuthRejection {
    reason: reason::AUTH_INVALID,
};

/// How a user's password is known to the proxy.
pub enum PasswordSecret {
    /// An argon2id PHC string from `password_hash`.
    Phc(PasswordHash),
    /// The password itself, from `password_env`: kept only as its SHA-256 digest, compared in
    /// constant time.
    Plain(String),
}

impl fmt::Debug for PasswordSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PasswordSecret::Phc(h) => f.debug_tuple("Phc").field(h).finish(),
            PasswordSecret::Plain(_) => f.write_str("Plain(<redacted>)"),
        }
    }
}

#[derive(Debug)]
pub struct BasicUser {
    pub username: String,
    pub secret: PasswordSecret,
}

enum Secret {
    Phc(PasswordHash),
    Digest([u8; 32]),
}

struct Entry {
    username: String,
    username_digest: [u8; 32],
    secret: Secret,
}

pub struct BasicScheme {
    users: Vec<Entry>,
    /// The cost every attempt pays when some user has an argon2id hash.
    decoy: Option<PasswordHash>,
    /// Checks run (tests: which requests were checked).
    #[cfg(test)]
    pub(crate) checks: std::sync::atomic::AtomicUsize,
}

impl fmt::Debug for BasicScheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BasicScheme")
            .field(
                "users",
                &self.users.iter().map(|u| &u.username).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl BasicScheme {
    /// What a user's password is checked against, as a digest (the same policy entry gives
    /// the same one): a reload that keeps it keeps what a password proved under it.
    pub fn secret_id(&self, username: &str) -> Option<[u8; 32]> {
        let e = self.users.iter().find(|u| u.username == username)?;
        Some(match &e.secret {
            Secret::Phc(h) => h.fingerprint(),
            Secret::Digest(d) => crate::crypto::sha256(d),
        })
    }

    /// Usernames: 1 to 128 bytes, no control character, no `:` (RFC 7617), unique. Plain
    /// passwords: non-empty, at most 4096 bytes, no control character (they could never match).
    /// An empty list makes a scheme that refuses everyone (see [`BasicScheme::is_enabled`]).
    pub fn new(users: Vec<BasicUser>) -> Result<BasicScheme, String> {
        let mut entries: Vec<Entry> = Vec::with_capacity(users.len());
        for user in users {
            let name = user.username;
            if name.is_empty() || name.len() > MAX_USERNAME_BYTES {
                return Err(format!(
                    "basic username {name:?} must be 1 to {MAX_USERNAME_BYTES} bytes"
                ));
            }
            if name.chars().any(|c| c.is_control() || c == ':') {
                return Err(format!(
                    "basic username {name:?} must not contain ':' or control characters"
                ));
            }
            if entries.iter().any(|e| e.username == name) {
                return Err(format!("duplicate basic username {name:?}"));
            }
            let secret = match user.secret {
                PasswordSecret::Phc(h) => Secret::Phc(h),
                PasswordSecret::Plain(p) => {
                    if p.is_empty()
                        || p.len() > MAX_DECODED_BYTES
                        || p.chars().any(char::is_control)
                    {
                        return Err(format!(
                            "the password of basic user {name:?} must be 1 to \
                             {MAX_DECODED_BYTES} bytes without control characters"
                        ));
                    }
                    Secret::Digest(sha256(p.as_bytes()))
                }
            };
            entries.push(Entry {
                username_digest: sha256(name.as_bytes()),
                username: name,
                secret,
            });
        }
        // One cost for every hash: a user whose check is cheaper than the decoy's (what an
        // unknown user costs) would tell a guesser by its time that the user exists.
        let mut costs = entries.iter().filter_map(|e| match &e.secret {
            Secret::Phc(h) => Some((e.username.as_str(), h.cost())),
            Secret::Digest(_) => None,
        });
        if let Some((first, cost)) = costs.next() {
            if let Some((other, _)) = costs.find(|(_, c)| *c != cost) {
                return Err(format!(
                    "the password hashes of basic users {first:?} and {other:?} have different \
                     argon2id costs (m, t, p): every user's must be the same, or the time of a \
                     check tells which usernames exist (rehash with `a2a-edge hash-secret --argon2id`)"
                ));
            }
        }
        let decoy = entries
            .iter()
            .filter_map(|e| match &e.secret {
                Secret::Phc(h) => Some(h),
                Secret::Digest(_) => None,
            })
            .max_by_key(|h| h.work())
            .map(PasswordHash::decoy);
        Ok(BasicScheme {
            users: entries,
            decoy,
            #[cfg(test)]
            checks: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    pub fn is_enabled(&self) -> bool {
        !self.users.is_empty()
    }

    /// `credentials` is the base64 part after `Basic `. CPU- and memory-heavy when argon2id
    /// hashes are configured: the caller runs it in `spawn_blocking`.
    pub fn authenticate(&self, credentials: &str) -> Result<Principal, AuthRejection> {
        #[cfg(test)]
        self.checks
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let creds = parse_credentials(credentials)?;
        let (user, password) = (creds.user(), creds.password());
        let user_digest = sha256(user.as_bytes());
        let password_digest = sha256(password.as_bytes());

        // Every user is looked at, with no early exit.
        let mut found: Option<&Entry> = None;
        for entry in &self.users {
            if bool::from(entry.username_digest.ct_eq(&user_digest)) {
                found = Some(entry);
            }
        }

        // Exactly one argon2id verification whenever one is configured, whoever the user is.
        let argon_ok = match (found.map(|e| &e.secret), &self.decoy) {
            (Some(Secret::Phc(h)), _) => h.verify(password.as_bytes()),
            (_, Some(decoy)) => {
                std::hint::black_box(decoy.verify(password.as_bytes()));
                false
            }
            (_, None) => false,
        };
        // And exactly one digest comparison.
        let plain_ok = match found.map(|e| &e.secret) {
            Some(Secret::Digest(d)) => bool::from(d.ct_eq(&password_digest)),
            _ => {
                std::hint::black_box(bool::from([0u8; 32].ct_eq(&password_digest)));
                false
            }
        };

        match found {
            Some(entry) if argon_ok || plain_ok => {
                Ok(Principal::new(entry.username.clone(), Scheme::Basic))
            }
            _ => Err(INVALID),
        }
    }
}

/// The decoded `user-id:password`, split on the first `:`.
struct Credentials {
    text: String,
    colon: usize,
}

impl Credentials {
    fn user(&self) -> &str {
        &self.text[..self.colon]
    }

    fn password(&self) -> &str {
        &self.text[self.colon + 1..]
    }
}

/// Decodes and splits `credentials`; every failure is `auth.malformed`.
fn parse_credentials(credentials: &str) -> Result<Credentials, AuthRejection> {
    if credentials.is_empty() || credentials.len() > MAX_ENCODED_BYTES {
        return Err(MALFORMED);
    }
    // STANDARD: `+/` alphabet, canonical `=` padding required, no whitespace, no trailing bits.
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(credentials)
        .map_err(|_| MALFORMED)?;
    if bytes.len() > MAX_DECODED_BYTES {
        return Err(MALFORMED);
    }
    let text = String::from_utf8(bytes).map_err(|_| MALFORMED)?;
    if text.chars().any(char::is_control) {
        return Err(MALFORMED);
    }
    let colon = text.find(':').ok_or(MALFORMED)?;
    if colon == 0 || colon + 1 == text.len() {
        return Err(MALFORMED);
    }
    Ok(Credentials { text, colon })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From the reference implementation (`argon2` 20171227): password "pä:ss wörd", salt
    /// "somesaltsomesalt", `-id -t 2 -k 19456 -p 1 -l 32`.
    const REFERENCE_PHC: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$\
                                 9EuJhBLA7QomjWWQg8bvOywzANDvo/msZiZu7y+1Z3w";

    fn b64(raw: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(raw)
    }

    fn plain(name: &str, password: &str) -> BasicUser {
        BasicUser {
            username: name.into(),
            secret: PasswordSecret::Plain(password.into()),
        }
    }

    fn phc(name: &str, phc: &str) -> BasicUser {
        BasicUser {
            username: name.into(),
            secret: PasswordSecret::Phc(PasswordHash::parse(phc).unwrap()),
        }
    }

    fn check(scheme: &BasicScheme, cases: &[(String, Result<&str, &str>)]) {
        for (credentials, want) in cases {
            let got = scheme.authenticate(credentials);
            match (got, want) {
                (Ok(p), Ok(name)) => {
                    assert_eq!(p.name, *name, "{credentials:?}");
                    assert_eq!(p.scheme, Scheme::Basic);
                }
                (Err(r), Err(reason)) => assert_eq!(r.reason, *reason, "{credentials:?}"),
                (got, want) => panic!("{credentials:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    /// Plain passwords only: no argon2 work, so the big table stays fast.
    #[test]
    fn basic_table() {
        let scheme = BasicScheme::new(vec![
            plain("alice", "open sesame"),
            plain("jörg", "grüße:1"),
        ])
        .unwrap();
        let url_safe_source = b"alice:a??>~";
        let standard = b64(url_safe_source);
        assert!(
            standard.contains('/') || standard.contains('+'),
            "{standard}"
        );
        let url_safe = standard.replace('/', "_").replace('+', "-");
        let unpadded = b64(b"alice:open sesam");
        assert!(unpadded.ends_with('='), "{unpadded}");
        let at_limit = format!("alice:{}", "a".repeat(MAX_DECODED_BYTES - 6));
        let over_limit = format!("alice:{}", "a".repeat(MAX_DECODED_BYTES - 5));
        let cases: Vec<(String, Result<&str, &str>)> = vec![
            (b64(b"alice:open sesame"), Ok("alice")),
            // non-ASCII UTF-8 user and password, and a ':' inside the password
            (b64("jörg:grüße:1".as_bytes()), Ok("jörg")),
            (b64(b"alice:wrong"), Err("auth.invalid")),
            (b64(b"alice:open sesame:"), Err("auth.invalid")),
            (b64(b"alice:Open sesame"), Err("auth.invalid")),
            (b64(b"Alice:open sesame"), Err("auth.invalid")),
            (b64(b"bob:open sesame"), Err("auth.invalid")),
            (b64("jorg:grüße:1".as_bytes()), Err("auth.invalid")),
            // NFD "ö" is not the configured NFC "ö": no normalization
            (b64("jo\u{308}rg:grüße:1".as_bytes()), Err("auth.invalid")),
            (b64(at_limit.as_bytes()), Err("auth.invalid")),
            // base64
            (String::new(), Err("auth.malformed")),
            (
                format!(" {}", b64(b"alice:open sesame")),
                Err("auth.malformed"),
            ),
            (
                format!("{} ", b64(b"alice:open sesame")),
                Err("auth.malformed"),
            ),
            ("YWxpY2U6b3Bl bi BzZXNhbWU=".into(), Err("auth.malformed")),
            ("YWxpY2U6b3Bl\tbiBzZXNhbWU=".into(), Err("auth.malformed")),
            ("YWxpY2U6b3Bl\nbiBzZXNhbWU=".into(), Err("auth.malformed")),
            (
                unpadded.trim_end_matches('=').to_string(),
                Err("auth.malformed"),
            ),
            (format!("{unpadded}="), Err("auth.malformed")),
            (url_safe, Err("auth.malformed")),
            ("YTpiYx==".into(), Err("auth.malformed")), // non-zero trailing bits
            ("YTpi=YTpi".into(), Err("auth.malformed")),
            ("YTpi!".into(), Err("auth.malformed")),
            // shape
            (b64(b"alice"), Err("auth.malformed")),
            (b64(b":open sesame"), Err("auth.malformed")),
            (b64(b"alice:"), Err("auth.malformed")),
            (b64(b":"), Err("auth.malformed")),
            (b64(over_limit.as_bytes()), Err("auth.malformed")),
            ("A".repeat(MAX_ENCODED_BYTES + 4), Err("auth.malformed")),
            // invalid UTF-8: stray byte, truncated sequence, encoded surrogate, overlong
            (b64(b"alice:\xff\xfe"), Err("auth.malformed")),
            (b64(b"alice:gr\xc3"), Err("auth.malformed")),
            (b64(b"alice:\xed\xa0\x80"), Err("auth.malformed")),
            (b64(b"alice:\xc0\xba"), Err("auth.malformed")),
            (b64(b"\xe9:open sesame"), Err("auth.malformed")),
            // control characters: C0, DEL, C1, NUL
            (b64(b"alice:open\tsesame"), Err("auth.malformed")),
            (b64(b"alice:open sesame\r\n"), Err("auth.malformed")),
            (b64(b"alice:open sesame\x7f"), Err("auth.malformed")),
            (
                b64("alice:open sesame\u{85}".as_bytes()),
                Err("auth.malformed"),
            ),
            (b64(b"ali\0ce:open sesame"), Err("auth.malformed")),
        ];
        check(&scheme, &cases);
        assert!(scheme.decoy.is_none());
    }

    /// argon2id users: a handful of verifications (each costs one argon2id run).
    #[test]
    fn basic_argon2id() {
        let scheme = BasicScheme::new(vec![
            phc("carol", REFERENCE_PHC),
            plain("alice", "open sesame"),
        ])
        .unwrap();
        let cases: Vec<(String, Result<&str, &str>)> = vec![
            (b64("carol:pä:ss wörd".as_bytes()), Ok("carol")),
            (b64("carol:pa:ss word".as_bytes()), Err("auth.invalid")),
            (b64("mallory:pä:ss wörd".as_bytes()), Err("auth.invalid")),
            (b64(b"alice:open sesame"), Ok("alice")),
        ];
        check(&scheme, &cases);
    }

    #[test]
    fn the_decoy_costs_what_every_hash_costs_and_costs_must_agree() {
        let strong = "$argon2id$v=19$m=47104,t=3,p=1$c29tZXNhbHRzb21lc2FsdA$\
                      9EuJhBLA7QomjWWQg8bvOywzANDvo/msZiZu7y+1Z3w";
        let scheme = BasicScheme::new(vec![
            phc("dave", strong),
            phc("erin", strong),
            plain("alice", "x"),
        ])
        .unwrap();
        let decoy = scheme.decoy.as_ref().unwrap();
        assert_eq!(decoy.work(), 47_104 * 3);
        assert!(BasicScheme::new(vec![]).is_ok_and(|s| !s.is_enabled()));
        // A cheaper hash beside a dearer one: its user's check would be told apart from an
        // unknown user's (the decoy's) by its time.
        let err = BasicScheme::new(vec![
            phc("carol", REFERENCE_PHC),
            phc("dave", strong),
            plain("alice", "x"),
        ])
        .unwrap_err();
        assert!(
            err.contains("\"carol\"") && err.contains("\"dave\""),
            "{err}"
        );
    }

    #[test]
    fn new_rules() {
        let max = "u".repeat(MAX_USERNAME_BYTES);
        let long = "u".repeat(MAX_USERNAME_BYTES + 1);
        assert!(BasicScheme::new(vec![plain(&max, "p"), plain("jörg", "p")]).is_ok());
        assert!(BasicScheme::new(vec![plain("a b", "p:q")]).is_ok());
        let bad: Vec<Vec<BasicUser>> = vec![
            vec![plain("", "p")],
            vec![plain(&long, "p")],
            vec![plain("a:b", "p")],
            vec![plain("a\tb", "p")],
            vec![plain("a\u{85}b", "p")],
            vec![plain("alice", "p"), plain("alice", "q")],
            vec![plain("alice", "")],
            vec![plain("alice", "p\n")],
            vec![plain("alice", &"p".repeat(MAX_DECODED_BYTES + 1))],
        ];
        for users in bad {
            let shown = format!("{users:?}");
            assert!(BasicScheme::new(users).is_err(), "{shown}");
        }
        // Debug never shows a plain password.
        let shown = format!("{:?}", plain("alice", "hunter2"));
        assert!(!shown.contains("hunter2"), "{shown}");
    }
}
