//! `a2a-edge card sign|verify|jwks`: sign an Agent Card, verify one (from a file or over
//! HTTPS), print the public JWKS of a signing key.
//!
//! Secrets are read from environment variables named on the command line, never from argv
//! values (argv is visible to every local user in `ps`).

mod fetch;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{json, Value};

use super::jws::{sign_card, SignOptions};
use super::keys::{SigningAlg, SigningKey};
use super::verify::{verify_card, Verdict, VerifyKeys};

const USAGE: &str = "\
a2a-edge card: sign and verify Agent Card signatures (detached JWS, A2A spec §8.4)

USAGE:
  a2a-edge card sign --in FILE|- [--out FILE] --kid KID
                     (--secret-env NAME | --key-file PEM --alg ES256|RS256|EdDSA)
                     [--jku URL | --jku-null]
  a2a-edge card verify (--in FILE|- | --url URL) [--ca-file PEM]
                     [--secret KID=ENVNAME]... [--jwks FILE] [--jwks-url URL]
  a2a-edge card jwks --key-file PEM --alg ES256|RS256|EdDSA --kid KID

  sign      adds (or, for the same kid, replaces) a signature over the card's canonical
            form and writes the card to --out (default: standard output). --secret-env
            names the environment variable holding the HS256 secret. --jku-null writes
            \"jku\":null into the header, as iac-code does. Members outside the
            AgentCard schema are kept but not signed: a warning names them.
  verify    prints the verdict: valid, unsigned, missing-signature, malformed-signature,
            unsupported-algorithm, missing-key, unknown-key, ambiguous-key,
            signature-mismatch. Exit status 0 only for valid, 1 otherwise.
            --secret KID=ENVNAME trusts the HS256 secret in ENVNAME for KID (repeatable);
            --jwks / --jwks-url trust the keys of a JWKS. The card's own jku is never
            followed: a card cannot name the key that vouches for it.
  jwks      prints {\"keys\":[<public JWK>]} for /.well-known/jwks.json.

  URLs must be https:// (trusting --ca-file, else the system roots); http:// is allowed
  only to 127.0.0.1, localhost and [::1], for tests. Fetches time out after 5 s, accept
  only a 200 response and at most 1 MiB, and follow no redirects.
  Exit status 2: usage error.
";

/// Largest card or JWKS file read (as for fetches).
const MAX_INPUT: u64 = 1024 * 1024;

/// Runs `a2a-edge card ...` (`args` starts after `card`). `Ok` carries the exit status
/// (0 success or valid, 1 any other verdict, 2 usage error, already reported on stderr);
/// `Err` is an operational failure (unreadable file, fetch error, bad key) for the caller
/// to print, exiting 1.
pub fn run(args: &[String]) -> Result<ExitCode, String> {
    let env = |name: &str| std::env::var_os(name).map(|v| v.into_encoded_bytes());
    let code = run_with(args, &env, &mut std::io::stdout().lock())?;
    Ok(ExitCode::from(code))
}

type Env<'a> = &'a dyn Fn(&str) -> Option<Vec<u8>>;

fn run_with(args: &[String], env: Env<'_>, out: &mut dyn Write) -> Result<u8, String> {
    // `card sign --help` and the like: the usage, exit 0 (nothing else on the line runs).
    if args.iter().skip(1).any(|a| a == "--help" || a == "-h") {
        write!(out, "{USAGE}").map_err(|e| e.to_string())?;
        return Ok(0);
    }
    let result = match args.first().map(String::as_str) {
        Some("sign") => Opts::parse(&args[1..]).and_then(|o| sign(o, env, out)),
        Some("verify") => Opts::parse(&args[1..]).and_then(|o| verify(o, env, out)),
        Some("jwks") => Opts::parse(&args[1..]).and_then(|o| jwks(o, out)),
        Some("--help" | "-h" | "help") => {
            write!(out, "{USAGE}").map_err(|e| e.to_string())?;
            return Ok(0);
        }
        Some(other) => Err(Failure::Usage(format!("unknown card command {other:?}"))),
        None => Err(Failure::Usage("a card command is needed".into())),
    };
    match result {
        Ok(code) => Ok(code),
        Err(Failure::Usage(msg)) => {
            eprintln!("a2a-edge card: {msg}\n\n{USAGE}");
            Ok(2)
        }
        Err(Failure::Run(msg)) => Err(msg),
    }
}

enum Failure {
    Usage(String),
    Run(String),
}

fn usage(msg: impl Into<String>) -> Failure {
    Failure::Usage(msg.into())
}

fn run_err(msg: impl Into<String>) -> Failure {
    Failure::Run(msg.into())
}

#[derive(Default)]
struct Opts {
    input: Option<String>,
    out: Option<PathBuf>,
    url: Option<String>,
    ca_file: Option<PathBuf>,
    kid: Option<String>,
    secret_env: Option<String>,
    key_file: Option<PathBuf>,
    alg: Option<SigningAlg>,
    jku: Option<String>,
    jku_null: bool,
    secrets: Vec<(String, String)>,
    jwks: Option<PathBuf>,
    jwks_url: Option<String>,
}

impl Opts {
    fn parse(args: &[String]) -> Result<Opts, Failure> {
        fn once<T>(slot: &mut Option<T>, name: &str, v: T) -> Result<(), Failure> {
            if slot.replace(v).is_some() {
                return Err(usage(format!("{name} is given twice")));
            }
            Ok(())
        }
        let mut o = Opts::default();
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            if flag == "--jku-null" {
                o.jku_null = true;
                continue;
            }
            const TAKES_VALUE: [&str; 12] = [
                "--in",
                "--out",
                "--url",
                "--ca-file",
                "--kid",
                "--secret-env",
                "--key-file",
                "--alg",
                "--jku",
                "--jwks",
                "--jwks-url",
                "--secret",
            ];
            if !TAKES_VALUE.contains(&flag.as_str()) {
                return Err(usage(format!("unknown option {flag:?}")));
            }
            let value = it
                .next()
                .cloned()
                .ok_or_else(|| usage(format!("{flag} needs a value")))?;
            match flag.as_str() {
                "--in" => once(&mut o.input, flag, value)?,
                "--out" => once(&mut o.out, flag, PathBuf::from(value))?,
                "--url" => once(&mut o.url, flag, value)?,
                "--ca-file" => once(&mut o.ca_file, flag, PathBuf::from(value))?,
                "--kid" => once(&mut o.kid, flag, value)?,
                "--secret-env" => once(&mut o.secret_env, flag, value)?,
                "--key-file" => once(&mut o.key_file, flag, PathBuf::from(value))?,
                "--alg" => {
                    let alg = SigningAlg::parse(&value)
                        .ok_or_else(|| usage(format!("unknown --alg {value:?}")))?;
                    once(&mut o.alg, flag, alg)?
                }
                "--jku" => once(&mut o.jku, flag, value)?,
                "--jwks" => once(&mut o.jwks, flag, PathBuf::from(value))?,
                "--jwks-url" => once(&mut o.jwks_url, flag, value)?,
                "--secret" => {
                    let (kid, var) = value
                        .split_once('=')
                        .filter(|(k, v)| !k.is_empty() && !v.is_empty())
                        .ok_or_else(|| usage("--secret takes KID=ENVNAME"))?;
                    o.secrets.push((kid.to_string(), var.to_string()));
                }
                other => return Err(usage(format!("unknown option {other:?}"))),
            }
        }
        Ok(o)
    }

    /// Refuses options the command does not take, so a typo never goes unnoticed.
    fn only(&self, allowed: &[&str]) -> Result<(), Failure> {
        let given = [
            ("--in", self.input.is_some()),
            ("--out", self.out.is_some()),
            ("--url", self.url.is_some()),
            ("--ca-file", self.ca_file.is_some()),
            ("--kid", self.kid.is_some()),
            ("--secret-env", self.secret_env.is_some()),
            ("--key-file", self.key_file.is_some()),
            ("--alg", self.alg.is_some()),
            ("--jku", self.jku.is_some()),
            ("--jku-null", self.jku_null),
            ("--secret", !self.secrets.is_empty()),
            ("--jwks", self.jwks.is_some()),
            ("--jwks-url", self.jwks_url.is_some()),
        ];
        match given.iter().find(|(n, set)| *set && !allowed.contains(n)) {
            Some((name, _)) => Err(usage(format!("{name} does not apply here"))),
            None => Ok(()),
        }
    }

    /// The signing key from --secret-env or --key-file/--alg, with --kid.
    fn signing_key(&self, env: Env<'_>) -> Result<SigningKey, Failure> {
        let kid = self
            .kid
            .as_deref()
            .ok_or_else(|| usage("--kid is needed"))?;
        match (&self.secret_env, &self.key_file, self.alg) {
            (Some(var), None, None | Some(SigningAlg::HS256)) => {
                let secret = env(var).filter(|s| !s.is_empty()).ok_or_else(|| {
                    run_err(format!("the environment variable {var} is unset or empty"))
                })?;
                if secret.len() < 32 {
                    // Allowed for interop with existing iac-code secrets, but weak.
                    eprintln!(
                        "a2a-edge card: warning: the HS256 secret is shorter than 32 bytes (RFC 7518 §3.2)"
                    );
                }
                SigningKey::hs256(kid, &secret).map_err(|e| run_err(e.0))
            }
            (None, Some(file), Some(alg)) if alg != SigningAlg::HS256 => {
                // A key file is held to the rule `serve` holds a card's key to (mode & 027
                // refused); standard input is the caller's to guard.
                let pem = if file == Path::new("-") {
                    read_limited(file)?
                } else {
                    crate::crypto::read_private_key(file).map_err(run_err)?
                };
                SigningKey::from_private_pem(kid, alg, &pem).map_err(|e| run_err(e.0))
            }
            _ => Err(usage(
                "give either --secret-env NAME, or --key-file PEM with --alg ES256|RS256|EdDSA",
            )),
        }
    }
}

