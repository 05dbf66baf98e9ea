#!/usr/bin/env bash
# Interop test: a2a-edge in front of the REAL iac-code A2A server (0.16.0),
# offline: iac-code talks to a fake OpenAI-compatible model (fake_openai.py),
# everything on 127.0.0.1.
#
#   client --TLS, Bearer ALICE_TOKEN--> a2a-edge --http, Bearer IAC token--> iac-code --> fake LLM
#          (and BOB_TOKEN: a second principal, who must not see alice's tasks)
#
# Env:
#   A2A_EDGE_BIN    use this binary instead of `cargo build --release`
#   IAC_VALIDATION  on (default) | auto | off: are the edge's request
#                   rejections (workspace, metadata, ids) required? auto =
#                   required only when a probe shows the edge validates
#                   requests (for binaries older than 05c9d10, which wired
#                   validation into the gate), otherwise SKIP; off = SKIP
#   READY_TIMEOUT   seconds to wait for the proxy's ready file (default 60)
#   IAC_TIMEOUT     seconds to wait for iac-code's /health (default 60)
#   CLIENT_TIMEOUT  seconds the Python client may run (default 150)
#   PYTHON          interpreter used to create the venv (default python3)
#   INTEROP_DEBUG   non-empty: client tracebacks; keep the temp dir
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
VENV="$HERE/.venv-iac"
IAC_SPEC='iac-code[a2a]==0.16.0'
SDK_SPEC='a2a-sdk[http-server,signing]==1.2.0' # 1.3.0 breaks iac-code 0.16.0 (encode_page_token)
READY_TIMEOUT=${READY_TIMEOUT:-60}
IAC_TIMEOUT=${IAC_TIMEOUT:-60}
CLIENT_TIMEOUT=${CLIENT_TIMEOUT:-150}
PYTHON=${PYTHON:-python3}
IAC_VALIDATION=${IAC_VALIDATION:-on}
export FAKE_REPLY=${FAKE_REPLY:-Hello from the fake LLM.}
export FAKE_SLOW_SECONDS=${FAKE_SLOW_SECONDS:-5}
T_START=$SECONDS

log() { printf '[iac-interop] %s\n' "$*" >&2; }
NPASS=0
NFAIL=0
NSKIP=0
pass() { NPASS=$((NPASS + 1)); echo "PASS $*"; }
fail() { NFAIL=$((NFAIL + 1)); echo "FAIL $*"; }
note() { echo "NOTE $*"; }
summary() { echo "iac-code interop: $NPASS passed, $NFAIL failed, $NSKIP skipped ($((SECONDS - T_START)) s)"; }

case "$IAC_VALIDATION" in auto | on | off) ;; *)
    log "IAC_VALIDATION must be auto, on or off"
    exit 2
    ;;
esac

# ---- virtualenv with iac-code and the pinned SDK (reused when versions match)
venv_ok() {
    [[ -x "$VENV/bin/python" && -x "$VENV/bin/iac-code" ]] &&
        "$VENV/bin/python" - <<'EOF' >/dev/null 2>&1
import importlib.metadata as m, sys
ok = m.version("iac-code") == "0.16.0" and m.version("a2a-sdk") == "1.2.0"
import httpx  # noqa: F401  (the client)
sys.exit(0 if ok else 1)
EOF
}
if ! venv_ok; then
    log "creating virtualenv $VENV with $IAC_SPEC $SDK_SPEC"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$IAC_SPEC" "$SDK_SPEC" httpx
    venv_ok || { log "iac-code 0.16.0 / a2a-sdk 1.2.0 not importable after install"; exit 1; }
fi
PY="$VENV/bin/python"

# everything below talks to 127.0.0.1 only: no proxies for any child
unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy
export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost

# ---- the binary
if [[ -n "${A2A_EDGE_BIN:-}" ]]; then
    BIN=$A2A_EDGE_BIN
else
    log "cargo build --release"
    (cd "$ROOT" && cargo build --release --quiet)
    BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/a2a-edge"
fi
[[ -x "$BIN" ]] || { log "binary not found or not executable: $BIN"; exit 1; }

# ---- temp dir, processes, cleanup
TMP=$(mktemp -d "${TMPDIR:-/tmp}/a2a-iac.XXXXXX")
TMP=$(cd "$TMP" && pwd -P)
mkdir -p "$TMP/home" "$TMP/iac-config" "$TMP/workspace" "$TMP/certs"
WS="$TMP/workspace"
FAKE_PID=
IAC_PID=
PROXY_PID=
CLIENT_PID=

