//! Secret hashing: what `a2a-edge hash-secret` prints for a policy, and the verification side.
//!
//! Tokens and API keys are high-entropy secrets: a SHA-256 digest is enough and keeps every
//! check cheap. Passwords are low-entropy: they are stored as argon2id PHC strings.
//!
//! Only argon2id, version 0x13 (19), is accepted for verification. argon2i and argon2d are
//! refused (argon2id is the variant RFC 9106 and OWASP recommend; a policy that carries another
//! one was made by a tool we do not control and should be re-hashed), and so is bcrypt, scrypt or
//! anything else. The cost parameters must sit between a floor (OWASP's weakest recommended
//! configuration) and a cap (a policy file must not turn every login attempt into a denial of
//! service): see [`MIN_M_COST_KIB`], [`MIN_WORK_KIB`], [`MAX_M_COST_KIB`], [`MAX_T_COST`],
//! [`MAX_P_COST`].

use std::fmt::{self, Write as _};

use argon2::password_hash::{self, PasswordHasher, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use ring::rand::SecureRandom;
use subtle::ConstantTimeEq;

use crate::crypto::sha256;

/// The cost [`argon2id_phc`] uses: OWASP's recommendation (m = 19 MiB, t = 2, p = 1).
pub const DEFAULT_M_COST_KIB: u32 = 19_456;
pub const DEFAULT_T_COST: u32 = 2;
pub const DEFAULT_P_COST: u32 = 1;

/// Smallest memory cost accepted (KiB): OWASP's lowest configuration, m = 7 MiB with t = 5.
pub const MIN_M_COST_KIB: u32 = 7_168;
/// Smallest `m × t` accepted (KiB passes): the weakest of OWASP's equivalent configurations
/// (m = 7168 KiB, t = 5). m = 19456 with t = 2 gives 38912; m = 47104 with t = 1 gives 47104.
pub const MIN_WORK_KIB: u64 = 35_840;
/// Largest memory cost accepted (KiB): 256 MiB per verification is already a lot per request.
pub const MAX_M_COST_KIB: u32 = 262_144;
/// Largest number of passes accepted.
pub const MAX_T_COST: u32 = 10;
/// Largest parallelism accepted (lanes; computed sequentially here, so only a bound on shape).
pub const MAX_P_COST: u32 = 16;
/// Salt length bounds (decoded bytes): RFC 9106 allows 8, recommends 16; PHC caps at 48.
pub const MIN_SALT_BYTES: usize = 8;
/// Hash output length bounds (decoded bytes).
pub const MIN_OUTPUT_BYTES: usize = 16;
pub const MAX_OUTPUT_BYTES: usize = 64;
/// Longest PHC string considered (a maximal argon2id string is well under 200 characters).
const MAX_PHC_LEN: usize = 512;

/// Lowercase hexadecimal SHA-256 of `secret`: the `token_sha256` / `key_sha256` policy values.
pub fn sha256_hex(secret: &[u8]) -> String {
    sha256(secret)
        .iter()
        .fold(String::with_capacity(64), |mut out, b| {
            // Writing to a String cannot fail.
            let _ = write!(out, "{b:02x}");
            out
        })
}

/// An argon2id PHC string for `password` with OWASP's recommended cost (m = 19456 KiB, t = 2,
/// p = 1), a random 16-byte salt and a 32-byte output: the `password_hash` policy value.
pub fn argon2id_phc(password: &[u8]) -> Result<String, String> {
    let mut salt = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut salt)
        .map_err(|_| "the system random number generator is unavailable".to_string())?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| format!("salt: {e}"))?;
    let params = Params::new(
        DEFAULT_M_COST_KIB,
        DEFAULT_T_COST,
        DEFAULT_P_COST,
        Some(Params::DEFAULT_OUTPUT_LEN),
    )
    .map_err(|e| format!("argon2 parameters: {e}"))?;
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
        .hash_password(password, &salt)
        .map(|h| h.to_string())
        .map_err(|e| format!("argon2: {e}"))
}

