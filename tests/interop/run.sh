#!/usr/bin/env bash
# Interop test: the official Python A2A SDK (a2a-sdk 1.3.0) client against
# the a2a-edge proxy (TLS + bearer auth, embedded echo engine).
#
# Env:
#   A2A_EDGE_BIN   use this binary instead of `cargo build --release`
#   READY_TIMEOUT  seconds to wait for the proxy's ready file (default 60)
#   CLIENT_TIMEOUT seconds the Python client may run (default 150)
#   PYTHON         interpreter used to create the venv (default python3)
#   INTEROP_DEBUG  non-empty: print tracebacks from the client
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
VENV="$HERE/.venv"
SDK_SPEC='a2a-sdk==1.3.0'
READY_TIMEOUT=${READY_TIMEOUT:-60}
CLIENT_TIMEOUT=${CLIENT_TIMEOUT:-150}
PYTHON=${PYTHON:-python3}

log() { printf '[interop] %s\n' "$*" >&2; }
NPASS=0
NFAIL=0
pass() { NPASS=$((NPASS + 1)); echo "PASS $*"; }
fail() { NFAIL=$((NFAIL + 1)); echo "FAIL $*"; }
summary() { echo "interop: $NPASS passed, $NFAIL failed"; }

# ---- virtualenv with the SDK (reused when it already has the right version)
venv_ok() {
    [[ -x "$VENV/bin/python" ]] &&
        "$VENV/bin/python" - <<'EOF' >/dev/null 2>&1
import importlib.metadata as m, sys
sys.exit(0 if m.version("a2a-sdk") == "1.3.0" else 1)
EOF
}
if ! venv_ok; then
    log "creating virtualenv $VENV with $SDK_SPEC"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$SDK_SPEC"
    venv_ok || { log "a2a-sdk 1.3.0 not importable after install"; exit 1; }
fi

# ---- the binary
if [[ -n "${A2A_EDGE_BIN:-}" ]]; then
    BIN=$A2A_EDGE_BIN
else
    log "cargo build --release"
    (cd "$ROOT" && cargo build --release --quiet)
    BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/a2a-edge"
fi
[[ -x "$BIN" ]] || { log "binary not found or not executable: $BIN"; exit 1; }