stop_pid() { # stop_pid PID SECONDS: TERM, wait, then KILL
    local pid=$1 secs=$2
    [[ -n "$pid" ]] || return 0
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 $((secs * 10))); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
cleanup() {
    local rc=$?
    stop_pid "$CLIENT_PID" 3
    stop_pid "$PROXY_PID" 5
    stop_pid "$IAC_PID" 10
    stop_pid "$FAKE_PID" 3
    if [[ -n "${INTEROP_DEBUG:-}" ]]; then
        log "INTEROP_DEBUG: kept $TMP"
    else
        rm -rf "$TMP"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

show_tail() { # show_tail FILE LABEL
    if [[ -s "$1" ]]; then
        log "---- $2 (last 30 lines) ----"
        tail -n 30 "$1" >&2 || true
    fi
}
show_logs() {
    show_tail "$TMP/proxy.log" "proxy log"
    show_tail "$TMP/iac.stderr" "iac-code stderr"
    show_tail "$TMP/fake.out" "fake LLM"
}
die() { # die CHECK MESSAGE
    fail "$1: $2"
    show_logs
    summary
    exit 1
}

# Tokens: the callers' (ALICE_TOKEN, BOB_TOKEN) are known to the proxy and the
# client only; iac-code's own (IAC_TOKEN) to the proxy and iac-code only. None
# is exported. ALICE_LLM_KEY is an LLM key alice may send as
# metadata.iac_code.iac_code_api_key ([a2a.metadata.allowed_for]): the fake LLM
# accepts it (and iac-code's configured key), so it must reach the model, and
# never come back to alice.
ALICE_TOKEN=$("$PY" -c 'import secrets; print("alice-" + secrets.token_urlsafe(32))')
BOB_TOKEN=$("$PY" -c 'import secrets; print("bob-" + secrets.token_urlsafe(32))')
IAC_TOKEN=$("$PY" -c 'import secrets; print("iac-" + secrets.token_urlsafe(32))')
ALICE_LLM_KEY=$("$PY" -c 'import secrets; print("sk-alice-" + secrets.token_hex(16))')

# ---- 1. the fake LLM
FAKE_LOG="$TMP/fake-llm.jsonl" FAKE_API_KEYS="sk-fake-offline-key,$ALICE_LLM_KEY" "$PY" -u "$HERE/fake_openai.py" --port 0 --port-file "$TMP/fake.port" \
    >"$TMP/fake.out" 2>&1 &
FAKE_PID=$!
for _ in $(seq 1 100); do
    [[ -s "$TMP/fake.port" ]] && break
    kill -0 "$FAKE_PID" 2>/dev/null || break
    sleep 0.1
done
[[ -s "$TMP/fake.port" ]] || die fake-llm "did not start"
FAKE_PORT=$(cat "$TMP/fake.port")
pass "fake-llm: listening on 127.0.0.1:$FAKE_PORT"

# ---- 2. iac-code (its own bearer token required on every route)
IAC_PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
IAC_URL="http://127.0.0.1:$IAC_PORT/"
t_iac=$SECONDS
(
    cd "$WS"
    exec env HOME="$TMP/home" IAC_CODE_CONFIG_DIR="$TMP/iac-config" \
        DISABLE_TELEMETRY=1 IAC_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
        IAC_CODE_PROVIDER="OpenAI Compatible" IAC_CODE_BASE_URL="http://127.0.0.1:$FAKE_PORT/v1" \
        IAC_CODE_API_KEY=sk-fake-offline-key IAC_CODE_MODEL=fake-model \
        IACCODE_A2A_HTTP_TOKEN="$IAC_TOKEN" IACCODE_A2A_ALLOWED_CWDS="$WS" \
        "$VENV/bin/iac-code" a2a --host 127.0.0.1 --port "$IAC_PORT"
) >"$TMP/iac.stdout" 2>"$TMP/iac.stderr" &
IAC_PID=$!
health=$(IAC_TOKEN="$IAC_TOKEN" "$PY" - "$IAC_URL" "$IAC_TIMEOUT" "$IAC_PID" <<'EOF'
import os, sys, time, urllib.request, urllib.error
url, timeout, pid = sys.argv[1] + "health", float(sys.argv[2]), int(sys.argv[3])
req = urllib.request.Request(url, headers={"Authorization": "Bearer " + os.environ["IAC_TOKEN"]})
deadline, last = time.monotonic() + timeout, "no answer"
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except OSError:
        print("exited"); sys.exit(1)
    try:
        with urllib.request.urlopen(req, timeout=2) as r:
            print(f"{r.status} {r.read().decode()}"); sys.exit(0)
    except urllib.error.HTTPError as e:
        last = f"HTTP {e.code}"
    except OSError as e:
        last = str(e)
    time.sleep(0.2)
print(f"timeout ({last})"); sys.exit(1)
EOF
) || die iac-code-start "GET /health: $health"
pass "iac-code-start: $IAC_URL /health -> $health after $((SECONDS - t_iac)) s"

# ---- 3. the proxy
cat >"$TMP/policy.toml" <<EOF
[server]
listen = "127.0.0.1:0"
public_url = "https://127.0.0.1:0/"

[tls]
dev = true
dev_dir = "$TMP/certs"

[[upstreams]]
name = "iac-code"
url = "$IAC_URL"
token_env = "IAC_UPSTREAM_TOKEN"
response_timeout_ms = 120000

[auth]
[[auth.bearer]]
principal = "alice"
token_env = "ALICE_TOKEN"

[[auth.bearer]]
principal = "bob"
token_env = "BOB_TOKEN"

# alice may set the agent's LLM key per request (denied by default, so bob may not)
[a2a.metadata.allowed_for]
alice = ["iac_code.iac_code_api_key"]
EOF
cp "$TMP/policy.toml" "$TMP/policy-base.toml"
cat >>"$TMP/policy.toml" <<EOF

[workspace]
allowed_roots = ["$WS"]
EOF
edge() { ALICE_TOKEN="$ALICE_TOKEN" BOB_TOKEN="$BOB_TOKEN" IAC_UPSTREAM_TOKEN="$IAC_TOKEN" "$BIN" "$@"; }
if edge check --policy "$TMP/policy.toml" >"$TMP/check.out" 2>&1; then
    pass "policy-check: [workspace] accepted"
else
    note "policy-check: this binary refuses [workspace] ($(grep -m1 -i workspace "$TMP/check.out" || head -n1 "$TMP/check.out")); running without it"
    cp "$TMP/policy-base.toml" "$TMP/policy.toml"
    edge check --policy "$TMP/policy.toml" >"$TMP/check.out" 2>&1 ||
        die policy-check "$(cat "$TMP/check.out")"
fi

ALICE_TOKEN="$ALICE_TOKEN" BOB_TOKEN="$BOB_TOKEN" IAC_UPSTREAM_TOKEN="$IAC_TOKEN" \
    "$BIN" serve --policy "$TMP/policy.toml" --ready-file "$TMP/ready.json" >"$TMP/proxy.log" 2>&1 &
PROXY_PID=$!
PUBLIC_URL=
bad_ready=0
deadline=$((SECONDS + READY_TIMEOUT))
while ((SECONDS < deadline)); do
    if ! kill -0 "$PROXY_PID" 2>/dev/null; then
        wait "$PROXY_PID" && prc=0 || prc=$?
        PROXY_PID=
        die proxy-start "exited with status $prc before becoming ready"
    fi
    if [[ -s "$TMP/ready.json" ]]; then
        PUBLIC_URL=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["public_url"])' \
            "$TMP/ready.json" 2>/dev/null) || PUBLIC_URL=
        [[ -n "$PUBLIC_URL" ]] && break
        bad_ready=$((bad_ready + 1))
        ((bad_ready > 30)) && die proxy-start "ready file has no public_url: $(head -c 300 "$TMP/ready.json")"
    fi
    sleep 0.1
