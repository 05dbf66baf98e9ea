use std::collections::HashMap;

use super::*;
use crate::card::canonical::tests::tiny_card;
use crate::card::keys::tests::generated_pem;
use crate::validate::workspace::testdir::TestDir;

const WORKED_SIGNATURE: &str = "hTbnUvSkAFFQ2NTkMszqR_H7E8iwhpybvt5_P4NaTAg";
const WORKED_PROTECTED: &str =
    "eyJhbGciOiJIUzI1NiIsImprdSI6bnVsbCwia2lkIjoiazEiLCJ0eXAiOiJKT1NFIn0";

/// A fresh directory for one test's files (keys among them), removed when the test ends.
pub(super) fn tmp_dir() -> TestDir {
    TestDir::new("card-cli")
}

/// Runs the command with a fake environment; returns the exit status (or the error) and
/// what went to standard output.
pub(super) fn cli(args: &[&str], env: &[(&str, &str)]) -> (Result<u8, String>, String) {
    let vars: HashMap<String, Vec<u8>> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
        .collect();
    let lookup = move |name: &str| vars.get(name).cloned();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let mut out = Vec::new();
    let code = run_with(&args, &lookup, &mut out);
    (code, String::from_utf8(out).unwrap())
}

fn set_mode(path: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn write(dir: &Path, name: &str, body: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn usage_errors_exit_2() {
    let scratch = tmp_dir();
    let dir = scratch.path.as_path();
    let card = write(dir, "card.json", tiny_card().to_string().as_bytes());
    // One command line a row, split at white space; the word CARD stands for the card's path.
    let rows = [
        "",
        "frobnicate",
        "sign",
        "sign --in CARD",
        "sign --in CARD --kid k",
        "sign --in CARD --kid k --secret-env S --key-file x --alg ES256",
        "sign --in CARD --kid k --key-file x",
        "sign --in CARD --kid k --key-file x --alg HS256",
        "sign --in CARD --kid k --secret-env S --jku https://a/ --jku-null",
        "sign --in CARD --kid k --secret-env S --jwks x",
        "sign --in CARD --in CARD --kid k --secret-env S",
        "sign --in CARD --kid k --secret-env S --bogus 1",
        "sign --in CARD --kid",
        "sign --in CARD --kid k --key-file x --alg none",
        "verify",
        "verify --in CARD --url https://a/",
        "verify --in CARD --secret k1",
        "verify --in CARD --secret =S",
        "verify --in CARD --kid k",
        "jwks --kid k --secret-env S",
    ];
    for row in rows {
        let args: Vec<&str> = row
            .split_whitespace()
            .map(|word| if word == "CARD" { card.as_str() } else { word })
            .collect();
        let (code, out) = cli(&args, &[("S", "secret")]);
        assert_eq!(code, Ok(2), "{args:?}");
        assert!(out.is_empty(), "{args:?}");
    }
    let (code, out) = cli(&["--help"], &[]);
    assert_eq!(code, Ok(0));
    assert!(out.contains("a2a-edge card sign"));
}

#[test]
fn worked_example_through_the_cli() {
    let scratch = tmp_dir();
    let dir = scratch.path.as_path();
    let card = write(dir, "tiny.json", tiny_card().to_string().as_bytes());
    let (code, out) = cli(
        &[
            "sign",
            "--in",
            &card,
            "--secret-env",
            "CARD_SECRET",
            "--kid",
            "k1",
            "--jku-null",
        ],
        &[("CARD_SECRET", "k")],
    );
    assert_eq!(code, Ok(0));
    let signed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        signed["signatures"],
        json!([{"protected": WORKED_PROTECTED, "signature": WORKED_SIGNATURE}])
    );
    let signed_file = write(dir, "signed.json", out.as_bytes());
    let verify = |file: &str, env: &[(&str, &str)]| {
        cli(&["verify", "--in", file, "--secret", "k1=CARD_SECRET"], env)
    };
    assert_eq!(
        verify(&signed_file, &[("CARD_SECRET", "k")]),
        (Ok(0), "valid\n".into())
    );
    assert_eq!(
        verify(&signed_file, &[("CARD_SECRET", "not-k")]),
        (Ok(1), "signature-mismatch\n".into())
    );
    let mut tampered = signed.clone();
    tampered["description"] = json!("Tiny card, changed");
    let tampered = write(dir, "tampered.json", tampered.to_string().as_bytes());
    assert_eq!(
        verify(&tampered, &[("CARD_SECRET", "k")]),
        (Ok(1), "signature-mismatch\n".into())
    );
    assert_eq!(
        cli(&["verify", "--in", &card], &[]),
        (Ok(1), "unsigned\n".into())
    );
    assert_eq!(
        cli(&["verify", "--in", &signed_file], &[]),
        (Ok(1), "missing-key\n".into())
    );
    // Secrets come from the environment; a missing variable is an error, not an empty key.
    let (code, _) = verify(&signed_file, &[]);
    assert!(code.unwrap_err().contains("CARD_SECRET"));
    let (code, _) = cli(
        &["sign", "--in", &card, "--secret-env", "NOPE", "--kid", "k1"],
        &[("NOPE", "")],
    );
    assert!(code.is_err());
}

#[test]
fn key_file_sign_jwks_and_verify() {
    let scratch = tmp_dir();
    let dir = scratch.path.as_path();
    let card = write(dir, "card.json", tiny_card().to_string().as_bytes());
    for alg in ["ES256", "EdDSA", "RS256"] {
        let pem = generated_pem(SigningAlg::parse(alg).unwrap());
        let key = write(dir, &format!("{alg}.pem"), &pem);
        // A key others can read is refused, by `sign` and by `jwks`, naming the mode.
        let args = |cmd: &'static str| -> Vec<String> {
            let mut v = vec![
                cmd,
                "--in",
                card.as_str(),
                "--key-file",
                key.as_str(),
                "--alg",
                alg,
                "--kid",
                alg,
            ];
            if cmd == "jwks" {
                v.drain(1..3);
            }
            v.into_iter().map(String::from).collect()
        };
        for mode in [0o644, 0o604, 0o660] {
            set_mode(&key, mode);
            for cmd in ["sign", "jwks"] {
                let argv = args(cmd);
                let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
                let (code, out) = cli(&argv, &[]);
                let err = code.unwrap_err();
                assert!(
                    err.contains(&format!("mode {mode:o}")),
                    "{alg} {cmd}: {err}"
                );
                assert!(out.is_empty(), "{alg} {cmd}: {out}");
            }
        }
        set_mode(&key, 0o600);
        let out_file = dir.join(format!("{alg}-signed.json"));
        let out_str = out_file.to_string_lossy().into_owned();
        let (code, out) = cli(
            &[
                "sign",
                "--in",
                &card,
                "--out",
                &out_str,
                "--key-file",
                &key,
                "--alg",
                alg,
                "--kid",
                alg,
                "--jku",
                "https://edge.example/.well-known/jwks.json",
            ],
            &[],
        );
        assert_eq!((code, out.as_str()), (Ok(0), ""), "{alg}");
        let (code, jwks) = cli(
            &["jwks", "--key-file", &key, "--alg", alg, "--kid", alg],
            &[],
        );
        assert_eq!(code, Ok(0));
        assert!(!jwks.contains("\"d\""), "{alg}: no private member");
        let jwks_file = write(dir, &format!("{alg}.jwks"), jwks.as_bytes());
        assert_eq!(
            cli(&["verify", "--in", &out_str, "--jwks", &jwks_file], &[]),
            (Ok(0), "valid\n".into()),
            "{alg}"
        );
    }
    let (code, _) = cli(
        &[
            "sign",
            "--in",
            &card,
            "--key-file",
            "/nonexistent.pem",
            "--alg",
            "ES256",
            "--kid",
            "k",
        ],
        &[],
    );
    assert!(code.is_err());
    let (code, _) = cli(&["verify", "--in", "/nonexistent.json"], &[]);
    assert!(code.is_err());
    let not_json = write(dir, "bad.json", b"{");
    let (code, _) = cli(&["verify", "--in", &not_json], &[]);
    assert!(code.is_err());
}

