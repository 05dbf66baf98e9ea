//! The `a2a-edge` command: `serve`, `check`, `engine`.
#![forbid(unsafe_code)]
// No unwrap()/expect() outside tests: every failure is a clear error, never a panic.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use std::path::PathBuf;
use std::process::ExitCode;

use a2a_edge::authz::explain;
use a2a_edge::engine::{self, Engine, EngineConfig};
use a2a_edge::policy::{LoadMode, Policy};
use a2a_edge::server;
use clap::{CommandFactory, Parser, Subcommand};

const DEFAULT_POLICY: &str = "policies/default.toml";

/// mimalloc instead of the system allocator: the proxy allocates and frees many short-lived
/// buffers across worker threads (JSON values, bodies, TLS records), where glibc malloc took
/// about 30 % of the CPU under load (see README, Benchmarks). The `system-alloc` feature
/// keeps the system allocator, for heap profilers that hook `malloc` (heaptrack, valgrind).
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// a2a-edge: a security-hardened edge proxy for A2A 1.0 agents.
#[derive(Parser)]
#[command(name = "a2a-edge", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the proxy.
    Serve {
        #[command(flatten)]
        policy: PolicyArg,
        /// Write {"listen", "public_url", "admin"} to FILE once the proxy accepts connections.
        #[arg(long, value_name = "FILE")]
        ready_file: Option<PathBuf>,
    },
    /// Validate a policy and print what it would do.
    Check {
        #[command(flatten)]
        policy: PolicyArg,
        /// Also reach the state store (`[state] backend = "redis"`: one PING).
        #[arg(long)]
        connect: bool,
        /// Print what caller P may do instead: P[,tenant=T][,groups=a|b].
        #[arg(long, value_name = "CALLER")]
        explain: Option<String>,
    },
    /// Run the embedded A2A task engine alone (plain HTTP).
    Engine {
        /// The address to listen on, e.g. 127.0.0.1:0.
        #[arg(long, value_name = "ADDR")]
        listen: String,
        /// The agent name in the engine's card (default: "a2a-edge echo agent").
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
    },
    /// Read a secret on standard input and print what a policy holds instead.
    HashSecret {
        /// Only the SHA-256 digest (`token_sha256`, `key_sha256`).
        #[arg(long, conflicts_with = "argon2id")]
        sha256: bool,
        /// Only the Argon2id PHC string (`password_hash`).
        #[arg(long)]
        argon2id: bool,
    },
    /// Sign or verify an Agent Card, print a key's JWKS (`a2a-edge card --help`).
    #[command(disable_help_flag = true)]
    Card {
        /// sign | verify | jwks, and their options.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        args: Vec<String>,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff) to standard output.
    Man,
    /// Print the version.
    #[command(hide = true)]
    Version,
}

#[derive(clap::Args)]
struct PolicyArg {
    /// The policy file.
    #[arg(long, value_name = "FILE", env = "A2A_EDGE_POLICY", default_value = DEFAULT_POLICY)]
    policy: PathBuf,
}

