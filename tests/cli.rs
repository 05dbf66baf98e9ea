//! The `a2a-edge` binary as a real child process: `check`, `serve` (dev credentials, ready
//! file, SIGTERM drain with exit 0) and `engine`.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use http::StatusCode;
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_a2a-edge");

/// Kills the child on drop, so a failing test leaves no process behind.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sigterm(child: &Child) {
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "the process did not exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The child's exit status, once it exits within `limit` (else fails with `why`); polls
/// without blocking the runtime.
async fn exited_within(child: &mut Child, limit: Duration, why: &str) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(started.elapsed() < limit, "{why}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `a2a-edge check --policy <policy>`, to adjust (cwd, environment) and run.
fn check_cmd(policy: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["check", "--policy"]).arg(policy);
    cmd
}

/// Runs the command, asserts that it succeeded (showing both outputs if not) and returns what
/// it wrote to standard output.
fn stdout_of_success(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A policy in `dir` (`p.toml`): the embedded engine, dev certificates and a generated dev
/// bearer token under `dir/certs/dev`, listeners on port 0.
fn write_dev_policy(dir: &Path) -> std::path::PathBuf {
    let token = dir.join("certs/dev/bearer-token");
    let file = dir.join("p.toml");
    std::fs::write(&file, token_file_policy(dir, "embedded", &token, true)).unwrap();
    file
}

/// Starts `a2a-edge serve --policy <policy>` in `dir` with a ready file there, waits for that
/// file (failing at once if the process exits first) and returns the child with what the
/// ready file says (`listen`, `admin`). `policy` may be relative to `dir`; the log (stderr)
/// goes to `dir/serve.log`.
async fn spawn_serve(dir: &Path, policy: &Path, stdout: Stdio) -> (ChildGuard, Value) {
    spawn_serve_with(dir, policy, stdout, &[]).await
}

/// [`spawn_serve`] with environment variables.
async fn spawn_serve_with(
    dir: &Path,
    policy: &Path,
    stdout: Stdio,
    envs: &[(&str, &str)],
) -> (ChildGuard, Value) {
    let ready = dir.join("ready.json");
    let mut child = ChildGuard(
        Command::new(BIN)
            .args(["serve", "--policy"])
            .arg(policy)
            .arg("--ready-file")
            .arg(&ready)
            .envs(envs.iter().copied())
            .current_dir(dir)
            .stdout(stdout)
            .stderr(std::fs::File::create(dir.join("serve.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready.exists() {
        if let Some(status) = child.0.try_wait().unwrap() {
            panic!("serve exited before writing its ready file: {status}");
        }
        assert!(Instant::now() < deadline, "no ready file");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let info = serde_json::from_slice(&std::fs::read(&ready).unwrap()).unwrap();
    (child, info)
}

#[test]
fn check_accepts_the_shipped_policy_without_side_effects() {
    let dir = TempDir::new("cli-check");
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/default.toml");
    let stdout = stdout_of_success(check_cmd(&shipped).current_dir(dir.path()));
    assert!(stdout.contains("OK"), "{stdout}");
    assert!(stdout.contains("embedded task engine"), "{stdout}");
    assert!(
        !dir.path().join("certs").exists(),
        "check must not generate files"
    );
}

/// POLICY.md's `[tls]` example names a client CA file with `client_auth = "off"`: accepted,
/// the file ignored (not even read), and `check` says so.
#[test]
fn check_accepts_a_client_ca_file_with_client_auth_off_and_warns() {
    let dir = TempDir::new("cli-ca-off");
    let file = dir.path().join("p.toml");
    let text = PolicyDoc::base(dir.path())
        .set("tls.client_ca_file", "certs/dev/missing-ca.pem")
        .set("tls.client_auth", "off")
        .text();
    std::fs::write(&file, &text).unwrap();
    let stdout = stdout_of_success(check_cmd(&file).current_dir(dir.path()));
    assert!(
        stdout.contains("warning: tls.client_ca_file is ignored: client_auth = \"off\""),
        "{stdout}"
    );
    assert!(stdout.contains("OK"), "{stdout}");
}

#[test]
fn check_names_file_line_and_key_of_an_error() {
    let dir = TempDir::new("cli-bad");
    let file = dir.path().join("bad.toml");
    let text = PolicyDoc::base(dir.path()).set("tls.unknown_key", 1).text();
    std::fs::write(&file, &text).unwrap();
    let out = check_cmd(&file).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = text
        .lines()
        .position(|l| l.starts_with("unknown_key"))
        .unwrap()
        + 1;
    assert!(stderr.contains(&format!("bad.toml:{line}")), "{stderr}");
    assert!(stderr.contains("unknown_key"), "{stderr}");

    let missing = check_cmd(Path::new("/nonexistent/p.toml"))
        .output()
        .unwrap();
    assert!(!missing.status.success());
    let bad_cmd = Command::new(BIN).arg("frobnicate").output().unwrap();
    assert_eq!(bad_cmd.status.code(), Some(2));
}

#[tokio::test]
async fn serve_prints_a_working_dev_credential_and_drains_on_sigterm() {
    let dir = TempDir::new("cli-serve");
    let file = write_dev_policy(dir.path());
    let (mut child, info) = spawn_serve(dir.path(), &file, Stdio::piped()).await;
    let addr = info["listen"].as_str().unwrap().parse().unwrap();
    let token = std::fs::read_to_string(dir.path().join("certs/dev/bearer-token")).unwrap();
    let token = token.trim();

    // The printed banner carries the token and a curl example.
    let mut stdout = BufReader::new(child.0.stdout.take().unwrap());
    let mut banner = String::new();
    while !banner.contains("curl") {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "{banner}");
        banner.push_str(&line);
    }
    assert!(banner.contains(token), "{banner}");

    let ca = dir.path().join("certs/dev/ca.pem");
    let mut c = Client::connect(addr, &ca, Proto::H2).await;
    let auth = format!("Bearer {token}");
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hello"}]}}}"#;
    let (status, _, rb) = c
        .request(
            "POST",
            "/",
            &[
                ("authorization", &auth),
                ("a2a-version", "1.0"),
                ("content-type", "application/json"),
            ],
            body,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let v: Value = serde_json::from_slice(&rb).unwrap();
    assert_eq!(
        v["result"]["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{v}"
    );

    // The client keeps its idle HTTP/2 connection open: the drain must still finish promptly
    // (the runtime stays free to answer the server's GOAWAY).
    sigterm(&child.0);
    let status = exited_within(
        &mut child.0,
        Duration::from_secs(30),
        "no exit after SIGTERM",
    )
    .await;
    assert_eq!(status.code(), Some(0));
    drop(c);
}

#[test]
fn engine_runs_standalone_and_stops_on_sigterm() {
    let mut child = ChildGuard(
        Command::new(BIN)
            .args(["engine", "--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("engine listening on ")
        .unwrap()
        .to_string();
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let mut tcp = std::net::TcpStream::connect(&addr).unwrap();
    use std::io::{Read, Write};
    tcp.write_all(b"GET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .unwrap();
    let mut resp = String::new();
    tcp.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.contains(r#"{"status":"healthy"}"#), "{resp}");
    sigterm(&child.0);
    assert_eq!(wait_exit(&mut child.0).code(), Some(0));
}

#[test]
fn iac_code_environment_variables_configure_schemes_the_policy_leaves_unset() {
    let dir = TempDir::new("cli-env");
    let file = dir.path().join("p.toml");
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\npublic_url = \"https://127.0.0.1:0/\"\n[tls]\ndev = true\ndev_dir = \"{}/certs\"\n[[upstreams]]\nname = \"e\"\nurl = \"embedded\"\n",
        dir.path().display()
    );
    std::fs::write(&file, &text).unwrap();
    // Without any scheme the policy refuses to load ...
    let out = check_cmd(&file).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("allow_anonymous"));
    // ... and the iac-code variables supply bearer, basic and API key.
    let stdout = stdout_of_success(
        check_cmd(&file)
            .env("IACCODE_A2A_HTTP_TOKEN", "tok")
            .env("IACCODE_A2A_BASIC_USERNAME", "alice")
            .env("IACCODE_A2A_BASIC_PASSWORD", "pw")
            .env("IACCODE_A2A_API_KEY", "key")
            .env("IACCODE_A2A_API_KEY_HEADER", "X-My-Key"),
    );
    for needle in [
        "\"bearer\"",
        "\"alice\"",
        "X-My-Key",
        // `check` says which credentials came from the environment rather than the policy.
        "from the environment, not the policy: IACCODE_A2A_HTTP_TOKEN",
        "from the environment, not the policy: IACCODE_A2A_BASIC_USERNAME + IACCODE_A2A_BASIC_PASSWORD",
        "from the environment, not the policy: IACCODE_A2A_API_KEY",
    ] {
        assert!(stdout.contains(needle), "{needle}: {stdout}");
    }
    // A Basic user named as the environment's bearer callers would share their tasks; the
    // refusal shows neither secret.
    let out = check_cmd(&file)
        .env("IACCODE_A2A_HTTP_TOKEN", "env-token-SECRET-7q")
        .env("IACCODE_A2A_BASIC_USERNAME", "bearer")
        .env("IACCODE_A2A_BASIC_PASSWORD", "env-password-SECRET-9z")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("auth.basic") && stderr.contains("\"bearer\""),
        "{stderr}"
    );
    assert!(!stderr.contains("SECRET"), "{stderr}");
    // The environment's API key header is held to the policy's rule: not a credential or
    // protocol header, a plain name.
    for header in [
        "Authorization",
        "cookie",
        "A2A-Version",
        "X Key",
        "X-Key\r\nX-Evil",
    ] {
        let out = check_cmd(&file)
            .env("IACCODE_A2A_API_KEY", "env-key-SECRET-3k")
            .env("IACCODE_A2A_API_KEY_HEADER", header)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{header:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("IACCODE_A2A_API_KEY_HEADER"),
            "{header:?}: {stderr}"
        );
        assert!(!stderr.contains("SECRET"), "{stderr}");
    }
    // A policy that sets the scheme itself takes nothing from the environment.
    let with_bearer = format!(
        "{text}[auth]\n[[auth.bearer]]\nprincipal = \"p\"\ntoken_sha256 = \"{}\"\n",
        "ab".repeat(32)
    );
    std::fs::write(&file, with_bearer).unwrap();
    let stdout = stdout_of_success(check_cmd(&file).env("IACCODE_A2A_HTTP_TOKEN", "tok"));
    assert!(!stdout.contains("IACCODE_A2A_HTTP_TOKEN"), "{stdout}");
    for secret in ["tok\n", "\"pw\"", "\"key\""] {
        assert!(!stdout.contains(secret), "{secret}: {stdout}");
    }
}

#[tokio::test]
async fn the_default_policy_serves_a_signed_card_with_a_generated_key() {
    let dir = TempDir::new("cli-default");
    std::fs::create_dir_all(dir.path().join("policies")).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/default.toml"),
        dir.path().join("policies/default.toml"),
    )
    .unwrap();
    // The shipped policy listens on 127.0.0.1:8443 (admin 9901); a test must not take a fixed
    // port, so only `check` runs on it as shipped, and `serve` on a copy listening on port 0.
    let text = std::fs::read_to_string(dir.path().join("policies/default.toml"))
        .unwrap()
        .replace("127.0.0.1:8443", "127.0.0.1:0")
        .replace("127.0.0.1:9901", "127.0.0.1:0");
    std::fs::write(dir.path().join("policies/test.toml"), text).unwrap();
    // A relative policy path: it and the relative paths inside it resolve against the cwd.
    let (mut child, info) =
        spawn_serve(dir.path(), Path::new("policies/test.toml"), Stdio::null()).await;
    let key = dir.path().join("certs/dev/card-es256.pem");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let ca = dir.path().join("certs/dev/ca.pem");
    let mut c = Client::connect(
        info["listen"].as_str().unwrap().parse().unwrap(),
        &ca,
        Proto::H1,
    )
    .await;
    let (_, _, jwks) = c.request("GET", "/.well-known/jwks.json", &[], "").await;
    let (_, _, card) = c
        .request("GET", "/.well-known/agent-card.json", &[], "")
        .await;
    let mut keys = a2a_edge::card::verify::VerifyKeys::new();
    keys.add_jwks(&serde_json::from_slice(&jwks).unwrap())
        .unwrap();
    let card: Value = serde_json::from_slice(&card).unwrap();
    assert_eq!(
        a2a_edge::card::verify::verify_card(&card, &keys),
        a2a_edge::card::verify::Verdict::Valid {
            kid: "dev-es256".into()
        }
    );
    // The shipped policy has the admin listener on loopback: ready, with metrics.
    let admin: std::net::SocketAddr = info["admin"].as_str().unwrap().parse().unwrap();
    assert!(admin.ip().is_loopback());
    let mut tcp = tokio::net::TcpStream::connect(admin).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    tcp.write_all(b"GET /ready HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"status\":\"ready\""), "{answer}");
    sigterm(&child.0);
    assert_eq!(wait_exit(&mut child.0).code(), Some(0));
}

/// The README's `--explain` transcript of `policies/multi-tenant.toml` is what the binary
/// prints (run in the checkout, where the policy's relative paths point).
#[test]
fn explain_prints_what_the_readme_shows() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let pwd = std::fs::canonicalize(root).unwrap().display().to_string();
    let prefix = "$ a2a-edge check --policy policies/multi-tenant.toml --explain ";
    let mut checked = 0;
    for block in readme.split(prefix).skip(1) {
        let (spec, rest) = block.split_once('\n').unwrap();
        let expected: String = rest
            .lines()
            .take_while(|l| !l.is_empty() && !l.starts_with("```"))
            .map(|l| format!("{}\n", l.replace("$PWD", &pwd)))
            .collect();
        let out = stdout_of_success(
            check_cmd(Path::new("policies/multi-tenant.toml"))
                .args(["--explain", spec])
                .current_dir(root),
        );
        assert_eq!(out, expected, "--explain {spec}");
        checked += 1;
    }
    assert!(checked >= 3, "the README shows the --explain output");
    // Without [authz], in plain words.
    let out = stdout_of_success(
        check_cmd(&root.join("policies/default.toml"))
            .args(["--explain", "dev"])
            .current_dir(root),
    );
    assert!(
        out.contains("every authenticated caller may do everything"),
        "{out}"
    );
    let out =
        stdout_of_success(check_cmd(&root.join("policies/multi-tenant.toml")).current_dir(root));
    assert!(out.contains("authz    3 rule(s)"), "{out}");
    let bad = check_cmd(&root.join("policies/default.toml"))
        .args(["--explain", "x,colour=blue"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
}

/// With `[[agents]]`, `--explain` says what the caller may do at each agent: a rule limited
/// to some agents counts only there (before, every rule was shown as applying everywhere).
#[test]
fn explain_says_what_a_caller_may_do_at_each_agent() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let policy = std::fs::read_to_string(root.join("policies/agents.toml"))
        .unwrap()
        .replace(
            "# [[authz.rules]]\n# name = \"reviewers read ROS reviews\"\n# groups = [\"reviewers\"]\n# agents = [\"ros-review\"]\n# methods = [\"read\", \"write\"]",
            "[[authz.rules]]\nname = \"reviewers read ROS reviews\"\ngroups = [\"reviewers\"]\nagents = [\"ros-review\"]\nmethods = [\"read\", \"write\"]",
        );
    assert!(
        policy.contains("\nagents = [\"ros-review\"]"),
        "the example rule"
    );
    let dir = TempDir::new("cli-explain-agents");
    let path = dir.path().join("agents.toml");
    std::fs::write(&path, policy).unwrap();
    let out = stdout_of_success(
        check_cmd(&path)
            .args(["--explain", "rita,groups=reviewers"])
            .current_dir(root),
    );
    let blocks: Vec<&str> = out.split("\n\n").collect();
    assert_eq!(blocks.len(), 3, "one block per agent: {out}");
    for block in blocks {
        let at_review = block.contains("agent    ros-review\n");
        assert_eq!(
            block.contains("rules    reviewers read ROS reviews\n"),
            at_review,
            "{block}"
        );
        assert_eq!(block.contains("methods  none"), !at_review, "{block}");
    }
}

/// A large body is parsed off the worker threads: with one worker, while a body of a
/// million values is parsed (and refused for them), a request on another connection of the
/// same worker is answered. Before, that connection waited for the parse to end.
#[tokio::test]
async fn a_large_parse_does_not_hold_the_other_connections_of_its_worker() {
    let dir = TempDir::new("cli-parse");
    let token = dir.path().join("certs/dev/bearer-token");
    let file = dir.path().join("p.toml");
    let policy = token_file_policy(dir.path(), "embedded", &token, true).replacen(
        "[server]\n",
        "[server]\nadmin_listen = \"127.0.0.1:0\"\n",
        1,
    );
    std::fs::write(&file, policy).unwrap();
    let (child, info) = spawn_serve_with(
        dir.path(),
        &file,
        Stdio::null(),
        &[("A2A_EDGE_WORKERS", "1")],
    )
    .await;
    let addr: std::net::SocketAddr = info["listen"].as_str().unwrap().parse().unwrap();
    let admin: std::net::SocketAddr = info["admin"].as_str().unwrap().parse().unwrap();
    let token = std::fs::read_to_string(&token).unwrap();
    let auth = format!("Bearer {}", token.trim());
    let ca = dir.path().join("certs/dev/ca.pem");
    let mut big = Client::connect(addr, &ca, Proto::H2).await;
    let mut other = Client::connect(addr, &ca, Proto::H1).await;
    let zeros = "0,".repeat(1_100_000);
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{{"message":{{"messageId":"m-big","role":"ROLE_USER","parts":[{{"text":"hi"}}],"metadata":{{"x":[{zeros}0]}}}}}}}}"#
    );
    let headers = [
        ("authorization", auth.clone()),
        ("content-type", "application/json".to_string()),
        ("a2a-version", "1.0".to_string()),
    ];
    let body_len = body.len() as f64;
    let parse = tokio::spawn(async move {
        let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (status, _, body) = big.request("POST", "/", &h, body).await;
        (
            status,
            String::from_utf8_lossy(&body).into_owned(),
            Instant::now(),
        )
    });
    // Once the edge holds the whole body (the admin listener answers off the workers), its
    // parse begins: the health request comes while it runs.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, metrics) = admin_get_at(admin, "/metrics").await;
        let held: f64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix("a2a_edge_request_bytes ")?.parse().ok())
            .unwrap_or(0.0);
        if held >= body_len {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the body was never held: {metrics}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (status, _, _) = other.request("GET", "/health", &[], "").await;
    let health_answered = Instant::now();
    assert_eq!(status, StatusCode::OK);
    let (status, body, parse_answered) = parse.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("json.too_many_values"), "{body}");
    assert!(
        health_answered < parse_answered,
        "the health request waited for the parse ({:?} after it)",
        health_answered - parse_answered
    );
    sigterm(&child.0);
}

/// The connections are served by `A2A_EDGE_WORKERS` worker threads (named `a2a-edge-wN`), each
/// taking its share of the connections; a value outside 1..=256 stops `serve` with an error
/// that names the variable.
#[tokio::test]
async fn serve_spreads_connections_over_the_configured_worker_threads() {
    let dir = TempDir::new("cli-workers");
    let file = write_dev_policy(dir.path());

    for bad in ["0", "257", "four"] {
        let out = Command::new(BIN)
            .args(["serve", "--policy"])
            .arg(&file)
            .env("A2A_EDGE_WORKERS", bad)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "A2A_EDGE_WORKERS={bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("A2A_EDGE_WORKERS"), "{bad}: {err}");
    }

    let (child, info) = spawn_serve_with(
        dir.path(),
        &file,
        Stdio::null(),
        &[("A2A_EDGE_WORKERS", "3")],
    )
    .await;
    let pid = child.0.id();
    let workers = |pid: u32| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .map(|n| n.trim().to_string())
            .filter(|n| n.starts_with("a2a-edge-w"))
            .collect();
        names.sort();
        names
    };
    // A thread takes its name when it first runs (std names it from inside), which may come
    // after the ready line on a loaded machine: wait for the names, a few seconds at most.
    let want = ["a2a-edge-w0", "a2a-edge-w1", "a2a-edge-w2"];
    let started = std::time::Instant::now();
    while workers(pid) != want && started.elapsed() < std::time::Duration::from_secs(5) {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(workers(pid), want);

    // Six connections at once, over HTTP/1.1 and HTTP/2: every one is served.
    let addr: std::net::SocketAddr = info["listen"].as_str().unwrap().parse().unwrap();
    let token = std::fs::read_to_string(dir.path().join("certs/dev/bearer-token")).unwrap();
    let auth = format!("Bearer {}", token.trim());
    let ca = dir.path().join("certs/dev/ca.pem");
    let mut clients = Vec::new();
    for i in 0..6 {
        let proto = if i % 2 == 0 { Proto::H1 } else { Proto::H2 };
        clients.push(Client::connect(addr, &ca, proto).await);
    }
    let mut answers = Vec::new();
    for (i, c) in clients.iter_mut().enumerate() {
        let v = rpc_as(
            c,
            &auth,
            "SendMessage",
            message(&format!("hello {i}"), json!({})),
        )
        .await;
        assert_eq!(v["id"], 7, "{v}"); // rpc_as's request id, echoed
        answers.push(v["result"]["task"]["id"].as_str().unwrap().to_string());
    }
    answers.sort();
    answers.dedup();
    assert_eq!(answers.len(), 6, "six tasks");
    sigterm(&child.0);
}

/// Every command answers `--help` (exit 0, naming its options), a usage error exits 2 and
/// names what was wrong, and `--version`, completions and the man page print.
#[test]
fn every_command_has_help_and_clear_usage_errors() {
    let run = |args: &[&str]| {
        let out = Command::new(BIN).args(args).output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), text)
    };
    let helps: &[(&[&str], &[&str])] = &[
        (
            &["--help"],
            &[
                "serve",
                "check",
                "engine",
                "hash-secret",
                "card",
                "completions",
                "man",
            ],
        ),
        (
            &["serve", "--help"],
            &["--policy", "--ready-file", "A2A_EDGE_POLICY"],
        ),
        (
            &["check", "--help"],
            &["--policy", "--connect", "--explain"],
        ),
        (&["engine", "--help"], &["--listen"]),
        (&["hash-secret", "--help"], &["--sha256", "--argon2id"]),
        (&["card", "--help"], &["sign", "verify", "jwks"]),
        (
            &["card", "sign", "--help"],
            &["--kid", "--key-file", "--secret-env"],
        ),
        (&["card", "verify", "-h"], &["--jwks-url", "--secret"]),
        (&["card", "jwks", "--help"], &["--key-file", "--alg"]),
        (&["completions", "--help"], &["bash", "zsh", "fish"]),
        (&["man", "--help"], &["manual page"]),
        (&["help", "check"], &["--explain"]),
    ];
    for (args, names) in helps {
        let (code, text) = run(args);
        assert_eq!(code, Some(0), "{args:?}: {text}");
        for n in *names {
            assert!(text.contains(n), "{args:?} does not name {n}: {text}");
        }
    }
    let errors: &[(&[&str], &str)] = &[
        (&[], "Usage"),
        (&["serve", "--bogus"], "--bogus"),
        (&["serve", "--policy"], "--policy"),
        (&["engine"], "--listen"),
        (&["frobnicate"], "frobnicate"),
        (
            &["hash-secret", "--sha256", "--argon2id"],
            "cannot be used with",
        ),
        (&["completions", "tcsh"], "tcsh"),
        (&["card", "sign", "--nope"], "--nope"),
    ];
    for (args, says) in errors {
        let (code, text) = run(args);
        assert_eq!(code, Some(2), "{args:?}: {text}");
        assert!(text.contains(says), "{args:?} does not say {says}: {text}");
    }
    let (code, text) = run(&["--version"]);
    assert_eq!(
        (code, text.trim()),
        (Some(0), concat!("a2a-edge ", env!("CARGO_PKG_VERSION")))
    );
    let (code, text) = run(&["completions", "bash"]);
    assert_eq!(code, Some(0));
    assert!(
        text.contains("a2a-edge") && text.contains("hash-secret"),
        "{text}"
    );
    let (code, text) = run(&["man"]);
    assert_eq!(code, Some(0));
    assert!(
        text.starts_with(".ie") || text.contains(".TH a2a-edge"),
        "{text}"
    );
}

