#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
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
LOG_TAG=interop
# shellcheck source=lib.sh
source "$HERE/lib.sh"
VENV=$SDK_VENV # shared with card_sign.sh and identity.sh
SDK_SPEC='a2a-sdk==1.3.0'
READY_TIMEOUT=${READY_TIMEOUT:-60}
CLIENT_TIMEOUT=${CLIENT_TIMEOUT:-150}
PYTHON=${PYTHON:-python3}

summary() { echo "interop: $NPASS passed, $NFAIL failed"; }

# ---- virtualenv with the SDK (reused when it already has the right version)
sdk_ok() { venv_has "$VENV" '' a2a-sdk==1.3.0; }
ensure_venv sdk_ok "$VENV" "$SDK_SPEC" "$PYJWT_SPEC" || { log "a2a-sdk 1.3.0 not importable after install"; exit 1; }
PY="$VENV/bin/python"

# ---- the binary
edge_bin release
[[ -x "$BIN" ]] || { log "binary not found or not executable: $BIN"; exit 1; }

# ---- temp dir, cleanup
make_tmp a2a-interop

show_proxy_log() {
    [[ -s "$TMP/proxy.log" ]] || return 0
    show_tail "$TMP/proxy.log" "proxy log" 40
    log "-----------------------------------"
}

INTEROP_TOKEN=$(rand_token)
INTEROP_API_KEY=$(rand_token)
export INTEROP_TOKEN INTEROP_API_KEY

{
    policy_head "$TMP/certs" engine embedded
    cat <<EOF

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
} >"$TMP/policy.toml"

# ---- start the proxy
log "starting $BIN serve"
start_edge "$TMP/policy.toml" "$TMP/ready.json" "$TMP/proxy.log"
PROXY_PID=$EDGE_PID

if ! wait_ready "$PROXY_PID" "$TMP/ready.json"; then
    [[ "$READY_WHY" != exited ]] || log "proxy exited early (status $READY_STATUS)"
    show_proxy_log
    fail "proxy-start: $READY_ERR"
    summary
    exit 1
fi
PUBLIC_URL=$READY_URL
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
        "$PY" -u "$HERE/sdk_client.py" --url "$PUBLIC_URL" --ca "$CA" "$@" \
        | sed -u "s/^\(PASS\|FAIL\) /\1 [$label] /" | tee "$TMP/client-$label.out" || status=$?
    tally "sdk-client ($label)" "$status" "$TMP/client-$label.out"
}
status=0
run_client bearer
run_client api-key --token-env INTEROP_API_KEY --auth-header X-API-Key

# ---- graceful shutdown: SIGTERM drains and exits 0
sigterm_check "$PROXY_PID" || status=1

summary
if ((status != 0 || NFAIL != 0)); then
    show_proxy_log
    log "interop: FAILED"
    exit 1
fi
log "interop: all checks passed"