fn sign(o: Opts, env: Env<'_>, out: &mut dyn Write) -> Result<u8, Failure> {
    o.only(&[
        "--in",
        "--out",
        "--kid",
        "--secret-env",
        "--key-file",
        "--alg",
        "--jku",
        "--jku-null",
    ])?;
    let input = o
        .input
        .as_deref()
        .ok_or_else(|| usage("--in FILE|- is needed"))?;
    if o.jku.is_some() && o.jku_null {
        return Err(usage("--jku and --jku-null exclude each other"));
    }
    let key = o.signing_key(env)?;
    let mut card = read_json(input)?;
    // Members outside the AgentCard schema are outside the signature too: anyone between the
    // agent and a verifier could change them (and the edge does not serve them as the card has
    // them).
    let mut names = card.clone();
    if super::to_json_names(&mut names).is_ok() {
        if let Value::Object(o) = &names {
            // (the signatures themselves, outside what they sign by nature, are no news)
            let unsigned = super::canonical::unknown_members(o, &["signatures"]);
            if !unsigned.is_empty() {
                eprintln!(
                    "a2a-edge card: warning: not covered by the signature (not AgentCard members): {}",
                    unsigned.join(", ")
                );
            }
        }
    }
    let options = SignOptions {
        jku: o.jku.clone(),
        jku_null: o.jku_null,
    };
    sign_card(&mut card, &key, &options).map_err(|e| run_err(format!("cannot sign: {e}")))?;
    let text = format!("{card}\n");
    match &o.out {
        Some(path) => std::fs::write(path, text)
            .map_err(|e| run_err(format!("cannot write {}: {e}", path.display())))?,
        None => out
            .write_all(text.as_bytes())
            .map_err(|e| run_err(e.to_string()))?,
    }
    Ok(0)
}