/// A parsed argon2id PHC string, ready to verify passwords against.
#[derive(Clone)]
pub struct PasswordHash {
    params: Params,
    salt: Vec<u8>,
    hash: Vec<u8>,
}

impl fmt::Debug for PasswordHash {
    /// Shows the cost, never the salt or the hash.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PasswordHash")
            .field("m_cost", &self.params.m_cost())
            .field("t_cost", &self.params.t_cost())
            .field("p_cost", &self.params.p_cost())
            .finish_non_exhaustive()
    }
}

impl PasswordHash {
    /// A digest of the salt and hash: equal for the same PHC string, never the hash itself.
    pub fn fingerprint(&self) -> [u8; 32] {
        let mut bytes = Vec::with_capacity(16 + self.salt.len() + self.hash.len());
        bytes.extend_from_slice(&(self.salt.len() as u64).to_be_bytes());
        bytes.extend_from_slice(&self.salt);
        bytes.extend_from_slice(&self.hash);
        crate::crypto::sha256(&bytes)
    }

    /// Parses `$argon2id$v=19$m=<KiB>,t=<passes>,p=<lanes>$<salt>$<hash>`, refusing any other
    /// algorithm or version, `keyid`/`data` parameters, and a cost outside the floor and cap.
    /// The message says what is wrong for the operator, never the hash.
    pub fn parse(phc: &str) -> Result<PasswordHash, String> {
        if phc.len() > MAX_PHC_LEN {
            return Err("password hash is too long to be an argon2id PHC string".into());
        }
        let parsed = password_hash::PasswordHash::new(phc)
            .map_err(|e| format!("not a PHC password hash string ({e})"))?;
        if parsed.algorithm.as_str() != "argon2id" {
            return Err(format!(
                "password hash algorithm {:?} is not accepted: only argon2id",
                parsed.algorithm.as_str()
            ));
        }
        if parsed.version != Some(0x13) {
            return Err("argon2id password hash must state version v=19".into());
        }
        let (mut m, mut t, mut p) = (None, None, None);
        for (name, value) in parsed.params.iter() {
            let slot = match name.as_str() {
                "m" => &mut m,
                "t" => &mut t,
                "p" => &mut p,
                other => {
                    return Err(format!(
                        "argon2id parameter {other:?} is not accepted (only m, t and p)"
                    ))
                }
            };
            let v = value
                .decimal()
                .map_err(|_| format!("argon2id parameter {:?} is not a number", name.as_str()))?;
            if slot.replace(v).is_some() {
                return Err(format!(
                    "argon2id parameter {:?} is given twice",
                    name.as_str()
                ));
            }
        }
        let (Some(m), Some(t), Some(p)) = (m, t, p) else {
            return Err("argon2id password hash must state m, t and p".into());
        };
        check_cost(m, t, p)?;
        let salt = parsed
            .salt
            .ok_or_else(|| "argon2id password hash has no salt".to_string())?;
        let mut salt_buf = [0u8; 64];
        let salt = salt
            .decode_b64(&mut salt_buf)
            .map_err(|_| "argon2id salt is not valid base64".to_string())?;
        if salt.len() < MIN_SALT_BYTES {
            return Err(format!(
                "argon2id salt is shorter than {MIN_SALT_BYTES} bytes"
            ));
        }
        let hash = parsed
            .hash
            .ok_or_else(|| "argon2id password hash has no hash value".to_string())?;
        let hash = hash.as_bytes();
        if !(MIN_OUTPUT_BYTES..=MAX_OUTPUT_BYTES).contains(&hash.len()) {
            return Err(format!(
                "argon2id hash value must be {MIN_OUTPUT_BYTES} to {MAX_OUTPUT_BYTES} bytes"
            ));
        }
        let params = Params::new(m, t, p, Some(hash.len()))
            .map_err(|e| format!("argon2id parameters: {e}"))?;
        Ok(PasswordHash {
            params,
            salt: salt.to_vec(),
            hash: hash.to_vec(),
        })
    }