/// `card sign` says which members of the card its signature does not cover (those outside the
/// AgentCard schema, which anyone between the agent and a verifier could change, at any
/// level); it keeps them in the card it writes, and says nothing of a card without them, nor
/// of the signatures a card already carries.
#[test]
fn card_sign_names_what_its_signature_does_not_cover() {
    let dir = TempDir::new("cli-card-sign");
    let base = json!({
        "name": "a", "description": "d", "version": "1",
        "supportedInterfaces": [{"url": "https://a.example/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {}, "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"], "skills": []
    });
    let mut extra = base.clone();
    extra["url"] = json!("https://a.example/");
    extra["x-vendor"] = json!({"internal": "10.0.0.5"});
    extra["capabilities"]["note"] = json!(1);
    // (a card signed before by another key: its signature is no news, and is kept)
    let mut signed_before = base.clone();
    signed_before["signatures"] =
        json!([{"protected": "eyJhbGciOiJIUzI1NiIsImtpZCI6Im90aGVyIn0", "signature": "AA"}]);
    // (the card, what the warning names (None: no warning), the signatures it then has)
    let rows = [
        (base, None, 1),
        (extra, Some("url, x-vendor, capabilities.note"), 1),
        (signed_before, None, 2),
    ];
    for (card, named, signatures) in rows {
        let file = dir.path().join("card.json");
        std::fs::write(&file, card.to_string()).unwrap();
        let out = Command::new(BIN)
            .args([
                "card",
                "sign",
                "--kid",
                "k1",
                "--secret-env",
                "A2A_EDGE_TEST_SIGN",
            ])
            .arg("--in")
            .arg(&file)
            .env("A2A_EDGE_TEST_SIGN", "a-secret-of-at-least-32-bytes-long!!")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let signed: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            signed["signatures"].as_array().map(Vec::len),
            Some(signatures)
        );
        match named {
            Some(names) => {
                assert!(
                    stderr.contains("not covered by the signature") && stderr.contains(names),
                    "{stderr}"
                );
                assert_eq!(signed["x-vendor"], card["x-vendor"], "kept");
            }
            None => assert!(!stderr.contains("not covered"), "{stderr}"),
        }
    }
}

/// `A2A_EDGE_POLICY` is the policy when `--policy` is not given; `--policy` wins over it.
#[test]
fn the_policy_comes_from_a2a_edge_policy_unless_given() {
    let dir = TempDir::new("cli-policy-env");
    let file = write_dev_policy(dir.path());
    let out = Command::new(BIN)
        .arg("check")
        .env("A2A_EDGE_POLICY", &file)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.starts_with(&format!("{}: OK", file.display())),
        "{stdout}"
    );
    let out = Command::new(BIN)
        .args(["check", "--policy", "missing.toml"])
        .env("A2A_EDGE_POLICY", &file)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.toml"));
}