done
[[ -n "$PUBLIC_URL" ]] || die proxy-start "no usable ready file after ${READY_TIMEOUT}s"
CA="$TMP/certs/ca.pem"
[[ -s "$CA" ]] || die proxy-start "dev CA $CA missing"
pass "proxy-start: ready at $PUBLIC_URL"

# ---- 4. the checks through the proxy
# (in the background + wait, so that INT/TERM run the cleanup at once)
status=0
ALICE_TOKEN="$ALICE_TOKEN" BOB_TOKEN="$BOB_TOKEN" ALICE_LLM_KEY="$ALICE_LLM_KEY" \
    IAC_UPSTREAM_TOKEN="$IAC_TOKEN" timeout --kill-after=5 "$CLIENT_TIMEOUT" \
    "$PY" -u "$HERE/iac_code_client.py" --url "$PUBLIC_URL" --ca "$CA" \
    --iac-url "$IAC_URL" --workspace "$WS" --fake-log "$TMP/fake-llm.jsonl" \
    --iac-access-log "$TMP/iac.stdout" --iac-tasks-dir "$TMP/iac-config/a2a/tasks" \
    --validation "$IAC_VALIDATION" --tee "$TMP/client.out" &
CLIENT_PID=$!
wait "$CLIENT_PID" || status=$?
CLIENT_PID=
NPASS=$((NPASS + $(grep -c '^PASS ' "$TMP/client.out" || true)))
NFAIL=$((NFAIL + $(grep -c '^FAIL ' "$TMP/client.out" || true)))
NSKIP=$((NSKIP + $(grep -c '^SKIP ' "$TMP/client.out" || true)))
if ((status == 124 || status == 137)); then
    fail "iac-code-client: timed out after ${CLIENT_TIMEOUT}s"