    /// Whether `password` hashes to this value. CPU- and memory-heavy (the configured cost):
    /// call it off the async executor. The final comparison is constant-time.
    pub fn verify(&self, password: &[u8]) -> bool {
        let mut out = vec![0u8; self.hash.len()];
        let argon = Argon2::new(Algorithm::Argon2id, Version::V0x13, self.params.clone());
        if argon
            .hash_password_into(password, &self.salt, &mut out)
            .is_err()
        {
            return false;
        }
        bool::from(out.ct_eq(&self.hash))
    }

    /// `m × t`, the figure that decides how long a verification takes.
    pub fn work(&self) -> u64 {
        u64::from(self.params.m_cost()) * u64::from(self.params.t_cost())
    }

    /// The cost `(m, t, p)`.
    pub fn cost(&self) -> (u32, u32, u32) {
        (
            self.params.m_cost(),
            self.params.t_cost(),
            self.params.p_cost(),
        )
    }

    /// A hash with the same cost, salt length and output length that no password matches in
    /// practice: verifying against it costs what verifying against `self` costs.
    pub fn decoy(&self) -> PasswordHash {
        PasswordHash {
            params: self.params.clone(),
            salt: vec![0u8; self.salt.len()],
            hash: vec![0u8; self.hash.len()],
        }
    }
}

fn check_cost(m: u32, t: u32, p: u32) -> Result<(), String> {
    if !(1..=MAX_P_COST).contains(&p) {
        return Err(format!("argon2id p must be 1 to {MAX_P_COST}"));
    }
    if t == 0 || t > MAX_T_COST {
        return Err(format!("argon2id t must be 1 to {MAX_T_COST}"));
    }
    if m > MAX_M_COST_KIB {
        return Err(format!(
            "argon2id m = {m} KiB is above the cap of {MAX_M_COST_KIB} KiB"
        ));
    }
    if m < MIN_M_COST_KIB || u64::from(m) * u64::from(t) < MIN_WORK_KIB {
        return Err(format!(
            "argon2id cost m = {m} KiB, t = {t} is too weak: at least m = {MIN_M_COST_KIB} KiB \
             and m × t = {MIN_WORK_KIB} (e.g. m = {DEFAULT_M_COST_KIB}, t = {DEFAULT_T_COST})"
        ));
    }
    Ok(())
}