/// The harness's policies (`PolicyDoc`, under every integration test): keys land in the
/// table they name, arrays of tables are appended to, tables merge, and the text it writes
/// is a policy the edge loads.
#[test]
fn the_test_policies_are_built_table_by_table() {
    let dir = TempDir::new("cli-doc");
    let doc = PolicyDoc::base(dir.path())
        .merge_into(
            "server",
            "admin_listen = \"127.0.0.1:0\"\n[limits]\nmax_headers = 50\n",
        )
        .merge("[limits]\nidle_timeout_ms = 7000\n")
        .merge(MALLORY_ENTRY)
        .merge_into("auth.bearer.0", "tenant = \"team-a\"\n")
        .merge_into(
            "upstreams.0",
            "health_interval_ms = 100\n[[upstreams]]\nname = \"agent-2\"\nurl = \"http://127.0.0.1:1\"\n",
        )
        .set("upstreams.1.token_env", "AGENT_2_TOKEN")
        .set("limits.max_registry_entries", 10);
    let text = doc.text();
    let t: toml::Table = text.parse().unwrap();
    let at = |path: &str| {
        path.split('.')
            .fold(toml::Value::Table(t.clone()), |v, seg| {
                match seg.parse::<usize>() {
                    Ok(n) => v.as_array().unwrap()[n].clone(),
                    Err(_) => v
                        .get(seg)
                        .unwrap_or_else(|| panic!("{path}\n{text}"))
                        .clone(),
                }
            })
    };
    #[rustfmt::skip]
    let cases: &[(&str, toml::Value)] = &[
        ("server.admin_listen", "127.0.0.1:0".into()),
        ("server.listen", "127.0.0.1:0".into()),
        // The fragment's table after its keys is the root's, merged with the next one's.
        ("limits.max_headers", 50.into()),
        ("limits.idle_timeout_ms", 7000.into()),
        ("limits.max_registry_entries", 10.into()),
        ("auth.bearer.0.principal", "tester".into()),
        ("auth.bearer.0.tenant", "team-a".into()),
        ("auth.bearer.1.principal", "mallory".into()),
        ("upstreams.0.name", "agent-1".into()),
        ("upstreams.0.health_interval_ms", 100.into()),
        ("upstreams.1.name", "agent-2".into()),
        ("upstreams.1.token_env", "AGENT_2_TOKEN".into()),
    ];
    for (path, want) in cases {
        assert_eq!(&at(path), want, "{path}\n{text}");
    }
    assert_eq!(at("auth.bearer").as_array().unwrap().len(), 2);
    assert_eq!(at("upstreams").as_array().unwrap().len(), 2);
    // Removed keys are gone; what is left loads.
    let text = doc.remove("upstreams.1.token_env").text();
    assert!(!text.contains("AGENT_2_TOKEN"), "{text}");
    a2a_edge::policy::Policy::from_toml(
        Path::new("doc.toml"),
        &text,
        a2a_edge::policy::LoadMode::Check,
    )
    .unwrap_or_else(|e| panic!("{e}\n{text}"));
}