fn main() -> ExitCode {
    // Usage errors exit 2 (clap's own), `--help` and `--version` 0.
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Card { args } => {
            return match a2a_edge::card::cli::run(&args) {
                Ok(code) => code,
                Err(e) => {
                    eprintln!("a2a-edge card: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::HashSecret { sha256, argon2id } => {
            return hash_secret(sha256 || !argon2id, argon2id || !sha256)
        }
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "a2a-edge",
                &mut std::io::stdout(),
            );
            return ExitCode::SUCCESS;
        }
        Command::Man => {
            return match clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("a2a-edge man: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        Command::Version => {
            println!("a2a-edge {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
        Command::Serve { policy, ready_file } => run_async(serve(Opts {
            policy: Some(policy.policy),
            ready_file,
            ..Opts::default()
        })),
        Command::Check {
            policy,
            connect,
            explain,
        } => check(Opts {
            policy: Some(policy.policy),
            explain,
            connect,
            ..Opts::default()
        }),
        Command::Engine { listen, name } => run_async(run_engine(Opts {
            listen: Some(listen),
            name,
            ..Opts::default()
        })),
    };
    // Log lines still queued for stderr go out before the process ends.
    a2a_edge::telemetry::sink::flush();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("a2a-edge: {e}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Default)]
struct Opts {
    policy: Option<PathBuf>,
    ready_file: Option<PathBuf>,
    listen: Option<String>,
    explain: Option<String>,
    connect: bool,
    /// `engine --name`: the agent name in the engine's card.
    name: Option<String>,
}

impl Opts {
    fn policy_path(&self) -> PathBuf {
        self.policy
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_POLICY))
    }
}

fn run_async<F: std::future::Future<Output = Result<(), String>>>(f: F) -> Result<(), String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?
        .block_on(f)
}

/// Why a policy's ignored keys ([`a2a_edge::policy::TlsPolicy::ignored`]) are.
const IGNORED_WHY: &str = "client_auth = \"off\" asks for no client certificate";

/// Logs the keys a policy sets and ignores (at start and at each reload).
fn log_ignored(policy: &Policy) {
    for key in &policy.tls.ignored {
        tracing::warn!(
            event = "policy_key_ignored",
            key = *key,
            reason = IGNORED_WHY
        );
    }
}

fn check(opts: Opts) -> Result<(), String> {
    let path = opts.policy_path();
    let policy = Policy::load(&path, LoadMode::Check).map_err(|e| e.to_string())?;
    if let Some(spec) = &opts.explain {
        let mut caller = explain::parse_caller(spec)?;
        // A bare name of a static principal takes its tenant and groups from the policy.
        if !spec.contains(',') {
            if let Some(a) = policy.auth.attributes_of(&caller.name) {
                caller.tenant = a.tenant.clone();
                caller.groups = a.groups.clone();
            }
        }
        if policy.agents.is_empty() {
            let r = &policy.a2a.requests;
            print!(
                "{}",
                explain::explain(
                    policy.authz.as_deref(),
                    &caller,
                    None,
                    &r.workspace,
                    &r.metadata.allowed_for(&caller.name),
                )
            );
        }
        // With `[[agents]]`, what the caller may do at each: a rule limited to some agents
        // counts only there, and each agent has its own roots and metadata exceptions.
        for (i, agent) in policy.agents.iter().enumerate() {
            let r = &agent.a2a.requests;
            if i > 0 {
                println!();
            }
            print!(
                "{}",
                explain::explain(
                    policy.authz.as_deref(),
                    &caller,
                    Some(&agent.name),
                    &r.workspace,
                    &r.metadata.allowed_for(&caller.name),
                )
            );
        }
        return Ok(());
    }
    // What `serve` would refuse or ignore of the exporter's environment, said here too.
    let otlp_env = match policy.telemetry.otlp_endpoint {
        Some(_) => Some(a2a_edge::telemetry::traces::OtlpEnv::from_process()?),
        None => None,
    };
    for (variable, reason) in otlp_env.iter().flat_map(|e| &e.ignored) {
        println!("warning: {variable} is set and ignored: {reason}");
    }
    for key in &policy.tls.ignored {
        println!("warning: {key} is ignored: {IGNORED_WHY}");
    }
    println!("{}: OK\n{}", path.display(), policy.summary());
    if let Some(e) = &otlp_env {
        println!(
            "traces   export (OTEL_* environment): timeout {} ms, {}, queue {} spans, batches of up to {} sent when full or after {} ms",
            e.timeout.as_millis(),
            if e.gzip { "gzip" } else { "not compressed" },
            e.queue,
            e.batch,
            e.delay.as_millis()
        );
    }
    if opts.connect {
        let Some(config) = policy.state.redis.clone() else {
            println!("state    memory: nothing to connect to");
            return Ok(());
        };
        let metrics = std::sync::Arc::new(a2a_edge::telemetry::metrics::Metrics::new());
        let store = a2a_edge::state::redis::RedisStore::new(config, metrics)?;
        run_async(async move {
            store
                .ping()
                .await
                .map(|()| println!("state    redis answers (PING)"))
                .map_err(|e| format!("state: redis: {e}"))
        })?;
    }
    Ok(())
}

async fn serve(opts: Opts) -> Result<(), String> {
    // Signal handlers first: a SIGHUP (`systemctl reload`) while the agents' cards are
    // fetched at start must not kill the process (its default action); it is held and the
    // reload done once the proxy is up. A SIGTERM or Ctrl-C meanwhile stops the start.
    use tokio::signal::unix::{signal, SignalKind};
    let mut hangup = signal(SignalKind::hangup()).map_err(|e| e.to_string())?;
    let stop = stop_signals()?;
    tokio::pin!(stop);
    let path = opts.policy_path();
    let policy = Policy::load(&path, LoadMode::Serve).map_err(|e| e.to_string())?;
    a2a_edge::runtime::configured()?;
    // Log lines and spans from here on ([telemetry], fixed for the life of the process).
    let telemetry = a2a_edge::telemetry::init(&policy.telemetry)?;
    log_ignored(&policy);
    let dev_tokens: Vec<_> = policy
        .auth
        .bearer
        .iter()
        .filter_map(|b| b.generated.clone().map(|g| (b.principal.clone(), g)))
        .collect();
    let from_environment = policy.auth.from_environment.clone();
    let running = tokio::select! {
        r = server::start(policy) => r.map_err(|e| e.to_string())?,
        r = &mut stop => {
            r?;
            eprintln!("a2a-edge: stopped while starting");
            return Ok(());
        }
    };
    if !from_environment.is_empty() {
        // Credentials nobody wrote into the policy are accepted: say so where operators look.
        tracing::warn!(
            event = "auth_from_environment",
            variables = ?a2a_edge::telemetry::Json(&from_environment)
        );
    }
    let url = running.public_url.clone();
    println!(
        "a2a-edge listening on {url} (local address {})",
        running.local_addr
    );
    if let Some(dev) = &running.dev_certs {
        let made = if dev.created { "generated" } else { "reused" };
        println!(
            "dev TLS certificates {made}: trust {} (never use them in production)",
            dev.ca_cert.display()
        );
    }
    for (principal, g) in &dev_tokens {
        let made = if g.created { "generated" } else { "read" };
        println!(
            "dev bearer token for principal {principal:?} ({made}, stored in {}):\n  {}",
            g.file.display(),
            g.token
        );
        let cacert = running
            .dev_certs
            .as_ref()
            .map(|d| format!("--cacert {} ", d.ca_cert.display()))
            .unwrap_or_default();
        println!(
            "try:\n  curl {cacert}-H 'Authorization: Bearer {}' -H 'A2A-Version: 1.0' -H 'Content-Type: application/json' \\\n    -d '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"SendMessage\",\"params\":{{\"message\":{{\"messageId\":\"m1\",\"role\":\"ROLE_USER\",\"parts\":[{{\"text\":\"hello\"}}]}}}}}}' \\\n    {url}",
            g.token
        );
    }
    if let Some(admin) = running.admin_addr {
        println!("admin listener on http://{admin}/ (/metrics, /ready, /health)");
    }
    if let Some(ready) = &opts.ready_file {
        let mut info = serde_json::json!({"listen": running.local_addr.to_string(), "public_url": url.to_string()});
        if let Some(admin) = running.admin_addr {
            info["admin"] = serde_json::Value::from(admin.to_string());
        }
        write_atomically(ready, info.to_string().as_bytes())?;
    }
    // SIGHUP reloads the policy; SIGTERM and Ctrl-C drain and stop.
    loop {
        tokio::select! {
            r = &mut stop => { r?; break; }
            _ = hangup.recv() => {
                let reload = async {
                    match Policy::load(&path, LoadMode::Serve) {
                        Ok(p) => {
                            log_ignored(&p);
                            running.reload(p).await.map_err(|e| e.to_string())
                        }
                        Err(e) => {
                            running.metrics().reload(false);
                            Err(e.to_string())
                        }
                    }
                };
                // A reload waits for the agents' cards (each fetch bounded): a SIGTERM or
                // Ctrl-C meanwhile drains at once, the reload given up (the running policy
                // stays until then: it is swapped only at the reload's end).
                let result = tokio::select! {
                    r = &mut stop => { r?; break; }
                    result = reload => result,
                };
                match result {
                    Ok(ignored) => {
                        eprintln!("a2a-edge: policy reloaded from {}", path.display());
                        if !ignored.is_empty() {
                            eprintln!(
                                "a2a-edge: these changes take effect only after a restart: {}",
                                ignored.join(", ")
                            );
                        }
                    }
                    Err(e) => eprintln!("a2a-edge: reload refused, the running policy stays: {e}"),
                }
            }
        }
    }
    eprintln!("a2a-edge: shutting down, draining in-flight requests");
    running.shutdown();
    running.wait().await;
    // The spans still buffered go to the collector before the process ends.
    telemetry.shutdown().await;
    Ok(())
}

async fn run_engine(opts: Opts) -> Result<(), String> {
    let listen = opts.listen.ok_or("engine needs --listen ADDR")?;
    let _telemetry = a2a_edge::telemetry::init(&Default::default())?;
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let url = format!("http://{addr}/");
    let defaults = EngineConfig::default();
    let engine = Engine::new(EngineConfig {
        public_url: url.clone(),
        name: opts.name.unwrap_or(defaults.name),
    });
    let stop = stop_signals()?;
    println!("engine listening on {url}");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(engine::serve(listener, engine, async move {
        let _ = rx.await;
    }));
    stop.await?;
    let _ = tx.send(());
    serving
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}

/// Reads a secret on standard input (one trailing newline dropped) and prints the policy lines
/// that stand for it, so the secret itself never enters a policy.
fn hash_secret(sha: bool, argon: bool) -> ExitCode {
    use std::io::Read;
    let mut input = Vec::new();
    if let Err(e) = std::io::stdin().take(64 * 1024).read_to_end(&mut input) {
        eprintln!("a2a-edge hash-secret: cannot read standard input: {e}");
        return ExitCode::FAILURE;
    }
    let secret = input
        .strip_suffix(b"\n")
        .map(|s| s.strip_suffix(b"\r").unwrap_or(s))
        .unwrap_or(&input);
    if secret.is_empty() {
        eprintln!("a2a-edge hash-secret: the secret is empty");
        return ExitCode::FAILURE;
    }
    if sha {
        let hex = a2a_edge::auth::hash::sha256_hex(secret);
        println!(
            "token_sha256 = \"{hex}\"   # [[auth.bearer]]; key_sha256 for [[auth.api_key.keys]]"
        );
    }
    if argon {
        match a2a_edge::auth::hash::argon2id_phc(secret) {
            Ok(phc) => println!("password_hash = \"{phc}\"   # [[auth.basic]]"),
            Err(e) => {
                eprintln!("a2a-edge hash-secret: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

/// Resolves on Ctrl-C or SIGTERM.
/// Installs the SIGTERM and SIGINT handlers now (not when first awaited) and returns what
/// resolves when either arrives.
fn stop_signals() -> Result<impl std::future::Future<Output = Result<(), String>>, String> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
    Ok(async move {
        tokio::select! {
            _ = int.recv() => Ok(()),
            _ = term.recv() => Ok(()),
        }
    })
}

/// Writes a file so that readers never see it half-written.
fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}