/// The principal of the entry whose digest is `digest` (SHA-256 of a token or key), each
/// entry compared in constant time and none skipped, so timing says nothing about which
/// entry (if any) matched.
pub fn principal_by_digest<'a>(
    entries: &'a [(String, [u8; 32])],
    digest: &[u8; 32],
) -> Option<&'a str> {
    use subtle::ConstantTimeEq;
    let mut found: Option<&str> = None;
    for (principal, expected) in entries {
        if bool::from(digest.ct_eq(expected)) {
            found = Some(principal);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_hex_known_value() {
        assert_eq!(
            sha256_hex(b"test"),
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
        );
        assert_eq!(sha256_hex(b"").len(), 64);
    }

    #[test]
    fn argon2id_round_trip() {
        let phc = argon2id_phc("pässword:1".as_bytes()).unwrap();
        assert!(phc.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{phc}");
        let h = PasswordHash::parse(&phc).unwrap();
        assert!(h.verify("pässword:1".as_bytes()));
        assert!(!h.verify(b"password:1"));
        assert!(!h.decoy().verify("pässword:1".as_bytes()));
        assert_eq!(h.work(), 38_912);
        // Salts are random: two hashes of one password differ.
        assert_ne!(phc, argon2id_phc("pässword:1".as_bytes()).unwrap());
        // Debug never shows the salt or the hash.
        let shown = format!("{h:?}");
        let salt_b64 = phc.split('$').nth(4).unwrap();
        assert!(!shown.contains(salt_b64), "{shown}");
    }

    #[test]
    fn phc_refusals() {
        const SALT: &str = "c29tZXNhbHRzb21lc2FsdA"; // "somesaltsomesalt"
        const HASH: &str = "ZmFrZWhhc2hmYWtlaGFzaGZha2VoYXNoZmFrZWhhc2g"; // 32 bytes
        let phc =
            |alg: &str, ver: &str, params: &str| format!("${alg}${ver}${params}${SALT}${HASH}");
        // Accepted shapes (parsing only: no argon2 work here).
        for ok in [
            phc("argon2id", "v=19", "m=19456,t=2,p=1"),
            phc("argon2id", "v=19", "m=47104,t=1,p=1"),
            phc("argon2id", "v=19", "m=7168,t=5,p=1"),
            phc("argon2id", "v=19", "m=262144,t=10,p=16"),
            format!("$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHQ${HASH}"), // 8-byte salt
        ] {
            assert!(PasswordHash::parse(&ok).is_ok(), "{ok}");
        }
        let long = "a".repeat(600);
        let cases = [
            phc("argon2i", "v=19", "m=19456,t=2,p=1"),
            phc("argon2d", "v=19", "m=19456,t=2,p=1"),
            phc("argon2id", "v=16", "m=19456,t=2,p=1"),
            format!("$argon2id$m=19456,t=2,p=1${SALT}${HASH}"), // no version
            "$2b$12$R9h/cIPz0gi.URNNX3kh2OPST9/PgBkqquzi.Ss7KIUgO2t0jWMUW".to_string(),
            "$scrypt$ln=15,r=8,p=1$c29tZXNhbHQ$ZmFrZWhhc2hmYWtlaGFzaA".to_string(),
            "$pbkdf2-sha256$29000$c29tZXNhbHQ$ZmFrZWhhc2hmYWtlaGFzaA".to_string(),
            String::new(),
            "garbage".to_string(),
            "$argon2id$".to_string(),
            long,
            // too weak
            phc("argon2id", "v=19", "m=4096,t=3,p=1"),
            phc("argon2id", "v=19", "m=19456,t=1,p=1"),
            phc("argon2id", "v=19", "m=7168,t=4,p=1"),
            phc("argon2id", "v=19", "m=6144,t=10,p=1"),
            // too expensive
            phc("argon2id", "v=19", "m=262145,t=2,p=1"),
            phc("argon2id", "v=19", "m=4194304,t=2,p=1"),
            phc("argon2id", "v=19", "m=19456,t=11,p=1"),
            phc("argon2id", "v=19", "m=19456,t=4294967295,p=1"),
            phc("argon2id", "v=19", "m=19456,t=2,p=17"),
            phc("argon2id", "v=19", "m=19456,t=2,p=0"),
            // malformed parameters
            phc("argon2id", "v=19", "m=19456,t=2"),
            phc("argon2id", "v=19", "m=19456,t=2,p=1,keyid=AAAA"),
            phc("argon2id", "v=19", "m=19456,t=2,p=1,x=1"),
            phc("argon2id", "v=19", "m=19456,m=19456,t=2,p=1"),
            phc("argon2id", "v=19", "m=abc,t=2,p=1"),
            phc("argon2id", "v=19", "m=-1,t=2,p=1"),
            // salt and hash
            format!("$argon2id$v=19$m=19456,t=2,p=1${SALT}"),
            format!("$argon2id$v=19$m=19456,t=2,p=1$c29tZQ${HASH}"), // 4-byte salt
            format!("$argon2id$v=19$m=19456,t=2,p=1${SALT}$ZmFrZWhhc2hmYWtl"), // 12-byte hash
            format!("$argon2id$v=19$m=19456,t=2,p=1${SALT}${HASH}="),
            format!("$argon2id$v=19$m=19456,t=2,p=1${SALT}${HASH}$extra"),
            format!("$argon2id$v=19$m=19456,t=2,p=1$c29t!ZXNhbHQ${HASH}"),
        ];
        for bad in &cases {
            assert!(PasswordHash::parse(bad).is_err(), "accepted {bad:?}");
        }
        let weak = PasswordHash::parse(&phc("argon2id", "v=19", "m=4096,t=3,p=1")).unwrap_err();
        assert!(weak.contains("too weak"), "{weak}");
        let i = PasswordHash::parse(&phc("argon2i", "v=19", "m=19456,t=2,p=1")).unwrap_err();
        assert!(i.contains("only argon2id"), "{i}");
    }
}