fn verify(o: Opts, env: Env<'_>, out: &mut dyn Write) -> Result<u8, Failure> {
    o.only(&[
        "--in",
        "--url",
        "--ca-file",
        "--secret",
        "--jwks",
        "--jwks-url",
    ])?;
    let mut keys = VerifyKeys::new();
    for (kid, var) in &o.secrets {
        let secret = env(var)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| run_err(format!("the environment variable {var} is unset or empty")))?;
        keys.add_secret(kid, &secret);
    }
    let ca = o.ca_file.as_deref();
    if let Some(file) = &o.jwks {
        let jwks = read_json(&file.to_string_lossy())?;
        keys.add_jwks(&jwks)
            .map_err(|e| run_err(format!("{}: {e}", file.display())))?;
    }
    if let Some(url) = &o.jwks_url {
        let jwks = fetch::fetch_json(url, ca, fetch::TIMEOUT).map_err(run_err)?;
        keys.add_jwks(&jwks)
            .map_err(|e| run_err(format!("{url}: {e}")))?;
    }
    let card = match (&o.input, &o.url) {
        (Some(input), None) => read_json(input)?,
        (None, Some(url)) => fetch::fetch_json(url, ca, fetch::TIMEOUT).map_err(run_err)?,
        _ => return Err(usage("give exactly one of --in FILE|- and --url URL")),
    };
    let verdict = verify_card(&card, &keys);
    writeln!(out, "{verdict}").map_err(|e| run_err(e.to_string()))?;
    // Whether it is an A2A 1.0 AgentCard, as the edge checks what it publishes: reported
    // beside the signature verdict (the exit status is the signature's).
    for line in schema_report(&card) {
        eprintln!("a2a-edge card: {line}");
    }
    if let Verdict::Valid { kid } = &verdict {
        eprintln!("a2a-edge card: signature by kid {kid:?} verified");
        return Ok(0);
    }
    Ok(1)
}