/// `card verify` reports the card as the edge reads it: by JSON names (a card by proto names
/// is an AgentCard; one naming a member both ways is not).
#[test]
fn the_schema_report_reads_the_card_by_json_names() {
    let by_json = tiny_card();
    let by_proto = json!({
        "name": "tiny", "description": "Tiny card", "version": "1.0.0",
        "supported_interfaces": [{"url": "http://127.0.0.1:1/", "protocol_binding": "JSONRPC",
                                  "protocol_version": "1.0"}],
        "capabilities": {"streaming": true}, "default_input_modes": ["text/plain"],
        "default_output_modes": ["text/plain"], "skills": []
    });
    let mut both = by_json.clone();
    both["supported_interfaces"] = by_proto["supported_interfaces"].clone();
    let mut provider = by_proto.clone();
    provider["provider"] = json!({"organization": "o"});
    // (card, its report)
    let rows: &[(&Value, &[&str])] = &[
        (&by_json, &["an A2A 1.0 AgentCard"]),
        (&by_proto, &["an A2A 1.0 AgentCard"]),
        (
            &provider,
            &[
                "its provider lacks url or organization; the edge would drop it",
                "an A2A 1.0 AgentCard",
            ],
        ),
        (
            &both,
            &["card.invalid: card.supportedInterfaces is given twice (as supportedInterfaces and as supported_interfaces) (the edge would not publish it)"],
        ),
    ];
    for (card, report) in rows {
        assert_eq!(schema_report(card), *report, "{card}");
    }
}