elif ((status != 0)) && ! grep -q '^FAIL ' "$TMP/client.out"; then
    fail "iac-code-client: exited with status $status"
fi

# ---- 5. shutdown: the proxy drains and exits 0; then iac-code and the fake
kill -TERM "$PROXY_PID" 2>/dev/null || true
prc=
for _ in $(seq 1 150); do
    if ! kill -0 "$PROXY_PID" 2>/dev/null; then
        wait "$PROXY_PID" && prc=0 || prc=$?
        break
    fi
    sleep 0.1
done
if [[ -z "$prc" ]]; then
    fail "proxy-sigterm: still running 15 s after SIGTERM"
elif ((prc == 0)); then
    PROXY_PID=
    pass "proxy-sigterm: exited 0"
else
    PROXY_PID=
    fail "proxy-sigterm: exit status $prc"
fi
stop_pid "$IAC_PID" 10
IAC_PID=
stop_pid "$FAKE_PID" 3
FAKE_PID=

# ---- 6. credentials at rest: the caller's token is nowhere but in memory
# (fake LLM log, iac-code's config dir and logs, its stdout/stderr, the proxy
# log, the client output: every file of the run)
nfiles=$(find "$TMP" -type f | wc -l)
for who in ALICE BOB; do
    var=${who}_TOKEN
    leaks=$(grep -rlF -- "${!var}" "$TMP" 2>/dev/null | sed "s|^$TMP/||" || true)
    lc=$(echo "$who" | tr 'A-Z' 'a-z')
    if [[ -z "$leaks" ]]; then
        pass "$lc-token-at-rest: absent from all $nfiles files (iac-config, iac stdout/stderr, fake LLM log, proxy log)"
    else
        fail "$lc-token-at-rest: $var found in: $(echo $leaks)"
    fi
done
# alice's LLM key went to iac-code (which stores the echoed request metadata in
# its task files) and to the model; it must be nowhere on the proxy's side of
# the run: not in the proxy log, not in anything the client received
key_files=$(grep -rlF -- "$ALICE_LLM_KEY" "$TMP" 2>/dev/null | sed "s|^$TMP/||" | sort || true)
key_bad=$(echo "$key_files" | grep -v -e '^fake-llm.jsonl$' -e '^iac-config/' -e '^$' || true)
if ! echo "$key_files" | grep -qx 'fake-llm.jsonl'; then
    fail "alice-llm-key-at-rest: the key is not in the fake LLM log (did it reach the model?)"
elif [[ -n "$key_bad" ]]; then
    fail "alice-llm-key-at-rest: ALICE_LLM_KEY found outside iac-code's config and the LLM log: $(echo $key_bad)"
else
    pass "alice-llm-key-at-rest: found only in $(echo $key_files | cut -c1-200) (allowed: the fake LLM log, iac-code's config dir); absent from the proxy log and the client output"
fi
if grep -qF -- "$IAC_TOKEN" "$TMP/fake-llm.jsonl" 2>/dev/null; then
    fail "iac-token-to-llm: iac-code's A2A token reached the fake LLM"
else
    pass "iac-token-to-llm: iac-code's A2A token never reached the fake LLM"
fi
nposts=$(grep -c '"POST / ' "$TMP/iac.stdout" || true)
note "iac-code access log: $nposts JSON-RPC POSTs; LLM requests: $(grep -c chat/completions "$TMP/fake-llm.jsonl" || true)"

summary
if ((NFAIL != 0)); then
    show_logs
    log "iac-code interop: FAILED"
    exit 1
fi
log "iac-code interop: all checks passed"