/// SIGTERM while a SIGHUP reload waits for an agent's card (its body stalls; the fetch may
/// take 10 s): the process drains and exits at once instead of after the reload.
#[tokio::test]
async fn sigterm_during_a_reload_drains_at_once() {
    let dir = TempDir::new("cli-reload-term");
    let good = RawAgent::start(RawAnswer::Whole, RawAnswer::Whole, RawAnswer::Whole).await;
    let stalled = RawAgent::start(RawAnswer::StalledBody, RawAnswer::Whole, RawAnswer::Whole).await;
    let token = dir.path().join("certs/dev/bearer-token");
    let policy = |url: &str| {
        token_file_policy_with(
            dir.path(),
            url,
            &token,
            true,
            "response_timeout_ms = 60000\n",
        )
    };
    let file = dir.path().join("p.toml");
    std::fs::write(&file, policy(&good.url)).unwrap();
    let (mut child, _) = spawn_serve(dir.path(), &file, Stdio::null()).await;
    std::fs::write(&file, policy(&stalled.url)).unwrap();
    let ok = Command::new("kill")
        .args(["-HUP", &child.0.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    // The reload is under way once it asks the new agent for its card.
    let deadline = Instant::now() + Duration::from_secs(10);
    while stalled.count("/.well-known/agent-card.json") == 0 {
        assert!(
            Instant::now() < deadline,
            "the reload never fetched the card"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    sigterm(&child.0);
    let status = exited_within(
        &mut child.0,
        Duration::from_secs(5),
        "SIGTERM waited for the reload",
    )
    .await;
    assert_eq!(status.code(), Some(0));
}

/// A policy serving `upstream` (`engine`) with one bearer (`dev`) whose token is in
/// `token_file` (the operator's own file unless `generate`), dev certificates under
/// `dir/certs/dev`, listeners on port 0.
fn token_file_policy(dir: &Path, upstream: &str, token_file: &Path, generate: bool) -> String {
    token_file_policy_with(dir, upstream, token_file, generate, "")
}

/// `token_file_policy` with `upstream_keys` (whole TOML lines) added to the upstream's table.
fn token_file_policy_with(
    dir: &Path,
    upstream: &str,
    token_file: &Path,
    generate: bool,
    upstream_keys: &str,
) -> String {
    format!(
        r#"
[server]
listen = "127.0.0.1:0"
public_url = "https://127.0.0.1:0/"
[tls]
dev = true
dev_dir = "{d}/certs/dev"
[[upstreams]]
name = "engine"
url = "{upstream}"
{upstream_keys}[auth]
[[auth.bearer]]
principal = "dev"
token_file = "{t}"
generate_if_missing = {generate}
"#,
        d = dir.display(),
        t = token_file.display(),
    )
}

/// A token the operator keeps in a file (a systemd credential, a mounted secret) is never
/// printed: only a token the edge made itself (`generate_if_missing`) is a dev token, shown
/// with its curl line.
#[tokio::test]
async fn an_operators_token_file_is_never_printed() {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("cli-token-file");
    let token_file = dir.path().join("ops-token");
    let secret = "operator-secret-7Qx9Zr2Lw5";
    std::fs::write(&token_file, format!("{secret}\n")).unwrap();
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    for (generate, printed) in [(false, false), (true, true)] {
        let file = dir.path().join("p.toml");
        std::fs::write(
            &file,
            token_file_policy(dir.path(), "embedded", &token_file, generate),
        )
        .unwrap();
        let _ = std::fs::remove_file(dir.path().join("ready.json"));
        let (mut child, _) = spawn_serve(dir.path(), &file, Stdio::piped()).await;
        sigterm(&child.0);
        exited_within(&mut child.0, Duration::from_secs(10), "no drain").await;
        let mut out = String::new();
        child
            .0
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        assert!(out.contains("a2a-edge listening on"), "{out}");
        assert_eq!(out.contains(secret), printed, "generate {generate}: {out}");
    }
}

/// A SIGHUP (`systemctl reload`) while the proxy starts (here: waiting for an agent's card,
/// whose body stalls) is held for after the start, not the signal's default action that
/// ends the process.
#[tokio::test]
async fn a_sighup_while_starting_does_not_kill_the_proxy() {
    let dir = TempDir::new("cli-hup-start");
    let stalled = RawAgent::start(RawAnswer::StalledBody, RawAnswer::Whole, RawAnswer::Whole).await;
    let token_file = dir.path().join("token");
    let file = dir.path().join("p.toml");
    std::fs::write(
        &file,
        token_file_policy(dir.path(), &stalled.url, &token_file, true),
    )
    .unwrap();
    let ready = dir.path().join("ready.json");
    let mut child = ChildGuard(
        Command::new(BIN)
            .args(["serve", "--policy"])
            .arg(&file)
            .arg("--ready-file")
            .arg(&ready)
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // The start is under way once it asks the agent for its card.
    let deadline = Instant::now() + Duration::from_secs(10);
    while stalled.count("/.well-known/agent-card.json") == 0 {
        assert!(
            Instant::now() < deadline,
            "the start never fetched the card"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ok = Command::new("kill")
        .args(["-HUP", &child.0.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    // The card fetch gives up after 10 s; the proxy then starts and does the reload.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready.exists() {
        if let Some(status) = child.0.try_wait().unwrap() {
            panic!("the SIGHUP ended the start: {status}");
        }
        assert!(Instant::now() < deadline, "no ready file");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(child.0.try_wait().unwrap().is_none(), "exited after start");
    sigterm(&child.0);
    let status = exited_within(&mut child.0, Duration::from_secs(15), "no drain").await;
    assert_eq!(status.code(), Some(0));
}

/// At start a served certificate out of time is taken (there is nothing good to keep: a
/// reload would refuse it) and said loudly in the log, at error level: before its
/// `notBefore` (by more than the 5 minutes clocks may differ) or past its `notAfter`. One in
/// time is logged as loaded, with its dates, and nothing more.
#[tokio::test]
async fn serve_says_at_start_that_its_certificate_is_out_of_time() {
    let rows = [
        // (what, notBefore, notAfter, the error event)
        ("in time", 2020, 4000, None),
        (
            "not yet valid",
            2090,
            2100,
            Some("server_certificate_not_yet_valid"),
        ),
        ("expired", 2020, 2021, Some("server_certificate_expired")),
    ];
    for (what, from, until, said) in rows {
        let dir = TempDir::new("cli-cert-time");
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        p.not_before = rcgen::date_time_ymd(from, 1, 1);
        p.not_after = rcgen::date_time_ymd(until, 1, 1);
        let (cert, key_file) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        std::fs::write(&cert, p.self_signed(&key).unwrap().pem()).unwrap();
        std::fs::write(&key_file, key.serialize_pem()).unwrap();
        let private = std::os::unix::fs::PermissionsExt::from_mode(0o600);
        std::fs::set_permissions(&key_file, private).unwrap();
        let token = dir.path().join("token");
        let policy = token_file_policy(dir.path(), "embedded", &token, true).replace(
            &format!(
                "dev = true\ndev_dir = \"{}/certs/dev\"\n",
                dir.path().display()
            ),
            &format!(
                "cert_file = \"{}\"\nkey_file = \"{}\"\n",
                cert.display(),
                key_file.display()
            ),
        );
        assert!(policy.contains("cert_file"), "{policy}");
        let file = dir.path().join("p.toml");
        std::fs::write(&file, policy).unwrap();
        let (child, _) = spawn_serve(dir.path(), &file, Stdio::null()).await;
        // (the log is written by a thread of its own: read until the lines are there, each
        // whole, the error event's too when one is expected, as it may come in a later write)
        let whole_line =
            |log: &str, event: &str| log.find(event).is_some_and(|at| log[at..].contains('\n'));
        let deadline = Instant::now() + Duration::from_secs(10);
        let log = loop {
            let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap();
            let written = whole_line(&log, "tls_certificates_loaded")
                && said.map_or(true, |event| whole_line(&log, event));
            if written || Instant::now() > deadline {
                break log;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        drop(child);
        let loaded = log
            .lines()
            .find(|l| l.contains("tls_certificates_loaded"))
            .unwrap_or_else(|| panic!("{what}: {log}"));
        assert!(
            loaded.contains(&format!("{until}")) && loaded.contains(&format!("{from}")),
            "{what}: {loaded}"
        );
        for event in [
            "server_certificate_not_yet_valid",
            "server_certificate_expired",
        ] {
            let line = log.lines().find(|l| l.contains(event));
            assert_eq!(line.is_some(), said == Some(event), "{what}: {log}");
            if let Some(line) = line {
                assert!(line.contains("\"level\":\"error\""), "{line}");
            }
        }
    }
}