/// What the edge would make of `card` (without the rewrite): checked by JSON names, as the
/// edge reads it (`documentation_url` is `documentationUrl`; a member named both ways is
/// refused), after an incomplete `provider` is dropped.
fn schema_report(card: &Value) -> Vec<String> {
    let mut lines = Vec::new();
    let mut probe = card.clone();
    let named = super::to_json_names(&mut probe).map_err(|e| super::schema::Invalid(e.0));
    if super::schema::repair(&mut probe) {
        lines.push("its provider lacks url or organization; the edge would drop it".into());
    }
    lines.push(match named.and_then(|()| super::schema::check(&probe)) {
        Ok(()) => "an A2A 1.0 AgentCard".into(),
        Err(e) => format!("card.invalid: {e} (the edge would not publish it)"),
    });
    lines
}

fn jwks(o: Opts, out: &mut dyn Write) -> Result<u8, Failure> {
    o.only(&["--key-file", "--alg", "--kid"])?;
    if o.key_file.is_none() {
        return Err(usage(
            "--key-file PEM is needed (HS256 secrets are never published)",
        ));
    }
    let no_env = |_: &str| None;
    let key = o.signing_key(&no_env)?;
    let jwk = key
        .public_jwk()
        .ok_or_else(|| usage("HS256 secrets are never published"))?;
    writeln!(out, "{}", json!({ "keys": [jwk] })).map_err(|e| run_err(e.to_string()))?;
    Ok(0)
}

/// Reads a file (or standard input for `-`), at most [`MAX_INPUT`] bytes.
fn read_limited(path: &Path) -> Result<Vec<u8>, Failure> {
    let mut buf = Vec::new();
    let what = path.display();
    let n = if path == Path::new("-") {
        std::io::stdin()
            .lock()
            .take(MAX_INPUT + 1)
            .read_to_end(&mut buf)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(MAX_INPUT + 1).read_to_end(&mut buf))
    }
    .map_err(|e| run_err(format!("cannot read {what}: {e}")))?;
    if n as u64 > MAX_INPUT {
        return Err(run_err(format!("{what} is larger than 1 MiB")));
    }
    Ok(buf)
}

fn read_json(path: &str) -> Result<Value, Failure> {
    let bytes = read_limited(Path::new(path))?;
    serde_json::from_slice(&bytes).map_err(|e| run_err(format!("{path} is not JSON: {e}")))
}

#[cfg(test)]
mod tests;