# ---- temp dir, cleanup
TMP=$(mktemp -d "${TMPDIR:-/tmp}/a2a-interop.XXXXXX")
PROXY_PID=
cleanup() {
    local rc=$?
    if [[ -n "$PROXY_PID" ]] && kill -0 "$PROXY_PID" 2>/dev/null; then
        kill -TERM "$PROXY_PID" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "$PROXY_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$PROXY_PID" 2>/dev/null || true
        wait "$PROXY_PID" 2>/dev/null || true
    fi
    rm -rf "$TMP"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

show_proxy_log() {
    if [[ -s "$TMP/proxy.log" ]]; then
        log "---- proxy log (last 40 lines) ----"
        tail -n 40 "$TMP/proxy.log" >&2 || true
        log "-----------------------------------"
    fi
}

INTEROP_TOKEN=$("$VENV/bin/python" -c 'import secrets; print(secrets.token_urlsafe(32))')
INTEROP_API_KEY=$("$VENV/bin/python" -c 'import secrets; print(secrets.token_urlsafe(32))')
export INTEROP_TOKEN INTEROP_API_KEY

cat >"$TMP/policy.toml" <<EOF
[server]
listen = "127.0.0.1:0"
public_url = "https://127.0.0.1:0/"

[tls]
dev = true
dev_dir = "$TMP/certs"

[[upstreams]]
name = "engine"
url = "embedded"

[auth]
[[auth.bearer]]
principal = "interop"
token_env = "INTEROP_TOKEN"
[auth.api_key]
header = "X-API-Key"
[[auth.api_key.keys]]
principal = "interop-key"
key_env = "INTEROP_API_KEY"
EOF

# ---- start the proxy
log "starting $BIN serve"
"$BIN" serve --policy "$TMP/policy.toml" --ready-file "$TMP/ready.json" \
    >"$TMP/proxy.log" 2>&1 &
PROXY_PID=$!

# wait for the ready file (it may appear before it is completely written)
PUBLIC_URL=
deadline=$((SECONDS + READY_TIMEOUT))
while ((SECONDS < deadline)); do
    if ! kill -0 "$PROXY_PID" 2>/dev/null; then
        wait "$PROXY_PID" && prc=0 || prc=$?
        PROXY_PID=
        log "proxy exited early (status $prc)"
        show_proxy_log
        fail "proxy-start: exited with status $prc before becoming ready"
        summary
        exit 1
    fi
    if [[ -s "$TMP/ready.json" ]]; then
        PUBLIC_URL=$("$VENV/bin/python" -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(d["public_url"])' "$TMP/ready.json" 2>/dev/null) || PUBLIC_URL=
        [[ -n "$PUBLIC_URL" ]] && break
        # present but not (yet) parseable: allow 3 s for the write to finish
        bad_ready=$((${bad_ready:-0} + 1))
        if ((bad_ready > 30)); then
            show_proxy_log
            fail "proxy-start: ready file has no public_url: $(head -c 300 "$TMP/ready.json")"
            summary
            exit 1
        fi
    fi
    sleep 0.1
done
if [[ -z "$PUBLIC_URL" ]]; then
    show_proxy_log
    fail "proxy-start: no usable ready file after ${READY_TIMEOUT}s"
    summary
    exit 1
fi
CA="$TMP/certs/ca.pem"
if [[ ! -s "$CA" ]]; then
    show_proxy_log
    fail "proxy-start: dev CA $CA missing"
    summary
    exit 1
fi
pass "proxy-start: ready at $PUBLIC_URL ($(cat "$TMP/ready.json"))"
if ! grep -q "a2a-edge listening on " "$TMP/proxy.log"; then
    log "note: stdout line 'a2a-edge listening on …' not seen (yet)"
fi

# ---- the SDK client: once with the bearer token, once with the API key
run_client() {
    local label=$1
    shift
    local status=0
    log "sdk-client ($label)"
    timeout --foreground --kill-after=5 "$CLIENT_TIMEOUT" \
        "$VENV/bin/python" -u "$HERE/sdk_client.py" --url "$PUBLIC_URL" --ca "$CA" "$@" \
        | sed -u "s/^\(PASS\|FAIL\) /\1 [$label] /" | tee "$TMP/client-$label.out" || status=$?
    NPASS=$((NPASS + $(grep -c '^PASS ' "$TMP/client-$label.out" || true)))
    NFAIL=$((NFAIL + $(grep -c '^FAIL ' "$TMP/client-$label.out" || true)))
    if ((status == 124 || status == 137)); then
        fail "sdk-client ($label): timed out after ${CLIENT_TIMEOUT}s"
    elif ((status != 0)) && ! grep -q '^FAIL ' "$TMP/client-$label.out"; then
        fail "sdk-client ($label): exited with status $status"
    fi
}
status=0
run_client bearer
run_client api-key --token-env INTEROP_API_KEY --auth-header X-API-Key

# ---- graceful shutdown: SIGTERM drains and exits 0
kill -TERM "$PROXY_PID" 2>/dev/null || true
prc=
for _ in $(seq 1 150); do # up to 15 s
    if ! kill -0 "$PROXY_PID" 2>/dev/null; then
        wait "$PROXY_PID" && prc=0 || prc=$?
        break
    fi
    sleep 0.1
done
if [[ -z "$prc" ]]; then
    fail "proxy-sigterm: still running 15 s after SIGTERM"
    status=1
elif ((prc == 0)); then
    PROXY_PID=
    pass "proxy-sigterm: exited 0"
else
    PROXY_PID=
    fail "proxy-sigterm: exit status $prc"
    status=1
fi

summary
if ((status != 0 || NFAIL != 0)); then
    show_proxy_log
    log "interop: FAILED"
    exit 1
fi
log "interop: all checks passed"
